package watermarks

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// This file is the property checker's model: the rules of doc.go re-stated
// from the raw inputs (newest timestamp, highest header phase, highest marker,
// lag, quiet time, pause state as reported by Actions), independently of the
// tracker's incremental bookkeeping, and the checks of properties (a)-(f).

// mpart is the model of one partition, plus the generator's knobs for it.
type mpart struct {
	topic      string
	startLow   uint64 // Global when added
	startMs    int64  // GlobalMs when added
	maxEv      int64
	anyEv      bool
	maxHeader  uint64
	marker     uint64
	marked     bool
	lag        int64
	lagKnown   bool
	quietSince time.Time
	paused     bool            // effective state, as Actions reported it
	reasons    map[string]bool // external pause requests

	timed  bool  // generator: records carry timestamps, not header phases
	cursor int64 // generator: the partition's event time in ms
	weight int   // generator: relative rate of records (0 = silent)
}

// twm is the time watermark: the newest timestamp minus the bound.
func (m *mpart) twm(cfg Config) int64 {
	if !m.anyEv {
		return m.startMs
	}
	return max(m.startMs, m.maxEv-cfg.MaxOutOfOrderness.Milliseconds())
}

// low is the lowest phase the partition has not passed (MARKERS.md 1).
func (m *mpart) low(cfg Config) uint64 {
	l := max(m.startLow, m.maxHeader)
	if m.marked && m.marker < math.MaxUint64 {
		l = max(l, m.marker+1)
	}
	if w := m.twm(cfg); w >= 0 {
		// Passed every phase N with (N+1)*L <= w.
		l = max(l, uint64(w/cfg.PhaseLength.Milliseconds()))
	}
	return l
}

// idle is invariant 1, evaluated at now.
func (m *mpart) idle(cfg Config, now time.Time) bool {
	return cfg.IdleTimeout > 0 && m.lagKnown && m.lag == 0 && !m.paused &&
		now.Sub(m.quietSince) >= cfg.IdleTimeout
}

// mphase is the model of an unsealed phase: what was accepted into it.
type mphase struct {
	records int
	bytes   int64
	perPart map[int]int64
}

// violation is a broken property: prop is the letter of the brief's list
// ("a".."f"), or "cause", "low", "actions" for the extra consistency checks.
type violation struct {
	prop string
	seed uint64
	step int
	msg  string
	ops  []string
}

func (v *violation) Error() string {
	return fmt.Sprintf("property (%s) broken: %s\nseed=%d step=%d; last operations:\n  %s",
		v.prop, v.msg, v.seed, v.step, strings.Join(v.ops, "\n  "))
}

func (r *run) fail(prop, format string, args ...any) *violation {
	ops := r.ops
	if len(ops) > 30 {
		ops = ops[len(ops)-30:]
	}
	return &violation{prop: prop, seed: r.seed, step: r.step, msg: fmt.Sprintf(format, args...), ops: ops}
}

// pre is the model's view just before an Advance: who is live, and Lows.
type pre struct {
	idle []bool
	low  []uint64
}

func (r *run) preAdvance() pre {
	p := pre{idle: make([]bool, len(r.parts)), low: make([]uint64, len(r.parts))}
	for i, m := range r.parts {
		p.idle[i] = m.idle(r.cfg, r.clk.Now())
		p.low[i] = m.low(r.cfg)
	}
	return p
}

// checkSeals checks what one Advance returned against the state before it:
// (a) sealed phases only grow and each open phase is returned exactly once;
// (b) nothing is sealed while a live partition has not passed it, except by
// timeout under PolicySeal; the cause matches the rule; (f) contents match.
func (r *run) checkSeals(b pre, seals []Seal) *violation {
	g := r.tr.Global()
	if g < r.lastG {
		return r.fail("a", "Global went from %d down to %d", r.lastG, g)
	}
	for i, s := range seals {
		if r.returned[s.Phase] {
			return r.fail("a", "phase %d returned a second time", s.Phase)
		}
		r.returned[s.Phase] = true
		if i > 0 && s.Phase <= seals[i-1].Phase {
			return r.fail("a", "seals out of order: %d after %d", s.Phase, seals[i-1].Phase)
		}
		if s.Phase >= g {
			return r.fail("a", "phase %d sealed but Global is %d", s.Phase, g)
		}
	}
	var want []uint64
	for ph := range r.buffered {
		if ph < g {
			want = append(want, ph)
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	if len(want) != len(seals) {
		got := make([]uint64, len(seals))
		for i, s := range seals {
			got[i] = s.Phase
		}
		return r.fail("a", "Global %d: open phases below it %v, Advance returned %v", g, want, got)
	}
	for _, s := range seals {
		if s.By == CauseTimeout {
			if r.cfg.SealPolicy != PolicySeal {
				return r.fail("b", "phase %d sealed by timeout under %s", s.Phase, r.cfg.SealPolicy)
			}
			continue
		}
		for i, m := range r.parts {
			if !b.idle[i] && b.low[i] <= s.Phase && !(m.marked && m.marker >= s.Phase) {
				return r.fail("b", "phase %d sealed (%s) while live partition %d has Low %d", s.Phase, s.By, i, b.low[i])
			}
		}
		if want := r.cause(b, s.Phase); s.By != want {
			return r.fail("cause", "phase %d sealed by %s, want %s", s.Phase, s.By, want)
		}
	}
	for _, s := range seals {
		m := r.buffered[s.Phase]
		if s.Records != m.records || s.Bytes != m.bytes {
			return r.fail("f", "phase %d sealed with %d records, %d bytes; accepted %d, %d",
				s.Phase, s.Records, s.Bytes, m.records, m.bytes)
		}
		delete(r.buffered, s.Phase)
	}
	return nil
}

// cause is invariant 3's rule for a phase sealed by the watermark.
func (r *run) cause(b pre, n uint64) Cause {
	allMarked := true
	for i, m := range r.parts {
		if b.idle[i] && b.low[i] <= n {
			return CauseIdle
		}
		allMarked = allMarked && m.marked && m.marker >= n
	}
	if allMarked {
		return CauseMarkers
	}
	return CauseWatermark
}

// checkState runs after every operation (and its Actions):
// (a) Global never decreases; (c) GlobalMs never decreases; (d) a partition
// holding the minimum is not paused; (f) buffered bytes are the accepted,
// unsealed bytes; and the tracker's Lows and pause states match the model.
func (r *run) checkState() *violation {
	g, ms := r.tr.Global(), r.tr.GlobalMs()
	if g < r.lastG {
		return r.fail("a", "Global went from %d down to %d", r.lastG, g)
	}
	if ms < r.lastMs {
		return r.fail("c", "GlobalMs went from %d down to %d", r.lastMs, ms)
	}
	r.lastG, r.lastMs = g, ms
	snap := r.tr.Snapshot()
	for i, m := range r.parts {
		st := snap.Partitions[i]
		if st.Paused != m.paused {
			return r.fail("actions", "partition %d: Snapshot Paused=%v, Actions said %v", i, st.Paused, m.paused)
		}
		if low := m.low(r.cfg); st.Paused && low <= g {
			return r.fail("d", "partition %d paused (%v) while holding the minimum: Low %d, Global %d", i, st.Reasons, low, g)
		}
	}
	var total int64
	per := make([]int64, len(r.parts))
	for _, ph := range r.buffered {
		total += ph.bytes
		for p, n := range ph.perPart {
			per[p] += n
		}
	}
	if snap.BufferedBytes != total {
		return r.fail("f", "BufferedBytes = %d, accepted unsealed bytes = %d", snap.BufferedBytes, total)
	}
	for i, m := range r.parts {
		st := snap.Partitions[i]
		if st.BufferedBytes != per[i] {
			return r.fail("f", "partition %d buffers %d bytes, model %d", i, st.BufferedBytes, per[i])
		}
		if low := m.low(r.cfg); st.Low != low || st.TimeWatermarkMs != m.twm(r.cfg) {
			return r.fail("low", "partition %d: Low %d, time watermark %d; model %d, %d",
				i, st.Low, st.TimeWatermarkMs, low, m.twm(r.cfg))
		}
	}
	return nil
}

// applyActions feeds Actions to the model; each must be a net change.
func (r *run) applyActions() *violation {
	for _, a := range r.tr.Actions() {
		m := r.parts[a.P]
		if a.Pause == m.paused {
			return r.fail("actions", "partition %d: Action pause=%v repeats the state", a.P, a.Pause)
		}
		if a.Pause && len(a.Reasons) == 0 {
			return r.fail("actions", "partition %d paused without a reason", a.P)
		}
		m.paused = a.Pause
		if !a.Pause {
			m.quietSince = r.clk.Now()
		}
	}
	return nil
}
