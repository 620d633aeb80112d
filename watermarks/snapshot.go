package watermarks

import "time"

// Snapshot is a copy of the tracker's state for /phases and metrics.
type Snapshot struct {
	Global        uint64
	GlobalMs      int64
	Partitions    []PartitionState // in P order
	Open          []PhaseState     // ascending phase
	BufferedBytes int64
	SealTimeout   time.Duration // current adaptive value
	Timeouts      int64         // phases that outlived the seal timeout (once each)
}

// PartitionState is one partition in a Snapshot.
type PartitionState struct {
	P               P
	Topic           string
	Partition       int32
	Low             uint64
	TimeWatermarkMs int64
	Lag             int64
	LagKnown        bool
	Idle            bool     // as of the last Advance, cleared by activity
	Paused          bool     // effective pause state
	Reasons         []string // pause requests, including deferred ones and "buffer"
	BufferedRecords int
	BufferedBytes   int64
	PausedFor       time.Duration // cumulative effective pause time, including now
	LastRecord      time.Time     // zero before the first record
}

// PhaseState is one open phase in a Snapshot.
type PhaseState struct {
	Phase   uint64
	Records int
	Bytes   int64
	Opened  time.Time
}

// Snapshot copies the current state. It allocates; it is not for the
// per-record path.
func (t *Tracker) Snapshot() Snapshot {
	now := t.cfg.Now()
	s := Snapshot{
		Global:        t.global,
		GlobalMs:      t.globalMs,
		Partitions:    make([]PartitionState, len(t.parts)),
		Open:          make([]PhaseState, len(t.open)),
		BufferedBytes: t.bufBytes,
		SealTimeout:   t.timeout.current,
		Timeouts:      t.timeouts,
	}
	for i := range t.parts {
		ps := &t.parts[i]
		pausedFor := ps.pausedFor
		if ps.paused {
			pausedFor += now.Sub(ps.pausedSince)
		}
		s.Partitions[i] = PartitionState{
			P:               P(i),
			Topic:           ps.topic,
			Partition:       ps.partition,
			Low:             ps.low,
			TimeWatermarkMs: ps.twm,
			Lag:             ps.lag,
			LagKnown:        ps.lagKnown,
			Idle:            ps.idle,
			Paused:          ps.paused,
			Reasons:         ps.reasonList(),
			BufferedRecords: ps.bufRecords,
			BufferedBytes:   ps.bufBytes,
			PausedFor:       pausedFor,
			LastRecord:      ps.lastRecord,
		}
	}
	for i, ph := range t.open {
		s.Open[i] = PhaseState{Phase: ph.id, Records: ph.records, Bytes: ph.bytes, Opened: ph.opened}
	}
	return s
}
