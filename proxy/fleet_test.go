package proxy

import (
	"slices"
	"testing"
	"time"

	"github.com/phasegate/phasegate/fleet"
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

// A report is written when what others seal by changed, and a change of
// only its time watermark or its marked phase (others forget data phases
// by it, FLEET.md rule F8) waits for reportEvery, so that an idle task's
// marked still reaches the fleet.
func TestReportDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sent := fleet.Report{Low: 5, LowMs: 500, Marked: 4, Open: []uint64{5}, Generation: 2}
	with := func(f func(*fleet.Report)) fleet.Report { r := sent; f(&r); return r }
	cases := []struct {
		name  string
		rep   fleet.Report
		after time.Duration
		want  bool
	}{
		{"unchanged", sent, time.Second, false},
		{"low", with(func(r *fleet.Report) { r.Low = 6 }), 0, true},
		{"open", with(func(r *fleet.Report) { r.Open = []uint64{5, 6} }), 0, true},
		{"generation", with(func(r *fleet.Report) { r.Generation = 3 }), 0, true},
		{"low_ms, early", with(func(r *fleet.Report) { r.LowMs = 600 }), reportEvery / 2, false},
		{"low_ms, later", with(func(r *fleet.Report) { r.LowMs = 600 }), reportEvery, true},
		{"marked, early", with(func(r *fleet.Report) { r.Marked = 5 }), reportEvery / 2, false},
		{"marked, later", with(func(r *fleet.Report) { r.Marked = 5 }), reportEvery, true},
	}
	for _, c := range cases {
		g := &generation{sent: sent, sentAt: t0}
		if got := g.due(c.rep, t0.Add(c.after)); got != c.want {
			t.Errorf("%s: due = %v, want %v", c.name, got, c.want)
		}
	}
}
