package tasks

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/phasegate/phasegate/align"
)

// m1 is the topology of issue 11's scenario M1: forks of 7, 3 and 1
// partitions.
func m1(out int32, r align.Routing) Topology {
	return Topology{Inputs: []Input{{"a", 7}, {"b", 3}, {"c", 1}}, OutputPartitions: out, Routing: r}
}

func TestLayout(t *testing.T) {
	tests := []struct {
		name    string
		topo    Topology
		tasks   int
		parts   map[ID][]Partition // some tasks' partitions
		writers map[int32][]ID     // some outputs' writers
	}{
		{"partition routing, P_out = max input partitions: task o is input partition o",
			m1(7, align.RoutePartition), 7,
			map[ID][]Partition{0: {{"a", 0}, {"b", 0}, {"c", 0}}, 2: {{"a", 2}, {"b", 2}}, 6: {{"a", 6}}},
			map[int32][]ID{0: {0}, 6: {6}}},
		{"partition routing, P_out < inputs: task o holds p mod P_out = o",
			m1(3, align.RoutePartition), 3,
			map[ID][]Partition{0: {{"a", 0}, {"a", 3}, {"a", 6}, {"b", 0}, {"c", 0}}, 2: {{"a", 2}, {"a", 5}, {"b", 2}}},
			map[int32][]ID{0: {0}, 1: {1}, 2: {2}}},
		{"partition routing, P_out > inputs: outputs no input reaches get task o mod T",
			m1(12, align.RoutePartition), 7,
			map[ID][]Partition{1: {{"a", 1}, {"b", 1}}},
			map[int32][]ID{1: {1}, 7: {0}, 8: {1}, 11: {4}}},
		{"partition routing, one output partition: one task, one writer",
			m1(1, align.RoutePartition), 1,
			map[ID][]Partition{0: {{"a", 0}, {"a", 1}, {"a", 2}, {"a", 3}, {"a", 4}, {"a", 5}, {"a", 6}, {"b", 0}, {"b", 1}, {"b", 2}, {"c", 0}}},
			map[int32][]ID{0: {0}}},
		{"key routing: every task writes every output partition",
			m1(3, align.RouteKey), 3,
			map[ID][]Partition{1: {{"a", 1}, {"a", 4}, {"b", 1}}},
			map[int32][]ID{0: {0, 1, 2}, 2: {0, 1, 2}}},
		{"key routing with more tasks than output partitions",
			Topology{Inputs: []Input{{"a", 7}, {"b", 3}, {"c", 1}}, OutputPartitions: 2, Routing: align.RouteKey, Tasks: 7}, 7,
			map[ID][]Partition{6: {{"a", 6}}},
			map[int32][]ID{1: {0, 1, 2, 3, 4, 5, 6}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLayout(tt.topo)
			if err != nil {
				t.Fatal(err)
			}
			if l.Len() != tt.tasks {
				t.Fatalf("Len = %d, want %d", l.Len(), tt.tasks)
			}
			if got := l.InputPartitions(); got != 11 { // a 7, b 3, c 1 in every row
				t.Errorf("InputPartitions = %d, want 11", got)
			}
			for id, want := range tt.parts {
				if got := l.Partitions(id); !reflect.DeepEqual(got, want) {
					t.Errorf("Partitions(%d) = %v, want %v", id, got, want)
				}
			}
			for o, want := range tt.writers {
				if got := l.Writers(o); !reflect.DeepEqual(got, want) {
					t.Errorf("Writers(%d) = %v, want %v", o, got, want)
				}
			}
			checkLayout(t, l)
		})
	}
}

// checkLayout checks what holds of every layout: each input partition is
// in exactly one task, TaskOf agrees with Partitions, every task holds a
// partition, Outputs and Writers agree, every output partition has a
// writer, and with partition routing every record of a task routes to an
// output the task writes, of which it is the only writer.
func checkLayout(t *testing.T, l *Layout) {
	t.Helper()
	topo := l.Topology()
	seen := map[Partition]ID{}
	for id := range ID(l.Len()) {
		ps := l.Partitions(id)
		if len(ps) == 0 {
			t.Errorf("task %d holds no partition", id)
		}
		for _, p := range ps {
			if prev, dup := seen[p]; dup {
				t.Errorf("%v in tasks %d and %d", p, prev, id)
			}
			seen[p] = id
			if got, ok := l.TaskOf(p.Topic, p.Partition); !ok || got != id {
				t.Errorf("TaskOf(%v) = %d, %v; want %d", p, got, ok, id)
			}
			if topo.Routing == align.RoutePartition {
				o := p.Partition % topo.OutputPartitions
				if ws := l.Writers(o); len(ws) != 1 || ws[0] != id {
					t.Errorf("%v routes to output %d, whose writers are %v, not only task %d", p, o, ws, id)
				}
			}
		}
		for _, o := range l.Outputs(id) {
			task, writers, ok := l.MarkerFields(id, o)
			ws := l.Writers(o)
			if !ok || len(ws) == 1 && (task != 0 || writers != 0) || len(ws) > 1 && (ws[task] != id || int(writers) != len(ws)) {
				t.Errorf("MarkerFields(%d, %d) = %d, %d, %v with writers %v", id, o, task, writers, ok, ws)
			}
		}
	}
	total := 0
	for _, in := range topo.Inputs {
		total += int(in.Partitions)
	}
	if len(seen) != total {
		t.Errorf("tasks hold %d partitions, inputs have %d", len(seen), total)
	}
	for o := range topo.OutputPartitions {
		ws := l.Writers(o)
		if len(ws) == 0 {
			t.Errorf("output %d has no writer", o)
		}
		for _, id := range ws {
			if _, _, ok := l.MarkerFields(id, o); !ok {
				t.Errorf("writer %d of output %d: MarkerFields says it does not write it", id, o)
			}
		}
	}
}

func TestNewLayoutErrors(t *testing.T) {
	tests := []struct {
		name string
		topo Topology
	}{
		{"no inputs", Topology{OutputPartitions: 1}},
		{"no output partitions", Topology{Inputs: []Input{{"a", 1}}}},
		{"input without partitions", Topology{Inputs: []Input{{"a", 0}}, OutputPartitions: 1}},
		{"input without name", Topology{Inputs: []Input{{"", 1}}, OutputPartitions: 1}},
		{"input twice", Topology{Inputs: []Input{{"a", 1}, {"a", 2}}, OutputPartitions: 1}},
		{"unknown routing", Topology{Inputs: []Input{{"a", 1}}, OutputPartitions: 1, Routing: 9}},
		{"tasks with partition routing", Topology{Inputs: []Input{{"a", 4}}, OutputPartitions: 1, Tasks: 2}},
		{"more tasks than input partitions", Topology{Inputs: []Input{{"a", 4}}, OutputPartitions: 1, Routing: align.RouteKey, Tasks: 5}},
		{"negative tasks", Topology{Inputs: []Input{{"a", 4}}, OutputPartitions: 1, Routing: align.RouteKey, Tasks: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewLayout(tt.topo); !errors.Is(err, ErrTopology) {
				t.Fatalf("NewLayout = %v, want ErrTopology", err)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	base := mustLayout(t, m1(3, align.RoutePartition)).Fingerprint()
	reordered := Topology{Inputs: []Input{{"c", 1}, {"a", 7}, {"b", 3}}, OutputPartitions: 3}
	if got := mustLayout(t, reordered).Fingerprint(); got != base {
		t.Fatalf("input order changed the fingerprint: %x vs %x", got, base)
	}
	for name, other := range map[string]Topology{
		"output partitions": m1(4, align.RoutePartition),
		"routing":           m1(3, align.RouteKey),
		"input partitions":  {Inputs: []Input{{"a", 8}, {"b", 3}, {"c", 1}}, OutputPartitions: 3},
		"input name":        {Inputs: []Input{{"x", 7}, {"b", 3}, {"c", 1}}, OutputPartitions: 3},
		"task count":        {Inputs: []Input{{"a", 7}, {"b", 3}, {"c", 1}}, OutputPartitions: 3, Routing: align.RouteKey, Tasks: 2},
		"output topic":      {Inputs: []Input{{"a", 7}, {"b", 3}, {"c", 1}}, OutputPartitions: 3, OutputTopic: "aligned"},
		"phase length":      {Inputs: []Input{{"a", 7}, {"b", 3}, {"c", 1}}, OutputPartitions: 3, PhaseLength: time.Second},
		"out-of-orderness":  {Inputs: []Input{{"a", 7}, {"b", 3}, {"c", 1}}, OutputPartitions: 3, MaxOutOfOrderness: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			if mustLayout(t, other).Fingerprint() == base {
				t.Fatalf("another %s, same fingerprint", name)
			}
		})
	}
}

func TestTasksOf(t *testing.T) {
	l := mustLayout(t, m1(3, align.RoutePartition))
	tests := []struct {
		name   string
		claims map[string][]int32
		want   []ID
		ok     bool
	}{
		{"nothing", nil, []ID{}, true},
		{"one whole task", map[string][]int32{"a": {2, 5}, "b": {2}}, []ID{2}, true},
		{"two whole tasks", map[string][]int32{"a": {0, 1, 3, 4, 6}, "b": {0, 1}, "c": {0}}, []ID{0, 1}, true},
		{"part of a task", map[string][]int32{"a": {2}}, nil, false},
		{"a partition of no task", map[string][]int32{"z": {0}}, nil, false},
		{"a partition out of range", map[string][]int32{"b": {3}}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.TasksOf(tt.claims)
			if (err == nil) != tt.ok || tt.ok && !reflect.DeepEqual(append([]ID{}, got...), tt.want) {
				t.Fatalf("TasksOf = %v, %v; want %v, ok %v", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestCheckTopics(t *testing.T) {
	l := mustLayout(t, m1(3, align.RoutePartition))
	parts := func(n int32) []int32 {
		ps := make([]int32, n)
		for i := range ps {
			ps[i] = int32(i)
		}
		return ps
	}
	tests := []struct {
		name   string
		topics map[string][]int32
		ok     bool
	}{
		{"as built", map[string][]int32{"a": parts(7), "b": parts(3), "c": parts(1)}, true},
		{"a topic grew", map[string][]int32{"a": parts(8), "b": parts(3), "c": parts(1)}, false},
		{"a topic is missing", map[string][]int32{"a": parts(7), "b": parts(3)}, false},
		{"a topic is not an input", map[string][]int32{"a": parts(7), "b": parts(3), "c": parts(1), "d": parts(1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := l.CheckTopics(tt.topics)
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrTopology) {
				t.Fatalf("CheckTopics = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func mustLayout(t testing.TB, topo Topology) *Layout {
	t.Helper()
	l, err := NewLayout(topo)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A task count goes with key routing only; 0, the layout's default, goes
// with either. proxy.Config.Validate and internal/config's PHASEGATE_TASKS
// rely on this one rule.
func TestCheckTasks(t *testing.T) {
	cases := []struct {
		name    string
		routing align.Routing
		n       int32
		ok      bool
	}{
		{"partition, default", align.RoutePartition, 0, true},
		{"partition, one task", align.RoutePartition, 1, false},
		{"partition, three tasks", align.RoutePartition, 3, false},
		{"partition, negative", align.RoutePartition, -1, false},
		{"key, default", align.RouteKey, 0, true},
		{"key, one task", align.RouteKey, 1, true},
		{"key, three tasks", align.RouteKey, 3, true},
		{"unknown routing, three tasks", 9, 3, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckTasks(c.routing, c.n)
			if c.ok != (err == nil) {
				t.Fatalf("CheckTasks(%v, %d) = %v, want ok %v", c.routing, c.n, err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrTopology) {
				t.Fatalf("CheckTasks(%v, %d) = %v, want an ErrTopology", c.routing, c.n, err)
			}
		})
	}
}
