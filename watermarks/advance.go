package watermarks

import (
	"math"
	"time"
)

// Seal is one sealed phase that held buffered records, as Advance returns it.
type Seal struct {
	Phase       uint64
	By          Cause
	WatermarkMs int64 // GlobalMs at the time of sealing
	Records     int
	Bytes       int64
	Opened      time.Time // first record of the phase seen (on any partition)
	Sealed      time.Time
	Stats       Straggler
}

// Advance evaluates idleness, the global watermark and the seal timeout at
// Now(), then the pause decisions, and returns the open phases that are now
// sealed, in ascending phase order. Phases without records are sealed silently
// (Global moves past them). The caller calls it after each batch of records
// and on a ticker, then applies Actions. It costs O(partitions) plus
// O(partitions) per returned Seal (its statistics).
func (t *Tracker) Advance() []Seal {
	now := t.cfg.Now()
	var seals []Seal
	if len(t.parts) > 0 {
		v := t.scan(now)
		t.local = Mark{Phase: v.low, Ms: v.ms, Idle: v.allIdle}
		if t.floorSet {
			if v.allIdle {
				// No partition has a record to give: the tracker agrees
				// with the trackers it shares the watermark with, as an
				// idle partition holds no one back (docs/FLEET.md F6).
				v.low, v.ms = max(v.low, t.floor.Phase), max(v.ms, t.floor.Ms)
			}
			v.low, v.ms = min(v.low, t.floor.Phase), min(v.ms, t.floor.Ms)
		}
		if t.fault == faultGlobalMsDecreases {
			t.globalMs = v.ms
		} else {
			t.globalMs = max(t.globalMs, v.ms)
		}
		for len(t.open) > 0 && t.open[0].id < v.low {
			seals = append(seals, t.seal(t.open[0], v.cause(t.open[0].id), now))
		}
		if t.fault == faultGlobalDecreases {
			t.global = v.low
		} else {
			t.global = max(t.global, v.low)
		}
		seals = t.markSealed(seals, v, now)
	}
	seals = t.applyTimeout(seals, now)
	for _, s := range seals {
		t.sealedAbove = max(t.sealedAbove, s.Phase+1)
	}
	t.timeout.update()
	t.backpressure(now)
	return seals
}

// view is what one scan over the partitions learns.
type view struct {
	low        uint64 // candidate global watermark
	ms         int64  // candidate global time watermark
	minIdleLow uint64 // lowest Low of an idle partition; MaxUint64 when none
	minMarker  uint64 // lowest input marker over all partitions
	allMarked  bool   // every partition sent a marker
	allIdle    bool   // every partition is idle
}

// cause is why phase n is sealed: idle if an idle partition had not passed
// it, markers if every partition passed it by a marker, else watermark.
func (v view) cause(n uint64) Cause {
	switch {
	case v.minIdleLow <= n:
		return CauseIdle
	case v.allMarked && v.minMarker >= n:
		return CauseMarkers
	}
	return CauseWatermark
}

// scan decides idleness at now and computes the candidate watermarks: the
// minimum over live partitions, or, when all are idle, the maximum over all
// and past every open phase.
func (t *Tracker) scan(now time.Time) view {
	v := view{minIdleLow: math.MaxUint64, minMarker: math.MaxUint64, allMarked: true}
	liveLow, liveMs, anyLive := uint64(math.MaxUint64), int64(math.MaxInt64), false
	allLow, allMs := uint64(0), int64(math.MinInt64)
	for i := range t.parts {
		ps := &t.parts[i]
		ps.idle = t.idle(ps, now)
		if ps.idle {
			v.minIdleLow = min(v.minIdleLow, ps.low)
		} else {
			anyLive = true
			liveLow = min(liveLow, ps.low)
			liveMs = min(liveMs, ps.twm)
		}
		allLow, allMs = max(allLow, ps.low), max(allMs, ps.twm)
		if ps.marked {
			v.minMarker = min(v.minMarker, ps.marker)
		} else {
			v.allMarked = false
		}
	}
	v.low, v.ms, v.allIdle = allLow, allMs, !anyLive
	if !anyLive {
		// Nor has it anything of the phases it sealed: without this, Local
		// went back to the partitions' own low once the newest open phase
		// had sealed, an idle task's report said it held that phase again,
		// and the other instances never passed it, nor marked it on their
		// partitions (e2e START: 2 rounds of 5).
		v.low = max(v.low, t.sealedAbove)
	}
	if !anyLive && len(t.open) > 0 {
		// Every partition is idle: none has a record to give, so every open
		// phase is complete, the newest one included (docs/DESIGN.md, invariant 5:
		// the last phases seal instead of waiting for data that may never
		// come).
		if top := t.open[len(t.open)-1].id; top < math.MaxUint64 {
			v.low = max(v.low, top+1)
		}
	}
	if anyLive {
		v.low, v.ms = liveLow, liveMs
		if t.fault == faultSealEarly {
			v.low++
		}
	}
	return v
}

// idle is invariant 1 of doc.go: silent for IdleTimeout of unpaused time with
// a known lag of zero.
func (t *Tracker) idle(ps *part, now time.Time) bool {
	return t.cfg.IdleTimeout > 0 && t.fault != faultNeverIdle &&
		ps.lagKnown && ps.lag == 0 && !ps.paused &&
		now.Sub(ps.quietSince) >= t.cfg.IdleTimeout
}

// applyTimeout applies the seal timeout to the lowest open phase, the one that
// holds the global watermark back. PolicyWait counts it once per phase;
// PolicySeal seals it, and the phases after it that also timed out, with
// cause timeout and moves Global past them.
func (t *Tracker) applyTimeout(seals []Seal, now time.Time) []Seal {
	for len(t.open) > 0 {
		ph := t.open[0]
		if now.Sub(ph.opened) <= t.timeout.current {
			break
		}
		if t.cfg.SealPolicy == PolicyWait {
			if !ph.timedOut {
				ph.timedOut = true
				t.timeouts++
			}
			break
		}
		t.timeouts++
		next := ph.id + 1
		if ph.id == math.MaxUint64 {
			next = ph.id
		}
		seals = append(seals, t.seal(ph, CauseTimeout, now))
		t.global = max(t.global, next)
	}
	return seals
}

// markSealed appends the Seal of Config.MarkEvery: one for Global-1 when
// it is due (no Seal for MarkEvery, and Global moved past the last one
// silently), Global-1 is a phase this tracker may seal (not below its
// start: a task's earlier owner marked those), and no phase is open at
// Global. An open phase there may already be streaming into a
// transaction (package align), which a Seal of a lower phase would put
// after its records; its own Seal marks the writer's sealed watermark
// soon enough.
func (t *Tracker) markSealed(seals []Seal, v view, now time.Time) []Seal {
	if t.cfg.MarkEvery <= 0 || t.global <= t.start || now.Sub(t.sealedAt) < t.cfg.MarkEvery || t.phases[t.global] != nil {
		return seals
	}
	top := t.global - 1
	if t.sealedAny && t.sealed >= top {
		return seals
	}
	t.sealed, t.sealedAny, t.sealedAt = top, true, now
	return append(seals, Seal{Phase: top, By: v.cause(top), WatermarkMs: t.globalMs, Opened: now, Sealed: now})
}

// seal turns the lowest open phase into a Seal and releases its bytes.
func (t *Tracker) seal(ph *phase, by Cause, now time.Time) Seal {
	s := Seal{
		Phase:       ph.id,
		By:          by,
		WatermarkMs: t.globalMs,
		Records:     ph.records,
		Bytes:       ph.bytes,
		Opened:      ph.opened,
		Sealed:      now,
		Stats:       t.straggler(ph, now),
	}
	if by != CauseTimeout {
		// A timed-out phase's duration is the timeout itself; learning from
		// it would ratchet the timeout up to its maximum.
		t.timeout.observe(now.Sub(ph.opened))
	}
	t.release(ph)
	t.sealed, t.sealedAny, t.sealedAt = ph.id, true, now
	return s
}
