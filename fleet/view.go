package fleet

import (
	"math"
	"slices"
)

// View combines the latest report of every task into the global watermark
// of the fleet (docs/FLEET.md, "The global watermark"). Create it with
// NewView; feed it every record of the watermark topic (Apply, Forget) and
// the instance's group generation (SetGeneration); read Advance. Not safe
// for concurrent use: the pipeline goroutine owns it.
type View struct {
	layout   uint64
	gen      int32    // the instance's current group generation; -1 before it joined
	held     []Report // latest report per task, valid where reported
	reported []bool   // a report of the task is held
	global   uint64
	globalMs int64
	started  bool                // global has been computed once
	data     map[uint64]struct{} // phases some task reported open (F7), until Prune (F8)
	pruned   uint64              // Prune forgot every data phase below it
}

// NewView returns a View of tasks 0..n-1 under layout fingerprint layout,
// holding no report: it holds the watermark until every task reported.
func NewView(n int, layout uint64) *View {
	return &View{layout: layout, gen: -1, held: make([]Report, n), reported: make([]bool, n), data: map[uint64]struct{}{}}
}

// SetGeneration tells the view the instance's current group generation
// (call it in every rebalance's Setup). Only reports of that generation
// are used (docs/FLEET.md, rule F3): one of an earlier generation comes
// from an owner that may have lost the task in a rebalance since, one of a
// later generation from a group this instance has not caught up with, or
// from an incarnation of the group before a reset (a generation above the
// current one), which any newer report replaces (F2).
func (v *View) SetGeneration(gen int32) { v.gen = gen }

// Apply takes one report read from the watermark topic, in topic order,
// and reports whether it replaced the task's held report. It ignores
// (rules F1 and F2) reports of another layout, of a task outside the view,
// and of a generation below that of the held report, which come from a
// stale owner (a zombie that missed the rebalance), unless the held report
// is itself from beyond the current generation. The open phases of every
// report of the layout, replacing or not, are kept for DataPhases (F7):
// they are facts about the input whoever saw them.
func (v *View) Apply(r Report) bool {
	if r.Layout != v.layout {
		return false
	}
	v.noteOpen(r.Open)
	return v.hold(r)
}

// ApplyEach applies r to v as the report of each of tasks, with r.Task
// set to each in turn: what an instance reports for every task it owns
// (they share one session, so one report). The same as v.Apply per task,
// but it notes r's open phases once and allocates nothing: it runs on
// every step of the pipeline, and an instance may own hundreds of tasks.
// (A function, not a method, so that it takes tasks.ID slices as they are.)
func ApplyEach[T ~int32](v *View, r Report, tasks []T) {
	if r.Layout != v.layout {
		return
	}
	v.noteOpen(r.Open)
	for _, t := range tasks {
		r.Task = int32(t)
		v.hold(r)
	}
}

func (v *View) noteOpen(open []uint64) {
	for _, ph := range open {
		v.data[ph] = struct{}{}
	}
}

// hold makes r its task's held report unless the rules of Apply refuse it.
func (v *View) hold(r Report) bool {
	if r.Task < 0 || int(r.Task) >= len(v.held) {
		return false
	}
	if h := &v.held[r.Task]; v.reported[r.Task] && r.Generation < h.Generation && h.Generation <= v.gen {
		return false
	}
	v.held[r.Task], v.reported[r.Task] = r, true
	return true
}

// Forget drops a task's held report (a tombstone on the watermark topic):
// the task holds the watermark again until its owner reports.
func (v *View) Forget(task int32) {
	if task >= 0 && int(task) < len(v.held) {
		v.held[task], v.reported[task] = Report{}, false
	}
}

// Advance recomputes the global watermark (docs/FLEET.md, rules F3 to F5)
// and returns it: global is the first phase the fleet has not sealed
// past, globalMs the time watermark in ms. held is the lowest task that
// holds the watermark because it has no report of the instance's current
// generation (F3), or -1; while
// one does, the values are those of the previous Advance (0, 0 before the
// first). Neither value ever decreases.
//
// A task's owner may seal phase N when N < global and N is below the
// task's own low watermark from its local tracker (F6): a task that just
// moved reports a low below what its former owner reported, and the clamp
// keeps the global from going back for the others.
func (v *View) Advance() (global uint64, globalMs int64, held int32) {
	var minLow, maxHigh uint64
	var minMs, maxMs int64
	live, idle := 0, 0
	for i := range v.held {
		r := &v.held[i]
		if !v.reported[i] || r.Generation != v.gen {
			return v.global, v.globalMs, int32(i)
		}
		if r.Idle {
			if idle == 0 || r.High > maxHigh {
				maxHigh = r.High
			}
			if idle == 0 || r.LowMs > maxMs {
				maxMs = r.LowMs
			}
			idle++
			continue
		}
		if live == 0 || r.Low < minLow {
			minLow = r.Low
		}
		if live == 0 || r.LowMs < minMs {
			minMs = r.LowMs
		}
		live++
	}
	if len(v.held) == 0 {
		return v.global, v.globalMs, -1
	}
	candidate, candidateMs := minLow, minMs
	if live == 0 { // every task is idle: nothing holds the last phases back
		candidate, candidateMs = maxHigh, maxMs
	}
	if !v.started {
		v.global, v.globalMs, v.started = candidate, candidateMs, true
	} else {
		v.global, v.globalMs = max(v.global, candidate), max(v.globalMs, candidateMs)
	}
	return v.global, v.globalMs, -1
}

// Global returns the last value Advance computed, and whether it has ever
// computed one (every task reported at least once).
func (v *View) Global() (global uint64, globalMs int64, ok bool) {
	return v.global, v.globalMs, v.started
}

// TaskState is one task in Tasks, for /phases and metrics.
type TaskState struct {
	Task     int32
	Reported bool   // a report is held
	Usable   bool   // it counts: its generation is not beyond the instance's
	Report   Report // the held report when Reported
}

// Tasks returns every task's held report, in task order.
func (v *View) Tasks() []TaskState {
	out := make([]TaskState, len(v.held))
	for i, r := range v.held {
		out[i].Task = int32(i)
		if v.reported[i] {
			out[i].Reported, out[i].Usable, out[i].Report = true, r.Generation == v.gen, r
		}
	}
	return out
}

// DataPhases returns, ascending, the phases in [from, below) that some
// task reported holding data for (docs/FLEET.md, rule F7): when a task
// seals up to below, it writes a marker for each of them, plus its own, on
// every output partition it writes.
func (v *View) DataPhases(from, below uint64) []uint64 {
	var out []uint64
	for ph := range v.data {
		if ph >= from && ph < below {
			out = append(out, ph)
		}
	}
	slices.Sort(out)
	return out
}

// Marked is the lowest Marked over every task's held report as of the last
// Prune (0 until every task has one): each task's committed output marks
// every phase below it (docs/FLEET.md, F8). It never goes down.
func (v *View) Marked() uint64 { return v.pruned }

// Prune forgets the data phases below every task's Marked (docs/FLEET.md,
// rule F8): none while a task has no report. A task that moves resumes
// from its committed offsets, and whoever gains it must still know the
// phases it has yet to mark, however far the instance's own tasks sealed.
func (v *View) Prune() {
	below := uint64(math.MaxUint64)
	for i := range v.held {
		if !v.reported[i] {
			return
		}
		below = min(below, v.held[i].Marked)
	}
	if below <= v.pruned {
		return // nothing new to forget: no walk over data on every step
	}
	v.pruned = below
	for ph := range v.data {
		if ph < below {
			delete(v.data, ph)
		}
	}
}
