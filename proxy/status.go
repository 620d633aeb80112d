package proxy

import (
	"strconv"
	"time"

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
}

// PartitionStatus is one input partition in Status.
type PartitionStatus struct {
	Topic           string   `json:"topic"`
	Partition       int32    `json:"partition"`
	Watermark       uint64   `json:"watermark_phase"`
	WatermarkMs     int64    `json:"watermark_ms"`
	Lag             int64    `json:"lag"`
	LagKnown        bool     `json:"lag_known"`
	Idle            bool     `json:"idle"`
	Paused          bool     `json:"paused"`
	PauseReasons    []string `json:"pause_reasons,omitempty"`
	BufferedRecords int      `json:"buffered_records"`
	BufferedBytes   int64    `json:"buffered_bytes"`
	Position        int64    `json:"position"`
}

// OpenPhaseStatus is one open phase in Status.
type OpenPhaseStatus struct {
	Phase   uint64    `json:"phase"`
	Records int       `json:"records"`
	Bytes   int64     `json:"bytes"`
	Opened  time.Time `json:"opened"`
}

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
func (p *Pipeline) record(s watermarks.Seal, ph *openPhase) {
	per := map[string]int{}
	for _, m := range ph.records {
		per[m.Topic]++
	}
	slowest := ""
	for _, d := range s.Stats.PerPartition {
		if d.P == s.Stats.Slowest {
			slowest = d.Topic + "/" + strconv.Itoa(int(d.Partition))
		}
	}
	p.history = append(p.history, SealStatus{
		Phase: s.Phase, SealedBy: s.By.String(), Records: s.Records, Sealed: s.Sealed,
		Duration: s.Sealed.Sub(s.Opened).Seconds(), PerTopic: per, CV: s.Stats.CV, Straggler: slowest,
	})
	if len(p.history) > historyLen {
		p.history = p.history[len(p.history)-historyLen:]
	}
}

// publish rebuilds the status (at most every publishEvery) and the gauges
// that follow it.
func (p *Pipeline) publish(g *generation) {
	now := p.now()
	if now.Sub(p.lastStatus) < publishEvery {
		return
	}
	p.lastStatus = now
	st := &Status{Updated: now, Sealed: append([]SealStatus(nil), p.history...),
		MaxBufferBytes: p.cfg.Watermarks.MaxBufferBytes, PeakBufferedBytes: p.peakBuffered}
	if n := len(p.history); n > 0 {
		last := p.history[n-1].Phase
		st.LastSealed = &last
	}
	if g == nil {
		p.status.Store(st)
		return
	}
	snap := g.tracker.Snapshot()
	st.Joined = true
	st.GlobalWatermark, st.GlobalMs = snap.Global, snap.GlobalMs
	st.SealTimeout = snap.SealTimeout.String()
	st.BufferedBytes = snap.BufferedBytes
	allIdle := len(snap.Partitions) > 0
	perTopicBytes, perTopicRecs := map[string]int64{}, map[string]int{}
	holder := slowestLive(snap)
	for _, ps := range snap.Partitions {
		part := strconv.Itoa(int(ps.Partition))
		if own := g.parts[tp{ps.Topic, ps.Partition}]; own.idle != ps.Idle {
			own.idle = ps.Idle
			if ps.Idle {
				p.log.Info("partition idle: no record for PHASEGATE_IDLE_TIMEOUT and no lag; phases seal without it (sealed_by idle), and a record of a sealed phase arriving later goes to the quarantine",
					"topic", ps.Topic, "partition", ps.Partition, "watermark_phase", ps.Low)
			} else {
				p.log.Info("partition live again", "topic", ps.Topic, "partition", ps.Partition)
			}
		}
		st.Partitions = append(st.Partitions, PartitionStatus{
			Topic: ps.Topic, Partition: ps.Partition, Watermark: ps.Low, WatermarkMs: ps.TimeWatermarkMs,
			Lag: ps.Lag, LagKnown: ps.LagKnown, Idle: ps.Idle, Paused: ps.Paused, PauseReasons: ps.Reasons,
			BufferedRecords: ps.BufferedRecords, BufferedBytes: ps.BufferedBytes,
			Position: g.parts[tp{ps.Topic, ps.Partition}].next,
		})
		allIdle = allIdle && ps.Idle
		perTopicBytes[ps.Topic] += ps.BufferedBytes
		perTopicRecs[ps.Topic] += ps.BufferedRecords
		p.metrics.idle.WithLabelValues(ps.Topic, part).Set(b2f(ps.Idle))
		if own := g.parts[tp{ps.Topic, ps.Partition}]; ps.PausedFor > own.pausedSeen {
			p.metrics.pausedSeconds.WithLabelValues(ps.Topic, part).Add((ps.PausedFor - own.pausedSeen).Seconds())
			own.pausedSeen = ps.PausedFor
		}
		if ps.TimeWatermarkMs > snap.GlobalMs && snap.GlobalMs > 0 {
			p.metrics.watermarkLag.WithLabelValues(ps.Topic, part).Set(float64(ps.TimeWatermarkMs-snap.GlobalMs) / 1000)
		} else {
			p.metrics.watermarkLag.WithLabelValues(ps.Topic, part).Set(0)
		}
	}
	for _, t := range p.cfg.InputTopics {
		p.metrics.bufferedBytes.WithLabelValues(t).Set(float64(perTopicBytes[t]))
		p.metrics.bufferedRecs.WithLabelValues(t).Set(float64(perTopicRecs[t]))
	}
	for _, o := range snap.Open {
		st.OpenPhases = append(st.OpenPhases, OpenPhaseStatus{Phase: o.Phase, Records: o.Records, Bytes: o.Bytes, Opened: o.Opened})
	}
	p.metrics.globalPhase.Set(float64(snap.Global))
	if snap.Timeouts > g.timeoutsSeen {
		p.metrics.sealTimeouts.Add(float64(snap.Timeouts - g.timeoutsSeen))
		g.timeoutsSeen = snap.Timeouts
		args := []any{"seal_timeout", snap.SealTimeout, "policy", p.cfg.Watermarks.SealPolicy}
		if holder != nil {
			args = append(args, "held_by_topic", holder.Topic, "held_by_partition", holder.Partition, "lag", holder.Lag)
		}
		p.log.Warn("a phase stayed open longer than the seal timeout: the partition holding the global watermark has not passed it; check that partition's producer, or set PHASEGATE_SEAL_POLICY=seal to seal such phases anyway (sealed_by timeout)", args...)
	}
	st.Ready = len(st.OpenPhases) == 0 || allIdle || now.Sub(p.lastSeal) < 2*snap.SealTimeout
	p.status.Store(st)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// slowestLive is the live partition holding the global watermark back (the
// lowest watermark), or nil when every partition is idle.
func slowestLive(snap watermarks.Snapshot) *watermarks.PartitionState {
	var slow *watermarks.PartitionState
	for i := range snap.Partitions {
		ps := &snap.Partitions[i]
		if !ps.Idle && (slow == nil || ps.Low < slow.Low) {
			slow = ps
		}
	}
	return slow
}
