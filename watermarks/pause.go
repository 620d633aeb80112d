package watermarks

import (
	"slices"
	"time"
)

// ReasonBuffer is the reason of the tracker's own backpressure pauses.
const ReasonBuffer = "buffer"

// Action is a change of a partition's effective pause state, for the
// consumer to apply. Reasons are the pause requests in force at the change,
// sorted: why it is paused, or, on a resume, the requests still pending
// because the partition now holds the global minimum (empty when none).
type Action struct {
	P       P
	Pause   bool
	Reasons []string
	// PausedFor is P's cumulative effective pause time before this change:
	// on a resume it includes the pause that just ended.
	PausedFor time.Duration
}

// Pause records an external pause request (e.g. "operator", "rebalance").
// It takes effect at once unless p holds the global minimum (Low(p) <=
// Global()); then it is deferred until an Advance finds p ahead. Repeating a
// reason is a no-op. The reason "buffer" is the tracker's own and is kept
// apart from external requests of the same name.
func (t *Tracker) Pause(p P, reason string) {
	ps := &t.parts[p]
	if !slices.Contains(ps.reasons, reason) {
		ps.reasons = append(ps.reasons, reason)
		slices.Sort(ps.reasons)
	}
	t.refresh(p, t.cfg.Now())
}

// Resume withdraws an external pause request; p runs again once no request
// remains. Withdrawing a reason that was not requested is a no-op.
func (t *Tracker) Resume(p P, reason string) {
	ps := &t.parts[p]
	if i := slices.Index(ps.reasons, reason); i >= 0 {
		ps.reasons = slices.Delete(ps.reasons, i, i+1)
	}
	t.refresh(p, t.cfg.Now())
}

// Actions returns the net changes of effective pause state since the last
// call, in P order; nil when nothing changed.
func (t *Tracker) Actions() []Action {
	var out []Action
	for _, p := range t.dirty {
		ps := &t.parts[p]
		ps.isDirty = false
		if ps.paused != ps.reported {
			ps.reported = ps.paused
			out = append(out, Action{P: p, Pause: ps.paused, Reasons: ps.reasonList(), PausedFor: ps.pausedFor})
		}
	}
	t.dirty = t.dirty[:0]
	slices.SortFunc(out, func(a, b Action) int { return int(a.P - b.P) })
	return out
}

// backpressure applies invariant 5: from half the byte bound (open phases
// plus what the caller holds) until a quarter,
// every live partition ahead of the global watermark is asked to pause; then
// every partition's effective state is refreshed against the new Global.
func (t *Tracker) backpressure(now time.Time) {
	switch b := t.bufBytes + t.held; {
	case 2*b >= t.cfg.MaxBufferBytes:
		t.pressure = true
	case 4*b <= t.cfg.MaxBufferBytes:
		t.pressure = false
	}
	for i := range t.parts {
		ps := &t.parts[i]
		ps.bufferPaused = t.pressure && !ps.idle && ps.low > t.global
		t.refresh(P(i), now)
	}
}

// refresh recomputes p's effective pause state: paused when some request is
// in force and p is ahead of the global watermark. The partition holding the
// minimum always runs, so nothing is paused forever: G reaches it.
func (t *Tracker) refresh(p P, now time.Time) {
	ps := &t.parts[p]
	want := len(ps.reasons) > 0 || ps.bufferPaused
	if t.fault != faultPauseMinHolder {
		want = want && ps.low > t.global
	}
	if want == ps.paused {
		return
	}
	ps.paused = want
	if want {
		ps.pausedSince = now
		ps.idle = false
	} else {
		ps.pausedFor += now.Sub(ps.pausedSince)
		ps.quietSince = now // paused time never counts toward idleness
	}
	if !ps.isDirty {
		ps.isDirty = true
		t.dirty = append(t.dirty, p)
	}
}

// reasonList is the sorted pause requests in force, including "buffer".
func (ps *part) reasonList() []string {
	out := slices.Clone(ps.reasons)
	if ps.bufferPaused && !slices.Contains(out, ReasonBuffer) {
		out = append(out, ReasonBuffer)
		slices.Sort(out)
	}
	return out
}
