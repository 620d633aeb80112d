package align

import (
	"time"

	"github.com/phasegate/phasegate/watermarks"
)

// quarantineBatch commits quarantined records without waiting for a seal
// once this many are queued.
const quarantineBatch = 1000

// Step is what one evaluation of the session decided.
type Step[M any] struct {
	// Batch is the next transaction step to write, nil when nothing is
	// due or a Batch is still in flight.
	Batch *Batch[M]
	// Fallback is set when the Batch is an AbortBatch: the phase that
	// stopped streaming.
	Fallback *Fallback
	// Actions are the partitions to pause or resume, in partition order.
	Actions []Action
	// Idle are the partitions that became idle or live again.
	Idle []IdleChange
	// Holds are the partitions that began or stopped holding the session's
	// watermark back (HoldChange).
	Holds []HoldChange
	// Timeouts is how many phases newly outlived the seal timeout (Holders
	// of the View names the partitions holding the watermark back).
	Timeouts int64
}

// Action is a change of a partition's pause state.
type Action struct {
	TP
	Pause bool
	// Reasons are the pause requests in force (watermarks.Action).
	Reasons []string
	// Paused is, on a resume, how long the pause that ended lasted.
	Paused time.Duration
}

// IdleChange is a partition that became idle (Idle) or live again.
type IdleChange struct {
	TP
	Idle      bool
	Watermark uint64 // the partition's watermark phase
}

// HoldChange is a partition that began (Holds) or stopped holding the
// session's watermark back: a live partition whose watermark phase is the
// lowest of the session's live partitions. Until it passes that phase no
// phase above it seals, so its records are the ones the session needs
// first: the caller reads them before any other (proxy: the claims of
// such partitions hand their records over ahead of the rest).
type HoldChange struct {
	TP
	Holds bool
}

// Step evaluates idleness, the global watermark, the seal timeout and the
// pause decisions, and builds the next Batch when a phase sealed or
// quarantined records are due. The caller calls it after each batch of
// records and on a ticker. It costs O(partitions) plus the Batch.
func (s *Session[M]) Step() Step[M] {
	var st Step[M]
	for _, seal := range s.tracker.Advance() {
		s.dedupe.Seal(seal.Phase)
		s.sealed = append(s.sealed, seal)
		if ph := s.phases[seal.Phase]; ph != nil {
			s.sealedBytes += ph.bytes
			s.tracker.Hold(ph.bytes) // still in memory until committed
		}
	}
	if s.dedupeFull && !s.dedupe.Full() {
		s.dedupeFull = false
		for _, ps := range s.byP {
			s.tracker.Resume(ps.p, ReasonDedupe)
		}
	}
	if s.inflight == nil && s.replaying == 0 {
		st.Batch, st.Fallback = s.next()
		s.inflight = st.Batch
	}
	for _, a := range s.tracker.Actions() {
		ps := s.byP[a.P]
		ps.paused = a.Pause
		act := Action{TP: ps.TP, Pause: a.Pause, Reasons: a.Reasons}
		if !a.Pause {
			act.Paused = a.PausedFor - ps.pausedSeen
			ps.pausedSeen = a.PausedFor
		}
		st.Actions = append(st.Actions, act)
	}
	local := s.tracker.Local()
	for _, ps := range s.byP {
		idle := s.tracker.Idle(ps.p)
		if idle != ps.idle {
			ps.idle = idle
			st.Idle = append(st.Idle, IdleChange{TP: ps.TP, Idle: idle, Watermark: s.tracker.Low(ps.p)})
		}
		if holds := !idle && !local.Idle && s.tracker.Low(ps.p) == local.Phase; holds != ps.holds {
			ps.holds = holds
			st.Holds = append(st.Holds, HoldChange{TP: ps.TP, Holds: holds})
		}
	}
	if n := s.tracker.Timeouts(); n > s.timeoutsSeen {
		st.Timeouts = n - s.timeoutsSeen
		s.timeoutsSeen = n
	}
	return st
}

// quarantineDue reports whether queued quarantine records should be
// committed now even though no phase sealed.
func (s *Session[M]) quarantineDue() bool {
	return len(s.quar) >= quarantineBatch ||
		len(s.quar) > 0 && s.now().Sub(s.quarSince) >= s.cfg.QuarantineDelay
}

// Committed records that b's transaction step succeeded (a CommitBatch
// committed: its phases leave the buffer, its quarantined records the
// queue), and the next Step may build the next Batch. b must be the Batch
// the last Step returned.
func (s *Session[M]) Committed(b *Batch[M]) {
	if b != s.inflight {
		panic("align: Committed called with a Batch that is not in flight")
	}
	s.inflight = nil
	if b.Kind != CommitBatch {
		return
	}
	s.marked = max(s.marked, b.global)
	for _, seal := range b.Seals {
		delete(s.phases, seal.Phase)
	}
	s.tracker.Hold(-b.bytes)
	s.sealed = s.sealed[len(b.Seals):]
	n := copy(s.quar, s.quar[b.quarantined:])
	clear(s.quar[n:])
	s.quar = s.quar[:n]
	if len(s.quar) > 0 {
		s.quarSince = s.now()
	}
}

// Sealed is a phase in a Batch.
type Sealed struct {
	watermarks.Seal
	// PerTopic counts its data records per input topic.
	PerTopic map[string]int
	header   []byte   // the phasegate.phase value
	markers  [][]byte // marker values by lane
	lanes    *lanes   // the session's, to find a marker write's lane
}
