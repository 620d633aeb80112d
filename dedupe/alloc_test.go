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
// rotated through the sealed LRU, a phase allocates five times whatever its
// size (its set, on the map the pool gives back; at its Seal, its sorted
// keys, the sort's buckets and scratch, and a golang-lru list entry), and a
// phase sealed empty twice (its set and the list entry). Adds must therefore account for none of the total.
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
		name   string
		f      func()
		allocs uint64
	}{
		{"phase of adds and its seal", fillAndSeal, 5},
		{"seal of an empty phase", func() { c.Seal(phase); phase++ }, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.Stats().Evictions
			if got := mallocs(runs, tt.f); got > tt.allocs*runs {
				t.Errorf("%d runs allocated %d times, want at most %d (%d per phase)", runs, got, tt.allocs*runs, tt.allocs)
			}
			if c.Stats().Evictions < before+runs {
				t.Fatalf("evictions went from %d to %d: not the steady state", before, c.Stats().Evictions)
			}
		})
	}
}
