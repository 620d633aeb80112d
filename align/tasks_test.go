package align

import (
	"testing"
	"time"

	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/watermarks"
)

// Two tasks (two sessions, as on two instances) share one global watermark
// through Floor/Local and, with key routing, both write both output
// partitions: version 2 markers and phasegate.task headers (MARKERS.md 3.3),
// which markers.Reader puts back together into whole phases.
func TestTwoTasksShareTheWatermarkAndTheOutputs(t *testing.T) {
	key := func(c *Config) { c.Routing = RouteKey }
	newTask := func(part int32, task int32, out [][]markers.Record) *harness {
		h := newHarness(t, map[string]int32{"a": 2}, 2, key, func(c *Config) {
			c.Outputs = []Output{{Partition: 0, Task: task, Writers: 2}, {Partition: 1, Task: task, Writers: 2}}
		})
		h.next = map[TP]int64{tp("a", part): 0}
		if out != nil {
			h.out = out
		}
		h.restart()
		return h
	}
	a := newTask(0, 0, nil)
	b := newTask(1, 1, a.out)
	b.log = a.log // one input topic
	step := func() {
		a.s.Floor(b.s.Local(), true)
		b.s.Floor(a.s.Local(), true)
		a.step()
		b.step()
	}
	a.feed(in{topic: "a", part: 0, ms: 10, key: "k1"})
	a.feed(in{topic: "a", part: 0, ms: 20, key: "a-little-bit-long-string"})
	a.feed(in{topic: "a", part: 0, ms: 150, key: "k1"})
	b.feed(in{topic: "a", part: 1, ms: 30, key: "k2"})
	step()
	step()
	if len(a.out[0])+len(a.out[1]) != 0 {
		t.Fatalf("task 0 sealed phase +0 before task 1 passed it: %d records out", len(a.out[0])+len(a.out[1]))
	}
	b.feed(in{topic: "a", part: 1, ms: 160, key: "k2"})
	step() // b passes +0; a learns it at this step's Floor only after b's Step
	step()
	got := a.phases() // fails on any violation of MARKERS.md 3.2/3.3
	if n := len(got[0]); n != 3 {
		t.Fatalf("phase +0 holds %d records, want 3: %v", n, got)
	}
	var v2 int
	for _, part := range a.out {
		for _, r := range part {
			if m, err := markers.DecodeOutputMarker(r.Value); err == nil && m.Writers == 2 {
				v2++
			}
		}
	}
	if v2 != 4 {
		t.Errorf("%d version 2 markers, want 4 (two tasks x two partitions)", v2)
	}
	if a.s.Local().Phase != basePh+1 || b.s.Local() != (watermarks.Mark{Phase: basePh + 1, Ms: baseMs + 160}) {
		t.Errorf("Local: a %+v, b %+v", a.s.Local(), b.s.Local())
	}
}

// MARKERS.md 3.3, liveness: a lane with no data marks the sealed global
// watermark within Watermarks.MarkEvery even when it was never told which
// phases hold data elsewhere (no Expect: docs/FLEET.md F7 missed them, as
// after a lost report or compaction). Task 1 reads an empty partition;
// task 0 writes phases +0 to +2 on both output partitions. Without the
// marker of task 1's lane, no reader ever completes those phases (rule
// M8), after the last burst too: h.phases() ends each partition with
// phases some writer never marked, a MissingMarker.
func TestALaneWithNoDataMarksTheSealedWatermark(t *testing.T) {
	key := func(c *Config) {
		c.Routing = RouteKey
		c.Watermarks.MarkEvery = time.Second
	}
	newTask := func(part int32, task int32, out [][]markers.Record) *harness {
		h := newHarness(t, map[string]int32{"a": 2}, 2, key, func(c *Config) {
			c.Outputs = []Output{{Partition: 0, Task: task, Writers: 2}, {Partition: 1, Task: task, Writers: 2}}
		})
		h.next = map[TP]int64{tp("a", part): 0}
		if out != nil {
			h.out = out
		}
		h.restart()
		return h
	}
	a := newTask(0, 0, nil)
	b := newTask(1, 1, a.out)
	b.log = a.log
	step := func() {
		a.caughtUp()
		b.caughtUp()
		// The fleet's global as docs/FLEET.md F4 computes it from both
		// tasks' reports: the lowest live one, the highest when all idle.
		la, lb := a.s.Local(), b.s.Local()
		g := watermarks.Mark{Phase: min(la.Phase, lb.Phase), Ms: min(la.Ms, lb.Ms)}
		switch {
		case la.Idle && lb.Idle:
			g = watermarks.Mark{Phase: max(la.Phase, lb.Phase), Ms: max(la.Ms, lb.Ms)}
		case la.Idle:
			g = lb
		case lb.Idle:
			g = la
		}
		a.s.Floor(g, true)
		b.s.Floor(g, true)
		a.step()
		b.step()
	}
	for i, key := range []string{"k1", "k2", "k3", "k4", "k5", "k6"} {
		a.feed(in{topic: "a", part: 0, ms: int64(i) * 50, key: key}) // phases +0 to +2
	}
	for range 40 { // 4 s: both partitions idle after 1 s, the last phases seal
		a.clk.add(100 * time.Millisecond)
		b.clk.add(100 * time.Millisecond)
		step()
	}
	got := a.phases() // fails on a phase some lane never marked
	n := 0
	for _, recs := range got {
		n += len(recs)
	}
	if n != 6 {
		t.Fatalf("the readers completed %d of 6 records: %v", n, got)
	}
}
