package align

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/phasegate/phasegate/markers"
)

// keyTasks is key routing over topics with T tasks in one session, as
// proxy builds it for an instance owning every task: one lane per (task,
// output partition), task t holding every input partition p with
// p mod T = t (tasks.Layout).
func keyTasks(topics map[string]int32, out, T int32) func(*Config) {
	return func(c *Config) {
		c.Routing = RouteKey
		c.Outputs = nil
		for task := range T {
			var inputs []TP
			for _, topic := range sortedTopics(topics) {
				for p := task; p < topics[topic]; p += T {
					inputs = append(inputs, tp(topic, p))
				}
			}
			for o := range out {
				c.Outputs = append(c.Outputs, Output{Partition: o, Task: task, Writers: T, Inputs: inputs})
			}
		}
	}
}

func sortedTopics(topics map[string]int32) []string {
	return slices.Sorted(maps.Keys(topics))
}

// laneMarkers decodes the marker writes of b by (partition, task).
func laneMarkers(t *testing.T, b *Batch[string]) map[[2]int32][]markers.Marker {
	t.Helper()
	got := map[[2]int32][]markers.Marker{}
	for _, w := range b.Writes {
		if w.Kind != MarkerWrite {
			continue
		}
		m, err := markers.DecodeOutputMarker(w.Value())
		if err != nil {
			t.Fatalf("marker on %d: %v", w.Partition, err)
		}
		if m.Partition != w.Partition {
			t.Fatalf("marker for partition %d written to %d", m.Partition, w.Partition)
		}
		k := [2]int32{w.Partition, m.Task}
		got[k] = append(got[k], m)
	}
	return got
}

// Two tasks in one session, both writing both output partitions (key
// routing): each lane's marker counts that task's records only, by topic,
// and each data record carries its task's phasegate.task (MARKERS.md 3.3).
func TestLanesCountTheirOwnRecords(t *testing.T) {
	topics := map[string]int32{"a": 2, "b": 2}
	h := newHarness(t, topics, 2, keyTasks(topics, 2, 2))
	want := map[[2]int32]map[string]int64{} // (partition, task) -> topic -> records of phase +0
	for i := range 5 {
		for _, k := range []TP{tp("a", 0), tp("a", 1), tp("b", 0), tp("b", 1)} {
			key := fmt.Sprintf("k%d-%s", i, k)
			h.feed(in{topic: k.Topic, part: k.Partition, ms: int64(10 + i), key: key})
			lane := [2]int32{RouteKey.route([]byte(key), k.Partition, 2), k.Partition}
			if want[lane] == nil {
				want[lane] = map[string]int64{"a": 0, "b": 0}
			}
			want[lane][k.Topic]++
		}
	}
	for _, k := range []TP{tp("a", 0), tp("a", 1), tp("b", 0), tp("b", 1)} {
		h.feed(in{topic: k.Topic, part: k.Partition, ms: 150, key: "next"})
	}
	st := h.step()
	if st.Batch == nil {
		t.Fatal("phase +0 did not seal")
	}
	for _, w := range st.Batch.Writes {
		if w.Kind != Data {
			continue
		}
		task := strings.TrimPrefix(w.Msg[strings.IndexByte(w.Msg, '/'):], "/")[:1] // input partition = task
		if got := string(st.Batch.Task(w)); got != task {
			t.Errorf("%s: phasegate.task %q, want %q", w.Msg, got, task)
		}
	}
	got := laneMarkers(t, st.Batch)
	if len(got) != 4 {
		t.Fatalf("markers of %d lanes, want 4: %v", len(got), got)
	}
	shared := 0
	for lane, ms := range got {
		m := ms[0]
		if len(ms) != 1 || m.Phase != basePh || m.Writers != 2 {
			t.Fatalf("lane %v: markers %+v, want one v2 marker of 2 writers for +0", lane, ms)
		}
		wantSrc := want[lane]
		if wantSrc == nil {
			wantSrc = map[string]int64{"a": 0, "b": 0}
		}
		if m.Count != wantSrc["a"]+wantSrc["b"] || !maps.Equal(m.Sources, wantSrc) {
			t.Errorf("lane %v: count %d sources %v, want %v", lane, m.Count, m.Sources, wantSrc)
		}
		if m.Count > 0 {
			shared++
		}
	}
	if shared < 3 {
		t.Fatalf("only %d lanes hold records: the keys do not exercise shared partitions", shared)
	}
	for _, k := range []TP{tp("a", 0), tp("a", 1), tp("b", 0), tp("b", 1)} {
		h.feed(in{topic: k.Topic, part: k.Partition, ms: 250})
	}
	h.step()
	if got := h.phases(); len(got[0]) != 20 || len(got[1]) != 4 { // fails on any reader violation
		t.Fatalf("phases read back: %v", got)
	}
}

// After a restart where the session's two tasks were committed at
// different phases, each lane marks from its own task's point: task 0
// (committed up to +2) writes no marker below +2 and its records of +1 are
// late; task 1 (committed up to +0) marks from +0.
func TestLanesStartAtTheirTasksCommit(t *testing.T) {
	topics := map[string]int32{"a": 2}
	h := newHarness(t, topics, 2, keyTasks(topics, 2, 2))
	h.committed[tp("a", 0)] = Offset{TP: tp("a", 0), Metadata: fmt.Sprintf("pg1;g=%d;h=0;m=-", basePh+2)}
	h.committed[tp("a", 1)] = Offset{TP: tp("a", 1), Metadata: fmt.Sprintf("pg1;g=%d;h=0;m=-", basePh)}
	h.restart()
	h.feed(in{topic: "a", part: 1, ms: 10, key: "x"})
	if out := h.feed(in{topic: "a", part: 0, ms: 110, key: "y"}); out.Kind != Quarantined || out.Reason != markers.ReasonLate {
		t.Fatalf("a/0 record of +1 after its task sealed +2: %v, want quarantined late", out.Kind)
	}
	h.feed(in{topic: "a", part: 0, ms: 210, key: "z"})
	h.feed(in{topic: "a", part: 1, ms: 110, key: "w"})
	h.feed(in{topic: "a", part: 0, ms: 310})
	h.feed(in{topic: "a", part: 1, ms: 310})
	st := h.step()
	if st.Batch == nil {
		t.Fatal("nothing sealed")
	}
	got := laneMarkers(t, st.Batch)
	for o := range int32(2) {
		for _, m := range got[[2]int32{o, 0}] {
			if m.Phase < basePh+2 {
				t.Errorf("task 0 marked +%d on %d, below its committed +2", m.Phase-basePh, o)
			}
		}
		phases := func(ms []markers.Marker) (out []uint64) {
			for _, m := range ms {
				out = append(out, m.Phase-basePh)
			}
			return out
		}
		if p := phases(got[[2]int32{o, 0}]); len(p) != 1 || p[0] != 2 {
			t.Errorf("task 0 on %d marked %v, want [2]", o, p)
		}
		if p := phases(got[[2]int32{o, 1}]); len(p) < 2 || p[0] != 0 || p[len(p)-1] != 2 {
			t.Errorf("task 1 on %d marked %v, want +0 up to +2", o, p)
		}
	}
	if got := h.phases(); len(got[0]) != 1 || len(got[1]) != 1 || len(got[2]) != 1 {
		t.Fatalf("phases read back: %v", got)
	}
	if len(h.quar) != 1 {
		t.Fatalf("quarantined %q, want the late a/0 record", h.quar)
	}
}

// One writer per partition (partition routing, with Outputs nil or one
// entry per task as proxy builds it): the output is version 1 byte for
// byte, with no phasegate.task header.
func TestOneWriterIsVersionOne(t *testing.T) {
	cases := []struct {
		name string
		opt  func(*Config)
	}{
		{name: "Outputs nil", opt: func(c *Config) {}},
		{name: "one entry per task", opt: func(c *Config) {
			c.Outputs = []Output{{Partition: 0, Inputs: []TP{tp("a", 0)}}, {Partition: 1, Inputs: []TP{tp("a", 1)}}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, map[string]int32{"a": 2}, 2, tc.opt)
			h.feed(in{topic: "a", part: 0, ms: 10})
			h.feed(in{topic: "a", part: 0, ms: 20})
			h.feed(in{topic: "a", part: 1, ms: 30})
			h.feed(in{topic: "a", part: 0, ms: 150})
			h.feed(in{topic: "a", part: 1, ms: 150})
			b := h.step().Batch
			if b == nil {
				t.Fatal("phase +0 did not seal")
			}
			wm := b.Seals[0].WatermarkMs
			want := map[int32]string{
				0: fmt.Sprintf(`{"v":1,"phase":%d,"partition":0,"count":2,"sources":{"a":2},"watermark_ms":%d,"sealed_by":"watermark","emitter":"test"}`, basePh, wm),
				1: fmt.Sprintf(`{"v":1,"phase":%d,"partition":1,"count":1,"sources":{"a":1},"watermark_ms":%d,"sealed_by":"watermark","emitter":"test"}`, basePh, wm),
			}
			n := 0
			for _, w := range b.Writes {
				switch w.Kind {
				case Data:
					if b.Task(w) != nil {
						t.Errorf("%s: phasegate.task %q on a one-writer partition", w.Msg, b.Task(w))
					}
				case MarkerWrite:
					n++
					if got := string(w.Value()); got != want[w.Partition] {
						t.Errorf("marker on %d:\n got  %s\n want %s", w.Partition, got, want[w.Partition])
					}
				}
			}
			if n != 2 {
				t.Fatalf("%d markers, want 2", n)
			}
		})
	}
}

// Write is built once per record committed: several writers must not
// make it bigger (the lane's slot sits in its padding).
func TestWriteSize(t *testing.T) {
	if n := unsafe.Sizeof(Write[*int]{}); n != 40 {
		t.Fatalf("Write is %d bytes, want 40", n)
	}
}

// Lanes that would claim one record, or one writer's slot, are refused at
// New instead of writing a stream a reader rejects.
func TestLaneRefusals(t *testing.T) {
	a0, a1 := []TP{tp("a", 0)}, []TP{tp("a", 1)}
	cases := []struct {
		name    string
		outputs []Output
		want    string
	}{
		{name: "an input in two lanes of one partition",
			outputs: []Output{{Partition: 0, Task: 0, Writers: 2, Inputs: a0}, {Partition: 0, Task: 1, Writers: 2, Inputs: a0}},
			want:    "input a/0 is in two lanes of output partition 0"},
		{name: "a task twice on a partition",
			outputs: []Output{{Partition: 0, Task: 1, Writers: 2, Inputs: a0}, {Partition: 0, Task: 1, Writers: 2, Inputs: a1}},
			want:    "task 1 has two lanes"},
		{name: "two one-writer lanes on a partition",
			outputs: []Output{{Partition: 0, Inputs: a0}, {Partition: 0, Inputs: a1}},
			want:    "task 0 has two lanes"},
		{name: "one and several writers mixed",
			outputs: []Output{{Partition: 0, Inputs: a0}, {Partition: 0, Task: 1, Writers: 2, Inputs: a1}},
			want:    "lanes of 1 and 2 writers"},
		{name: "task out of range",
			outputs: []Output{{Partition: 0, Task: 2, Writers: 2, Inputs: a0}},
			want:    "task 2 of 2 writers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, map[string]int32{"a": 2}, 2)
			cfg := h.cfg
			cfg.Outputs = tc.outputs
			_, err := New[string](cfg, []Start{{TP: tp("a", 0)}, {TP: tp("a", 1)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
