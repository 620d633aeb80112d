//go:build !race

// The race detector allocates on its own, so these counts only hold without it.

package dedupe

import (
	"runtime"
	"testing"
)

// mallocs returns the heap allocations made by n calls of f, in total:
// testing.AllocsPerRun rounds the average down, which would hide one
// allocation every few calls.
func mallocs(n int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f() // warm up, like AllocsPerRun
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// TestSteadyStateAllocations holds the promise of doc.go: once phases have
// rotated through the sealed LRU, filling a phase (whose first Add evicts a
// sealed phase and reuses its set) allocates nothing, and Seal allocates one
// golang-lru list entry. Adds must therefore account for none of the total.
func TestSteadyStateAllocations(t *testing.T) {
	const phaseLen, runs = 500, 20
	cfg := Config{MaxSealedPhases: 8, MaxIdentities: 8 * phaseLen}
	c := newCache(t, cfg)
	s := newStreams(16)
	var phase uint64
	fillAndSeal := func() {
		for range phaseLen {
			if dup, err := c.Add(phase, s.id()); dup || err != nil {
				t.Fatalf("Add(%d) = %v, %v", phase, dup, err)
			}
		}
		c.Seal(phase)
		phase++
	}
	for range 3 * cfg.MaxSealedPhases {
		fillAndSeal()
	}
	tests := []struct {
		name string
		f    func()
	}{
		{"phase of adds and its seal", fillAndSeal},
		{"seal of an empty phase", func() { c.Seal(phase); phase++ }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.Stats().Evictions
			if got := mallocs(runs, tt.f); got > runs {
				t.Errorf("%d runs allocated %d times, want at most %d (one LRU entry per Seal)", runs, got, runs)
			}
			if c.Stats().Evictions < before+runs {
				t.Fatalf("evictions went from %d to %d: not the steady state", before, c.Stats().Evictions)
			}
		})
	}
}
