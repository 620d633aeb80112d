package proxy

import "testing"

// held, one row per rule: nothing is held without a step in flight; at the
// bound the holders are still read until a sealed phase waits for the
// next transaction; in is held at the bound or at half of it waiting.
func TestHeld(t *testing.T) {
	const bound = 1 << 20
	for _, c := range []struct {
		name              string
		inflight          bool
		buffered, waiting int64
		holdIn, holdHot   bool
	}{
		{name: "no step in flight, over the bound", buffered: 2 * bound, waiting: bound},
		{name: "in flight, below every threshold", inflight: true, buffered: bound - 1, waiting: bound/2 - 1},
		{name: "in flight, half the bound waiting", inflight: true, buffered: bound - 1, waiting: bound / 2, holdIn: true},
		{name: "in flight, at the bound, nothing sealed waiting: holders read", inflight: true, buffered: bound, holdIn: true},
		{name: "in flight, at the bound, a sealed phase waiting: both held", inflight: true, buffered: bound, waiting: 1, holdIn: true, holdHot: true},
		{name: "in flight, over the bound, a sealed phase waiting", inflight: true, buffered: 2 * bound, waiting: bound, holdIn: true, holdHot: true},
	} {
		holdIn, holdHot := held(c.inflight, c.buffered, c.waiting, bound)
		if holdIn != c.holdIn || holdHot != c.holdHot {
			t.Errorf("%s: held = in %v, hot %v; want %v, %v", c.name, holdIn, holdHot, c.holdIn, c.holdHot)
		}
	}
}
