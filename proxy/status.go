package proxy

import (
	"strconv"
	"time"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/watermarks"
)

// Status is what /phases serves: the alignment state as of Updated.
type Status struct {
	Updated           time.Time         `json:"updated"`
	Joined            bool              `json:"joined"`
	Ready             bool              `json:"ready"`
	GlobalWatermark   uint64            `json:"global_watermark_phase"`
	GlobalMs          int64             `json:"global_watermark_ms"`
	LastSealed        *uint64           `json:"last_sealed_phase,omitempty"`
	SealTimeout       string            `json:"seal_timeout"`
	BufferedBytes     int64             `json:"buffered_bytes"`
	MaxBufferBytes    int64             `json:"max_buffer_bytes"`
	PeakBufferedBytes int64             `json:"peak_buffered_bytes"`
	Partitions        []PartitionStatus `json:"partitions"`
	OpenPhases        []OpenPhaseStatus `json:"open_phases"`
	Sealed            []SealStatus      `json:"sealed"`
	Dedupe            *dedupe.Stats     `json:"dedupe,omitempty"`
	// Instance is this instance's transactional ID; Tasks every task of
	// the fleet as the watermark topic shows it (owner, watermark).
	Instance string       `json:"instance"`
	Tasks    []TaskStatus `json:"tasks"`
}

// PartitionStatus is one input partition in Status.
type PartitionStatus = align.PartitionStatus

// OpenPhaseStatus is one open phase in Status.
type OpenPhaseStatus = align.OpenPhaseStatus

// SealStatus is one recently committed phase in Status.
type SealStatus struct {
	Phase     uint64         `json:"phase"`
	SealedBy  string         `json:"sealed_by"`
	Records   int            `json:"records"`
	Sealed    time.Time      `json:"sealed"`
	Duration  float64        `json:"duration_seconds"`
	PerTopic  map[string]int `json:"records_per_topic"`
	CV        float64        `json:"cv"`
	Straggler string         `json:"slowest_partition"`
}

// historyLen is how many committed phases Status keeps.
const historyLen = 32

// publishEvery bounds how often the loop rebuilds the status.
const publishEvery = 200 * time.Millisecond

// record remembers a committed phase for Status.
func (p *Pipeline) record(s align.Sealed, slow watermarks.PartitionDuration) {
	slowest := ""
	if slow.Topic != "" {
		slowest = align.TP{Topic: slow.Topic, Partition: slow.Partition}.String()
	}
	p.history = append(p.history, SealStatus{
		Phase: s.Phase, SealedBy: s.By.String(), Records: s.Records, Sealed: s.Sealed,
		Duration: s.Sealed.Sub(s.Opened).Seconds(), PerTopic: s.PerTopic, CV: s.Stats.CV, Straggler: slowest,
	})
	if len(p.history) > historyLen {
		p.history = p.history[len(p.history)-historyLen:]
	}
}

// publish rebuilds the status (at most every publishEvery) from the
// session's View, and sets the level gauges that follow it.
func (p *Pipeline) publish(g *generation) {
	now := p.now()
	if now.Sub(p.lastStatus) < publishEvery {
		return
	}
	p.lastStatus = now
	st := &Status{Updated: now, Sealed: append([]SealStatus(nil), p.history...),
		MaxBufferBytes: p.cfg.Watermarks.MaxBufferBytes, PeakBufferedBytes: p.peakBuffered,
		Instance: p.cfg.TransactionalID, Tasks: p.fleetStatus(g)}
	if n := len(p.history); n > 0 {
		last := p.history[n-1].Phase
		st.LastSealed = &last
	}
	if g != nil {
		v := g.s.View()
		st.Joined = true
		st.GlobalWatermark, st.GlobalMs = v.GlobalWatermark, v.GlobalMs
		st.SealTimeout = v.SealTimeout.String()
		st.BufferedBytes = v.BufferedBytes
		st.Partitions, st.OpenPhases, st.Dedupe = v.Partitions, v.OpenPhases, &v.Dedupe
		st.Ready = len(st.OpenPhases) == 0 || v.AllIdle || now.Sub(p.lastSeal) < 2*v.SealTimeout
		p.metrics.observe(st, p.cfg.InputTopics)
	}
	p.status.Store(st)
}

func partLabel(partition int32) string { return strconv.Itoa(int(partition)) }
