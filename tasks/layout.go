package tasks

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/phasegate/phasegate/align"
)

// Input is one fork topic and its partition count.
type Input struct {
	Topic      string
	Partitions int32
}

// Topology is everything the task set depends on, and the settings every
// instance of a group must share; never the number of instances.
type Topology struct {
	Inputs           []Input
	OutputPartitions int32
	Routing          align.Routing
	// Tasks, with RouteKey only, overrides the number of tasks (default
	// min(max input partitions, OutputPartitions)); 1 <= Tasks <= max input
	// partitions. It must be 0 with RoutePartition, whose layout it would
	// break.
	Tasks int32
	// OutputTopic, PhaseLength and MaxOutOfOrderness do not change the
	// task set, but instances that differ in them cannot share a fleet:
	// phase IDs in the watermark reports and in the offset metadata count
	// phase lengths, lateness depends on the bound, and the lanes of one
	// output partition must agree on its topic. They are part of
	// Settings, and so of the fingerprint.
	OutputTopic       string
	PhaseLength       time.Duration
	MaxOutOfOrderness time.Duration
}

// ErrTopology: a Topology that has no task layout; the concrete error
// names the field.
var ErrTopology = errors.New("tasks: invalid topology")

// ID names a task. IDs are 0 .. Layout.Len()-1.
type ID int32

// Partition is one input partition.
type Partition struct {
	Topic     string
	Partition int32
}

// Layout is the fixed task set of a Topology. Create it with NewLayout.
// Immutable and safe for concurrent use.
//
// The layout, with T = the number of tasks:
//   - T = min(max input partitions, OutputPartitions) (RouteKey: or
//     Topology.Tasks).
//   - Task t holds every input partition p, of every fork topic, with
//     p mod T = t. Each task holds at least one partition (partition t of
//     the largest topic).
//   - RoutePartition: T <= OutputPartitions, so p mod T = t means p mod
//     P_out routes every record of task t to output partitions o with
//     o mod T = t: task t is the ONLY writer of output partition o exactly
//     when o mod T = t, and outputs o >= T, which no input reaches, get
//     their markers from task o mod T. Every output partition has one
//     writer, so the output is wire format version 1.
//   - RouteKey: every task writes every output partition (W = T writers,
//     MARKERS.md section 3.3; version 1 when T = 1). Grouping by partition
//     index keeps co-partitioned inputs in one task and makes the layout
//     the same as RoutePartition's for the same T. T is bounded by
//     OutputPartitions by default because each sealed phase costs T
//     markers on each of the P_out partitions (T x P_out records) and a
//     reader holds up to T lanes per partition; T also bounds how many
//     instances have work.
type Layout struct {
	topo     Topology
	n        int32
	inputs   map[string]int32 // topic -> partitions
	fp       uint64
	settings string
}

// CheckTasks is the one rule that a task count (Topology.Tasks; 0 is the
// layout's default) goes with key routing only: the tasks of partition
// routing follow the output partitions, and a count would break the
// one-writer layout instead of being ignored. It returns nil, or an error
// wrapping ErrTopology. NewLayout calls it; so do proxy.Config.Validate
// and internal/config (PHASEGATE_TASKS), which name the variables in
// their own messages. Safe for concurrent use.
func CheckTasks(r align.Routing, n int32) error {
	if n != 0 && r != align.RouteKey {
		return fmt.Errorf("%w: tasks %d is for key routing only", ErrTopology, n)
	}
	return nil
}

// NewLayout checks t and returns its layout. Errors wrap ErrTopology.
func NewLayout(t Topology) (*Layout, error) {
	if len(t.Inputs) == 0 {
		return nil, fmt.Errorf("%w: no input topics", ErrTopology)
	}
	if t.OutputPartitions < 1 {
		return nil, fmt.Errorf("%w: output partitions %d, want at least 1", ErrTopology, t.OutputPartitions)
	}
	inputs := make(map[string]int32, len(t.Inputs))
	var maxP int32
	for _, in := range t.Inputs {
		if in.Topic == "" || in.Partitions < 1 {
			return nil, fmt.Errorf("%w: input %q with %d partitions", ErrTopology, in.Topic, in.Partitions)
		}
		if _, dup := inputs[in.Topic]; dup {
			return nil, fmt.Errorf("%w: input %q given twice", ErrTopology, in.Topic)
		}
		inputs[in.Topic] = in.Partitions
		maxP = max(maxP, in.Partitions)
	}
	n := min(maxP, t.OutputPartitions)
	if t.Routing != align.RoutePartition && t.Routing != align.RouteKey {
		return nil, fmt.Errorf("%w: routing %v", ErrTopology, t.Routing)
	}
	if err := CheckTasks(t.Routing, t.Tasks); err != nil {
		return nil, err
	}
	switch {
	case t.Tasks != 0 && (t.Tasks < 1 || t.Tasks > maxP):
		return nil, fmt.Errorf("%w: tasks %d, want 1 to %d (the largest input's partitions)", ErrTopology, t.Tasks, maxP)
	case t.Tasks != 0:
		n = t.Tasks
	}
	l := &Layout{topo: t, n: n, inputs: inputs}
	l.topo.Inputs = slices.Clone(t.Inputs)
	l.settings = l.describe()
	h := fnv.New64a()
	h.Write([]byte("phasegate-tasks/2 " + l.settings))
	l.fp = h.Sum64()
	return l, nil
}

// describe is Settings: every setting the instances of a group must
// share, as key=value words in a fixed order.
func (l *Layout) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "routing=%s tasks=%d output=%s:%d phase=%s out-of-orderness=%s inputs=",
		l.topo.Routing, l.n, l.topo.OutputTopic, l.topo.OutputPartitions, l.topo.PhaseLength, l.topo.MaxOutOfOrderness)
	for i, topic := range slices.Sorted(maps.Keys(l.inputs)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", topic, l.inputs[topic])
	}
	return b.String()
}

// Settings returns what every instance of a group must agree on, as
// key=value words in a fixed order (routing, tasks, output topic and
// partitions, phase length, out-of-orderness bound, input topics and
// partitions): equal for equal topologies whatever the order of Inputs.
// Members exchange it in the group protocol (AppendAssignment), and
// SettingsError names the words that differ.
func (l *Layout) Settings() string { return l.settings }

// Len is the number of tasks.
func (l *Layout) Len() int { return int(l.n) }

// InputPartitions is the number of input partitions, over all topics.
func (l *Layout) InputPartitions() int {
	n := 0
	for _, parts := range l.inputs {
		n += int(parts)
	}
	return n
}

// Topology returns the topology the layout was built from.
func (l *Layout) Topology() Topology {
	t := l.topo
	t.Inputs = slices.Clone(t.Inputs)
	return t
}

// Fingerprint identifies the layout and its Settings: equal for equal
// topologies (whatever the order of Inputs), different otherwise (up to
// 64-bit hash collisions). Watermark reports carry it (docs/FLEET.md F1).
func (l *Layout) Fingerprint() uint64 { return l.fp }

// TaskOf returns the task that holds an input partition; false when the
// topic is not an input or the partition is out of range.
func (l *Layout) TaskOf(topic string, partition int32) (ID, bool) {
	n, ok := l.inputs[topic]
	if !ok || partition < 0 || partition >= n {
		return 0, false
	}
	return ID(partition % l.n), true
}

// Partitions returns the input partitions of task id, by topic in the
// order of Topology.Inputs, each topic's partitions ascending.
func (l *Layout) Partitions(id ID) []Partition {
	var ps []Partition
	for _, in := range l.topo.Inputs {
		for p := int32(id); p < in.Partitions; p += l.n {
			ps = append(ps, Partition{Topic: in.Topic, Partition: p})
		}
	}
	return ps
}

// Outputs returns the output partitions task id writes, ascending.
func (l *Layout) Outputs(id ID) []int32 {
	var outs []int32
	for o := int32(0); o < l.topo.OutputPartitions; o++ {
		if l.topo.Routing == align.RouteKey || o%l.n == int32(id) {
			outs = append(outs, o)
		}
	}
	return outs
}

// Writers returns the tasks that write output partition o, ascending.
func (l *Layout) Writers(o int32) []ID {
	if l.topo.Routing == align.RoutePartition {
		return []ID{ID(o % l.n)}
	}
	ids := make([]ID, l.n)
	for i := range ids {
		ids[i] = ID(i)
	}
	return ids
}

// MarkerFields returns the Task and Writers fields of task id's marker on
// output partition o (markers.Marker, MARKERS.md section 3.3): 0, 0 where
// id is the only writer, so that the marker is version 1 byte for byte;
// the task's number among the partition's writers and their count
// otherwise. ok is false when id does not write o.
func (l *Layout) MarkerFields(id ID, o int32) (task, writers int32, ok bool) {
	ws := l.Writers(o)
	i, found := slices.BinarySearch(ws, id)
	if !found {
		return 0, 0, false
	}
	if len(ws) == 1 {
		return 0, 0, true
	}
	return int32(i), int32(len(ws)), true
}

// TasksOf returns the tasks whose partitions claims (topic -> partitions,
// as a consumer group session hands them out) hold, ascending. It fails
// when claims hold a partition of no task or only part of a task: tasks
// move whole.
func (l *Layout) TasksOf(claims map[string][]int32) ([]ID, error) {
	count := map[ID]int{}
	for topic, ps := range claims {
		for _, p := range ps {
			id, ok := l.TaskOf(topic, p)
			if !ok {
				return nil, fmt.Errorf("tasks: claimed %s/%d belongs to no task", topic, p)
			}
			count[id]++
		}
	}
	ids := slices.Sorted(maps.Keys(count))
	for _, id := range ids {
		if want := len(l.Partitions(id)); count[id] != want {
			return nil, fmt.Errorf("tasks: claims hold %d of the %d partitions of task %d", count[id], want, id)
		}
	}
	return ids, nil
}

// CheckTopics compares the partition counts of topics (topic -> partition
// IDs, as sarama hands them to a BalanceStrategy) with the layout's
// topology; an error, wrapping ErrTopology, names the first difference.
func (l *Layout) CheckTopics(topics map[string][]int32) error {
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		want, ok := l.inputs[topic]
		switch {
		case !ok:
			return fmt.Errorf("%w: topic %q is not an input", ErrTopology, topic)
		case int32(len(topics[topic])) != want:
			return fmt.Errorf("%w: topic %q has %d partitions, the layout was built for %d", ErrTopology, topic, len(topics[topic]), want)
		}
	}
	for _, in := range l.topo.Inputs {
		if _, ok := topics[in.Topic]; !ok {
			return fmt.Errorf("%w: input %q is missing", ErrTopology, in.Topic)
		}
	}
	return nil
}
