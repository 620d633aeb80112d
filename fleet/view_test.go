package fleet

import (
	"slices"
	"strconv"
	"testing"
)

const fp = 0xabc

// live and idle build usable reports for the view tests.
func live(task int32, low uint64, gen int32) Report {
	return Report{Task: task, Layout: fp, Low: low, LowMs: int64(low) * 1000, High: low, Owner: "i", Generation: gen}
}

func idle(task int32, low, high uint64, gen int32) Report {
	r := live(task, low, gen)
	r.Idle, r.High = true, high
	return r
}

// step is one event fed to a View, then the expected result of Advance.
type step struct {
	apply  []Report
	forget []int32
	gen    int32 // SetGeneration before Advance when > 0
	global uint64
	held   int32
}

func TestView(t *testing.T) {
	tests := []struct {
		name  string
		tasks int
		steps []step
	}{
		{"F3: nothing seals until every task reported", 3, []step{
			{gen: 1, held: 0},
			{apply: []Report{live(0, 5, 1), live(2, 7, 1)}, held: 1},
			{apply: []Report{live(1, 6, 1)}, global: 5, held: -1},
		}},
		{"F4: the global is the minimum low over live tasks", 3, []step{
			{gen: 1, apply: []Report{live(0, 9, 1), live(1, 4, 1), live(2, 7, 1)}, global: 4, held: -1},
			{apply: []Report{live(1, 8, 1)}, global: 7, held: -1},
		}},
		{"F4: an idle task holds no one back", 3, []step{
			{gen: 1, apply: []Report{live(0, 9, 1), idle(1, 2, 3, 1), live(2, 7, 1)}, global: 7, held: -1},
		}},
		{"F4: every task idle: the highest high", 3, []step{
			{gen: 1, apply: []Report{idle(0, 3, 9, 1), idle(1, 2, 12, 1), idle(2, 7, 7, 1)}, global: 12, held: -1},
		}},
		{"F4: a task that was idle and comes back behind holds again, above the clamp", 2, []step{
			{gen: 1, apply: []Report{live(0, 9, 1), idle(1, 2, 3, 1)}, global: 9, held: -1},
			{apply: []Report{live(1, 4, 1)}, global: 9, held: -1},
			{apply: []Report{live(1, 11, 1)}, global: 9, held: -1},
			{apply: []Report{live(0, 10, 1)}, global: 10, held: -1},
		}},
		{"F5: the global never decreases when a moved task reports a lower low", 2, []step{
			{gen: 1, apply: []Report{live(0, 9, 1), live(1, 8, 1)}, global: 8, held: -1},
			{gen: 2, apply: []Report{live(0, 9, 2), live(1, 5, 2)}, global: 8, held: -1},
			{apply: []Report{live(1, 10, 2)}, global: 9, held: -1},
		}},
		{"F2: a stale owner's report never replaces a newer generation's", 2, []step{
			{gen: 2, apply: []Report{live(0, 5, 2), live(1, 5, 2)}, global: 5, held: -1},
			{apply: []Report{idle(0, 9, 20, 1), live(1, 20, 1)}, global: 5, held: -1},
		}},
		{"F2: a report of the same generation replaces the held one", 1, []step{
			{gen: 2, apply: []Report{live(0, 5, 2), live(0, 6, 2)}, global: 6, held: -1},
		}},
		{"F3: a report from a generation the instance has not reached is not used yet", 2, []step{
			{gen: 3, apply: []Report{live(0, 5, 3), live(1, 6, 3)}, global: 5, held: -1},
			{apply: []Report{live(0, 9, 4), live(1, 9, 4)}, global: 5, held: 0},
			{gen: 4, global: 9, held: -1},
		}},
		{"F2: after a group reset, reports of the old incarnation give way", 2, []step{
			{gen: 1, apply: []Report{live(0, 5, 40), live(1, 6, 40)}, global: 0, held: 0},
			{apply: []Report{live(0, 7, 1)}, global: 0, held: 1},
			{apply: []Report{live(1, 8, 1)}, global: 7, held: -1},
		}},
		{"F1: reports of another layout or of tasks outside the layout are ignored", 1, []step{
			{gen: 1, apply: []Report{{Task: 0, Layout: fp + 1, Low: 5, High: 5, Owner: "i", Generation: 1}, live(1, 5, 1)}, held: 0},
		}},
		{"F3: a withdrawn report holds the watermark again", 2, []step{
			{gen: 1, apply: []Report{live(0, 5, 1), live(1, 6, 1)}, global: 5, held: -1},
			{forget: []int32{1}, apply: []Report{live(0, 9, 1)}, global: 5, held: 1},
		}},
		{"F3: the dead owner's task holds until its new owner reports", 2, []step{
			{gen: 5, apply: []Report{live(0, 5, 5), idle(1, 5, 9, 5)}, global: 5, held: -1},
			// Task 1's owner died idle; the rebalance to generation 6 gave
			// it to another instance, which has not reported yet. Its
			// gen-5 report, idle, no longer counts: task 0 alone would
			// take the global to 9 and judge the data task 1's new owner
			// is about to read late.
			{gen: 6, apply: []Report{live(0, 9, 6)}, global: 5, held: 1},
			{apply: []Report{live(1, 7, 6)}, global: 7, held: -1},
		}},
		{"F3: a report of an earlier generation holds until its owner reports again", 2, []step{
			{gen: 5, apply: []Report{live(0, 5, 5), live(1, 6, 5)}, global: 5, held: -1},
			{gen: 6, apply: []Report{live(0, 8, 6)}, global: 5, held: 1},
			{apply: []Report{live(1, 8, 6)}, global: 8, held: -1},
		}},
		{"F2: a former owner's late report replaces the successor's only while this instance lags, and is not used once it caught up", 2, []step{
			{gen: 5, apply: []Report{live(0, 5, 5), live(1, 5, 5)}, global: 5, held: -1},
			{apply: []Report{live(1, 9, 6), live(1, 6, 5), live(0, 9, 5)}, global: 6, held: -1}, // at 5, task 1's gen-6 report gave way to the gen-5 one
			{gen: 6, global: 6, held: 0},
			{apply: []Report{live(0, 9, 6)}, global: 6, held: 1},
			{apply: []Report{live(1, 10, 6)}, global: 9, held: -1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewView(tt.tasks, fp)
			for i, st := range tt.steps {
				if st.gen > 0 {
					v.SetGeneration(st.gen)
				}
				for _, task := range st.forget {
					v.Forget(task)
				}
				for _, r := range st.apply {
					v.Apply(r)
				}
				global, _, held := v.Advance()
				if global != st.global || held != st.held {
					t.Fatalf("step %d: Advance = %d, held by %d; want %d, held by %d (%+v)", i, global, held, st.global, st.held, v.Tasks())
				}
			}
		})
	}
}

func TestViewTasks(t *testing.T) {
	v := NewView(2, fp)
	v.SetGeneration(3)
	v.Apply(live(0, 5, 3))
	v.Apply(live(1, 5, 4))
	got := v.Tasks()
	if !got[0].Reported || !got[0].Usable || got[0].Report.Low != 5 || !got[1].Reported || got[1].Usable {
		t.Fatalf("Tasks = %+v", got)
	}
	if _, _, ok := v.Global(); ok {
		t.Fatal("Global ok before Advance")
	}
}

// TestViewTimeWatermark: low_ms combines like low (F4, F5): the minimum
// over live tasks, the maximum when all are idle, never decreasing.
func TestViewTimeWatermark(t *testing.T) {
	at := func(r Report, ms int64) Report { r.LowMs = ms; return r }
	v := NewView(2, fp)
	v.SetGeneration(1)
	steps := []struct {
		apply []Report
		want  int64
	}{
		{[]Report{at(live(0, 1, 1), 5000), at(live(1, 1, 1), 3000)}, 3000},
		{[]Report{at(live(1, 1, 1), 4000)}, 4000},
		{[]Report{at(live(1, 1, 1), 1000)}, 4000},
		{[]Report{at(idle(0, 1, 1, 1), 9000), at(idle(1, 1, 1, 1), 6000)}, 9000},
	}
	for i, st := range steps {
		for _, r := range st.apply {
			v.Apply(r)
		}
		if _, ms, _ := v.Advance(); ms != st.want {
			t.Fatalf("step %d: globalMs = %d, want %d", i, ms, st.want)
		}
	}
}

// TestViewDataPhases: every task learns which phases hold data somewhere
// (F7), from replacing and stale reports alike, until it prunes them.
func TestViewDataPhases(t *testing.T) {
	v := NewView(2, fp)
	v.SetGeneration(2)
	with := func(r Report, open ...uint64) Report { r.Open = open; return r }
	v.Apply(with(live(0, 5, 2), 3, 5))
	v.Apply(with(live(1, 9, 2), 7))
	v.Apply(with(live(1, 4, 1), 4))                                                          // a stale owner: not held, but its data is a fact
	v.Apply(Report{Task: 0, Layout: fp + 1, Low: 6, High: 6, Open: []uint64{6}, Owner: "x"}) // another layout: ignored
	tests := []struct {
		from, below uint64
		want        []uint64
	}{
		{0, 100, []uint64{3, 4, 5, 7}},
		{4, 7, []uint64{4, 5}},
		{8, 100, nil},
	}
	for _, tt := range tests {
		if got := v.DataPhases(tt.from, tt.below); !slices.Equal(got, tt.want) {
			t.Fatalf("DataPhases(%d, %d) = %v, want %v", tt.from, tt.below, got, tt.want)
		}
	}
}

// TestViewPruneF8: a data phase is forgotten only below every task's
// marked; a task with no report, or one without marked, keeps them all.
// The case that lost a marker in e2e M1: the instance's own task 1 has
// sealed far past phase 4, but task 0, which it may gain, has marked only
// up to 3, so phase 4 must stay known.
func TestViewPruneF8(t *testing.T) {
	marked := func(r Report, m uint64) Report { r.Marked = m; return r }
	tests := []struct {
		name    string
		reports []Report // tasks 0 and 1; a missing task is unreported
		want    []uint64
		marked  uint64 // View.Marked: what a shared partition's writers stream from
	}{
		{"a task unreported", []Report{marked(live(0, 9, 2), 9)}, []uint64{3, 4, 5, 7}, 0},
		{"a task without marked (an older writer)", []Report{marked(live(0, 9, 2), 9), live(1, 9, 2)}, []uint64{3, 4, 5, 7}, 0},
		{"below the lowest marked", []Report{marked(live(0, 6, 2), 5), marked(live(1, 9, 2), 8)}, []uint64{5, 7}, 5},
		{"a task behind the instance's own", []Report{marked(live(0, 4, 2), 4), marked(live(1, 30, 2), 30)}, []uint64{4, 5, 7}, 4},
		{"all marked past", []Report{marked(idle(0, 8, 9, 2), 9), marked(live(1, 12, 2), 12)}, nil, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewView(2, fp)
			v.SetGeneration(2)
			v.Apply(Report{Task: 1, Layout: fp, Low: 1, High: 1, Open: []uint64{3, 4, 5, 7}, Owner: "x", Generation: 1})
			v.Forget(1) // its data phases stay: facts about the input
			for _, r := range tt.reports {
				v.Apply(r)
			}
			v.Prune()
			if got := v.DataPhases(0, 100); !slices.Equal(got, tt.want) {
				t.Fatalf("after Prune: %v, want %v", got, tt.want)
			}
			if got := v.Marked(); got != tt.marked {
				t.Fatalf("Marked = %d, want %d", got, tt.marked)
			}
		})
	}
}

// ApplyEach is Apply per task: two views fed the same reports, one through
// each, hold the same reports and advance alike, stale generations
// included (the held report of a later generation refuses an earlier one).
func TestApplyEachIsApplyPerTask(t *testing.T) {
	owned := []int32{0, 2, 3, -1, 7} // -1 and 7 are outside a view of 5 tasks
	reports := []Report{live(0, 4, 2), live(0, 6, 1), idle(0, 5, 9, 2), live(0, 8, 3), {Layout: fp + 1, Low: 1}}
	reports[3].Open = []uint64{8, 9}
	each, per := NewView(5, fp), NewView(5, fp)
	each.SetGeneration(2)
	per.SetGeneration(2)
	for i, r := range reports {
		ApplyEach(each, r, owned)
		for _, task := range owned {
			r.Task = task
			per.Apply(r)
		}
		if !slices.EqualFunc(each.Tasks(), per.Tasks(), func(a, b TaskState) bool {
			return a.Task == b.Task && a.Reported == b.Reported && a.Usable == b.Usable &&
				a.Report.Low == b.Report.Low && a.Report.Generation == b.Report.Generation && a.Report.Task == b.Report.Task
		}) {
			t.Fatalf("after report %d: ApplyEach holds %+v, Apply per task %+v", i, each.Tasks(), per.Tasks())
		}
		per.Apply(live(1, 3, 2))
		each.Apply(live(1, 3, 2))
		g1, ms1, h1 := each.Advance()
		g2, ms2, h2 := per.Advance()
		if g1 != g2 || ms1 != ms2 || h1 != h2 {
			t.Fatalf("after report %d: ApplyEach advances to %d/%d/%d, Apply per task to %d/%d/%d", i, g1, ms1, h1, g2, ms2, h2)
		}
	}
	if got := each.DataPhases(0, 100); !slices.Equal(got, []uint64{8, 9}) {
		t.Errorf("DataPhases = %v, want [8 9]", got)
	}
	if ts := each.Tasks()[2]; ts.Report.Task != 2 || ts.Report.Low != 8 || ts.Usable {
		t.Errorf("task 2 holds %+v, want the generation-3 report, held but not usable at generation 2", ts)
	}
}

// BenchmarkApplyEach: what share costs per pipeline step for the tasks an
// instance owns.
func BenchmarkApplyEach(b *testing.B) {
	for _, n := range []int{6, 256} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			v := NewView(n, fp)
			v.SetGeneration(1)
			owned := make([]int32, n)
			for i := range owned {
				owned[i] = int32(i)
			}
			r := live(0, 5, 1)
			r.Open = []uint64{5, 6, 7}
			b.ReportAllocs()
			for b.Loop() {
				ApplyEach(v, r, owned)
				v.Advance()
			}
		})
	}
}
