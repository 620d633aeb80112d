package align

import (
	"cmp"
	"slices"
	"time"

	"github.com/phasegate/phasegate/dedupe"
)

// View is the session's part of /phases: a copy of the state, built
// without changing anything.
type View struct {
	GlobalWatermark uint64
	GlobalMs        int64
	SealTimeout     time.Duration
	BufferedBytes   int64
	Partitions      []PartitionStatus
	OpenPhases      []OpenPhaseStatus
	// AllIdle is true when every partition is idle.
	AllIdle bool
	// Dedupe is the dedupe cache's phases, identities and evictions.
	Dedupe dedupe.Stats
}

// PartitionStatus is one input partition in /phases.
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
	// HoldsWatermark marks the partitions holding the global watermark
	// back (Holders' rule); the live page and `sidecar status` show it.
	HoldsWatermark bool `json:"holds_watermark"`
}

// OpenPhaseStatus is one open phase in /phases.
type OpenPhaseStatus struct {
	Phase   uint64    `json:"phase"`
	Records int       `json:"records"`
	Bytes   int64     `json:"bytes"`
	Opened  time.Time `json:"opened"`
}

// View copies the state for /phases. It allocates; it is not for the
// per-record path.
func (s *Session[M]) View() View {
	snap := s.tracker.Snapshot()
	v := View{
		GlobalWatermark: snap.Global, GlobalMs: snap.GlobalMs, SealTimeout: snap.SealTimeout,
		BufferedBytes: s.BufferedBytes(), AllIdle: len(snap.Partitions) > 0, Dedupe: s.dedupe.Stats(),
		Partitions: make([]PartitionStatus, len(snap.Partitions)),
	}
	for i, ps := range snap.Partitions {
		v.Partitions[i] = PartitionStatus{
			Topic: ps.Topic, Partition: ps.Partition, Watermark: ps.Low, WatermarkMs: ps.TimeWatermarkMs,
			Lag: ps.Lag, LagKnown: ps.LagKnown, Idle: ps.Idle, Paused: ps.Paused, PauseReasons: ps.Reasons,
			BufferedRecords: ps.BufferedRecords, BufferedBytes: ps.BufferedBytes, Position: s.byP[ps.P].next,
		}
		v.AllIdle = v.AllIdle && ps.Idle
	}
	for _, i := range Holders(v.Partitions) {
		v.Partitions[i].HoldsWatermark = true
	}
	for _, o := range snap.Open {
		v.OpenPhases = append(v.OpenPhases, OpenPhaseStatus{Phase: o.Phase, Records: o.Records, Bytes: o.Bytes, Opened: o.Opened})
	}
	return v
}

// Holders returns the indexes of the partitions holding the global
// watermark back: among live (not idle) partitions, those with the lowest
// (watermark phase, time watermark), provided some live partition is ahead
// of them. With fewer than two live partitions, or all level, none is. It
// is the one rule for /phases, the live page, `sidecar status` and the
// seal-timeout log.
func Holders(parts []PartitionStatus) []int {
	order := func(a, b PartitionStatus) int {
		return cmp.Or(cmp.Compare(a.Watermark, b.Watermark), cmp.Compare(a.WatermarkMs, b.WatermarkMs))
	}
	var live []int
	for i, p := range parts {
		if !p.Idle {
			live = append(live, i)
		}
	}
	if len(live) < 2 {
		return nil
	}
	byOrder := func(i, j int) int { return order(parts[i], parts[j]) }
	lo, hi := slices.MinFunc(live, byOrder), slices.MaxFunc(live, byOrder)
	if byOrder(lo, hi) == 0 {
		return nil
	}
	return slices.DeleteFunc(live, func(i int) bool { return byOrder(i, lo) != 0 })
}
