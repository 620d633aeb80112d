package watermarks

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

// Property tests: random interleavings of records, markers, lag reports,
// pauses, resumes, clock steps and Advance calls on 1-8 partitions over 1-3
// topics, with every property checked after every operation. Each run is
// fixed by its seed; a failure names the seed and the last operations, and
// `go test -run 'TestProperties/seed=N$'` replays it.

const (
	propertySeeds = 500
	propertySteps = 400
)

// check runs steps random operations and then the liveness drive; it returns
// the first broken property, or nil, and what the run exercised.
func check(seed uint64, f fault, steps int) (*violation, map[string]int) {
	r := newRun(seed, f)
	if v := r.checkState(); v != nil {
		return v, r.seen
	}
	for range steps {
		r.step++
		if v := r.randomOp(); v != nil {
			return v, r.seen
		}
	}
	return r.liveness(), r.seen
}

// liveness is property (e): operators lift their pauses, then every partition
// is either driven past phase n (when it is not paused, as a consumer would)
// or, when IdleTimeout > 0, left silent with lag 0; n must get sealed.
func (r *run) liveness() *violation {
	r.logf("--- liveness")
	for p, m := range r.parts {
		for _, reason := range slices.Sorted(maps.Keys(m.reasons)) {
			r.tr.Resume(P(p), reason)
		}
		clear(m.reasons)
	}
	if v := r.after(); v != nil {
		return v
	}
	n := max(r.tr.Global(), r.maxPhase)
	for _, m := range r.parts {
		n = max(n, m.low(r.cfg))
	}
	silent := make([]bool, len(r.parts))
	for p := range r.parts {
		if r.cfg.IdleTimeout > 0 && r.rng.IntN(3) == 0 {
			silent[p] = true
			if v := r.lag(p, 0); v != nil {
				return v
			}
		}
	}
	if !slices.Contains(silent, false) {
		silent[0] = false // someone must carry phase n; silent partitions alone never pass it
	}
	step := time.Second
	if r.cfg.IdleTimeout > 0 {
		step = r.cfg.IdleTimeout/2 + time.Millisecond
	}
	for round := 0; round < 100 && r.tr.Global() <= n; round++ {
		for p, m := range r.parts {
			if silent[p] || m.paused || m.low(r.cfg) > n {
				continue
			}
			if v := r.drive(p, n); v != nil {
				return v
			}
		}
		r.clk.step(step)
		if v := r.advance(); v != nil {
			return v
		}
	}
	if g := r.tr.Global(); g <= n {
		return r.fail("e", "phase %d not sealed after driving every partition past it: Global %d; silent %v; %+v",
			n, g, silent, r.tr.Snapshot())
	}
	r.seen["liveness"]++
	return nil
}

// drive makes p pass phase n by a marker, a timestamp or a header phase.
func (r *run) drive(p int, n uint64) *violation {
	m := r.parts[p]
	switch k := r.rng.IntN(3); {
	case k == 0:
		return r.marker(p, n)
	case k == 1 && m.timed:
		ev := int64(n+1)*r.tr.phaseMs + r.cfg.MaxOutOfOrderness.Milliseconds()
		m.cursor = max(m.cursor, ev)
		return r.record(p, Rec{Phase: uint64(ev / r.tr.phaseMs), EventMs: ev, Timed: true, Bytes: 1})
	}
	return r.record(p, Rec{Phase: n + 1, EventMs: m.cursor, Bytes: 1})
}

func TestProperties(t *testing.T) {
	seen, ran := map[string]int{}, 0
	for seed := uint64(1); seed <= propertySeeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ran++
			v, s := check(seed, 0, propertySteps)
			if v != nil {
				t.Fatal(v)
			}
			for k, n := range s {
				seen[k] += n
			}
		})
	}
	if ran < propertySeeds || t.Failed() {
		return // one seed replayed with -run, or already failing
	}
	// The generator must reach every situation the properties are about.
	for _, k := range []string{"seal:markers", "seal:watermark", "seal:idle", "seal:timeout", "late", "idle behind", "add", "liveness"} {
		if seen[k] == 0 {
			t.Errorf("no run exercised %q (saw %v)", k, seen)
		}
	}
	t.Logf("exercised: %v", seen)
}

// TestPropertiesCatchFaults runs the checker against deliberately broken
// trackers: each fault must be reported as the property it breaks.
func TestPropertiesCatchFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault fault
		prop  string
	}{
		{"seal early", faultSealEarly, "b"},
		{"global decreases", faultGlobalDecreases, "a"},
		{"global ms decreases", faultGlobalMsDecreases, "c"},
		{"pause the minimum holder", faultPauseMinHolder, "d"},
		{"never idle", faultNeverIdle, "e"},
		{"leak bytes", faultLeakBytes, "f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := uint64(1); seed <= propertySeeds; seed++ {
				v, _ := check(seed, tt.fault, propertySteps)
				if v == nil {
					continue
				}
				if v.prop != tt.prop {
					t.Fatalf("reported as (%s), want (%s): %v", v.prop, tt.prop, v)
				}
				t.Logf("caught by seed %d at step %d: %s", seed, v.step, v.msg)
				return
			}
			t.Fatalf("no seed in 1..%d caught the fault", propertySeeds)
		})
	}
}
