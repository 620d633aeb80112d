package watermarks

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// P is a partition handle, dense from 0, valid only for the Tracker that
// issued it. Methods given a P that tracker did not issue panic.
type P int

// Rec is one input data record after its phase is known.
type Rec struct {
	Phase   uint64
	EventMs int64 // record timestamp in ms
	Timed   bool  // true when Phase was derived from the timestamp (no phase header)
	Bytes   int   // bytes the pipeline buffers for it
}

// Tracker holds the watermarks and seal and pause decisions of one pipeline.
// It starts no goroutine and is not safe for concurrent use: one goroutine
// owns it and calls every method.
type Tracker struct {
	cfg     Config
	phaseMs int64 // PhaseLength in ms
	oooMs   int64 // MaxOutOfOrderness in ms
	fault   fault // test-only deliberate bug; zero in production

	parts []part
	index map[partKey]P

	global   uint64 // first unsealed phase
	globalMs int64

	// floor caps global and globalMs while floorSet (see Floor); local is
	// the last scan's candidate before the cap (see Local).
	floor    Mark
	floorSet bool
	local    Mark
	// sealedAbove is one past the highest phase this tracker sealed: with
	// every partition idle it holds nothing below it, so Local stays at
	// or above it after those phases sealed (scan).
	sealedAbove uint64

	phases map[uint64]*phase // open phases by ID
	open   []*phase          // open phases, ascending ID
	free   []*phase          // sealed phase states kept for reuse

	bufBytes int64
	// held is the bytes of sealed phases the caller still holds in memory
	// (Hold): they count toward the bound like open phases.
	held     int64
	pressure bool // between crossing half the bound and falling to a quarter
	dirty    []P  // partitions whose effective pause state may have changed

	timeouts int64
	timeout  adaptive

	// start is the sealedBelow the tracker began with; sealed, when
	// sealedAny, the highest phase a Seal returned, at sealedAt (or the
	// tracker's creation): MarkEvery's state.
	start     uint64
	sealed    uint64
	sealedAny bool
	sealedAt  time.Time
}

type partKey struct {
	topic     string
	partition int32
}

// part is the state of one input partition.
type part struct {
	partKey
	low      uint64 // lowest phase not passed; never decreases
	twm      int64  // time watermark in ms; never decreases
	maxEvent int64  // newest timestamp seen (math.MinInt64 before any)
	marker   uint64 // highest input marker phase, valid when marked
	marked   bool
	lag      int64
	lagKnown bool
	// wasIdle: idle at its committed position (WasIdle), until the first
	// lag measurement or record.
	wasIdle bool
	idle    bool // as decided by the last Advance; cleared by activity

	quietSince time.Time // start of the current unpaused quiet span
	lastRecord time.Time

	reasons      []string // external pause requests
	bufferPaused bool     // the tracker's own "buffer" pause request
	paused       bool     // effective pause state
	reported     bool     // paused as last returned by Actions
	isDirty      bool
	pausedSince  time.Time
	pausedFor    time.Duration

	bufRecords int
	bufBytes   int64
}

// New starts a tracker whose phases below sealedBelow are already sealed (from
// the committed offsets' metadata after a restart; 0 on a fresh start). It
// returns an error wrapping ErrConfig when cfg is invalid.
func New(cfg Config, sealedBelow uint64) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tracker{
		cfg:      cfg,
		phaseMs:  cfg.PhaseLength.Milliseconds(),
		oooMs:    cfg.MaxOutOfOrderness.Milliseconds(),
		index:    make(map[partKey]P),
		global:   sealedBelow,
		start:    sealedBelow,
		phases:   make(map[uint64]*phase),
		timeout:  adaptive{min: cfg.SealTimeoutMin, max: cfg.SealTimeoutMax, current: cfg.SealTimeoutMax},
		sealedAt: cfg.Now(),
	}, nil
}

// Add registers an input partition; adding the same topic and partition again
// returns the same P. A new partition starts at the global watermark (phase and
// time), its quiet clock starts now, and its lag is unknown (so it is not idle)
// until the first Lag report.
func (t *Tracker) Add(topic string, partition int32) P {
	k := partKey{topic, partition}
	if p, ok := t.index[k]; ok {
		return p
	}
	p := P(len(t.parts))
	now := t.cfg.Now()
	t.parts = append(t.parts, part{
		partKey:    k,
		low:        t.global,
		twm:        t.globalMs,
		maxEvent:   math.MinInt64,
		quietSince: now,
	})
	t.index[k] = p
	return p
}

// WasIdle tells the tracker that p was idle when its position was
// committed (a restart): p is idle again as soon as its lag is known to
// be zero, without a new IdleTimeout of quiet, unless a record comes
// first. Call it right after Add.
func (t *Tracker) WasIdle(p P) { t.parts[p].wasIdle = true }

// Partition returns the topic and partition number behind p.
func (t *Tracker) Partition(p P) (topic string, partition int32) {
	ps := &t.parts[p]
	return ps.topic, ps.partition
}

// Len returns the number of partitions added; valid handles are 0..Len()-1.
func (t *Tracker) Len() int { return len(t.parts) }

// Low returns the lowest phase p has not passed. It never decreases.
func (t *Tracker) Low(p P) uint64 { return t.parts[p].low }

// Idle reports whether p was idle as of the last Advance (activity clears
// it at once).
func (t *Tracker) Idle(p P) bool { return t.parts[p].idle }

// Timeouts returns how many phases outlived the seal timeout (each counted
// once), as Snapshot().Timeouts.
func (t *Tracker) Timeouts() int64 { return t.timeouts }

// BufferedBytes returns the bytes of records in open phases; the
// backpressure bound applies to them plus what Hold added.
func (t *Tracker) BufferedBytes() int64 { return t.bufBytes }

// Hold adds n (or, negative, removes) bytes of sealed phases that the
// caller still holds in memory, waiting for or in a transaction, to what
// the backpressure bound counts. The caller removes what it added.
func (t *Tracker) Hold(n int64) { t.held += n }

// Held returns what Hold added and has not removed.
func (t *Tracker) Held() int64 { return t.held }

// Global returns the first unsealed phase. It never decreases.
func (t *Tracker) Global() uint64 { return t.global }

// GlobalMs returns the global time watermark in ms: the minimum over live
// partitions of their time watermark, or the maximum over all partitions when
// all are idle. It never decreases.
func (t *Tracker) GlobalMs() int64 { return t.globalMs }

// Record is the per-record hot path: O(1) amortised and allocation-free once
// the record's phase is open. Every record, late or not, counts as activity
// (the quiet clock restarts, an idle partition becomes live) and advances the
// partition's watermark. A record of a sealed phase is Late and not buffered;
// any other is buffered in its open phase.
func (t *Tracker) Record(p P, rec Rec) Verdict {
	ps := &t.parts[p]
	now := t.cfg.Now()
	ps.quietSince = now
	ps.lastRecord = now
	ps.wasIdle = false
	ps.idle = false

	low := ps.low
	if rec.Timed {
		if rec.EventMs > ps.maxEvent {
			ps.maxEvent = rec.EventMs
			if w := rec.EventMs - t.oooMs; w > ps.twm {
				ps.twm = w
				low = max(low, t.timeLow(w))
			}
		}
	} else {
		low = max(low, rec.Phase) // a header phase H passes every phase < H
	}

	v := Late
	if rec.Phase >= t.global {
		v = Accepted
		ph := t.phases[rec.Phase]
		if ph == nil {
			ph = t.openPhase(rec.Phase, now)
		}
		s := ph.slot(p)
		s.records++
		s.bytes += int64(rec.Bytes)
		ph.records++
		ph.bytes += int64(rec.Bytes)
		ps.bufRecords++
		ps.bufBytes += int64(rec.Bytes)
		t.bufBytes += int64(rec.Bytes)
	}
	if low > ps.low {
		t.pass(p, low, now)
	}
	return v
}

// Marker records an input marker: p passed every phase <= phase. It counts as
// activity like a record. It is idempotent and monotone; detecting repeated
// or stale markers is the dedupe package's job.
func (t *Tracker) Marker(p P, phase uint64) {
	ps := &t.parts[p]
	now := t.cfg.Now()
	ps.quietSince = now
	ps.idle = false
	if !ps.marked || phase > ps.marker {
		ps.marker, ps.marked = phase, true
	}
	low := phase + 1
	if phase == math.MaxUint64 {
		low = phase // saturate: no phase above the largest ID to name
	}
	if low > ps.low {
		t.pass(p, low, now)
	}
}

// Lag reports how many records p is behind its last stable offset. A negative
// value means unknown (as before the first report); unknown or non-zero lag
// keeps a partition from being idle.
func (t *Tracker) Lag(p P, records int64) {
	ps := &t.parts[p]
	if !ps.lagKnown && records >= 0 {
		// Silence counts only while the lag can be observed: after the
		// brokers could not be asked (unknown lag), the quiet clock
		// restarts; where it stood, for a partition that was idle at its
		// committed position and still has no lag (WasIdle).
		ps.quietSince = t.cfg.Now()
		if ps.wasIdle && records == 0 {
			ps.quietSince = ps.quietSince.Add(-t.cfg.IdleTimeout)
		}
	}
	ps.wasIdle = false
	ps.lag, ps.lagKnown = records, records >= 0
	if records != 0 {
		ps.idle = false
	}
}

// timeLow is the lowest phase not passed by a time watermark of w ms: every
// phase N with (N+1)*PhaseLength <= w is passed.
func (t *Tracker) timeLow(w int64) uint64 {
	if w < 0 {
		return 0
	}
	return uint64(w / t.phaseMs)
}

// pass raises p's Low to low and stamps the moment p passed each open phase
// in [old Low, low), for the straggler statistics. Each (phase, partition)
// pair is stamped once, so the cost is amortised over the phase's life.
func (t *Tracker) pass(p P, low uint64, now time.Time) {
	ps := &t.parts[p]
	i, _ := slices.BinarySearchFunc(t.open, ps.low, func(ph *phase, id uint64) int { return cmp.Compare(ph.id, id) })
	for ; i < len(t.open) && t.open[i].id < low; i++ {
		t.open[i].slot(p).passed = now
	}
	ps.low = low
}
