package proxy

import (
	"slices"
	"testing"
)

// The fleet summary counts tasks per owner, names this instance's and
// lists the live tasks with the lowest watermark, at most top.
func TestSummarizeFleet(t *testing.T) {
	tasks := []TaskStatus{
		{Task: 0, Owner: "a", Mine: true, Reported: true, Low: 12},
		{Task: 1, Owner: "b", Reported: true, Low: 10},
		{Task: 2, Owner: "b", Reported: true, Low: 30, Idle: true},
		{Task: 3},
		{Task: 4, Owner: "a", Mine: true, Reported: true, Low: 11},
	}
	cases := []struct {
		top    int
		lowest []int32
	}{{0, nil}, {1, []int32{1}}, {2, []int32{1, 4}}, {10, []int32{1, 4, 0}}}
	for _, c := range cases {
		f := summarizeFleet(tasks, c.top)
		var lowest []int32
		for _, l := range f.Lowest {
			lowest = append(lowest, l.Task)
		}
		if !slices.Equal(lowest, c.lowest) {
			t.Errorf("top %d: lowest %v, want %v (idle and unreported tasks left out)", c.top, lowest, c.lowest)
		}
		if f.Tasks != 5 || !slices.Equal(f.Owned, []int32{0, 4}) || f.Unreported != 1 || f.PerOwner["a"] != 2 || f.PerOwner["b"] != 2 {
			t.Errorf("top %d: %+v", c.top, f)
		}
	}
}
