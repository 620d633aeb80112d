package tasks

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
)

// group simulates the classic consumer group protocol as sarama runs it
// with a Strategy: every member sends SubscriptionUserData in JoinGroup,
// the leader (the smallest member ID here) plans and encodes each
// member's AssignmentData, and every member gets OnAssignment.
type group struct {
	t       *testing.T
	layout  *Layout
	members map[string]*Strategy
	gen     int32
}

func newGroup(t *testing.T, topo Topology) *group {
	return &group{t: t, layout: mustLayout(t, topo), members: map[string]*Strategy{}}
}

func (g *group) topics() map[string][]int32 {
	ts := map[string][]int32{}
	for _, in := range g.layout.Topology().Inputs {
		for p := range in.Partitions {
			ts[in.Topic] = append(ts[in.Topic], p)
		}
	}
	return ts
}

// rebalance runs one generation and returns each member's tasks, checking
// that the plan hands out whole tasks, each once, and that every member's
// Assigned agrees with its partitions.
func (g *group) rebalance() map[string][]ID {
	g.t.Helper()
	g.gen++
	meta := map[string]sarama.ConsumerGroupMemberMetadata{}
	for id, s := range g.members {
		ud, err := s.SubscriptionUserData(slices.Collect(maps.Keys(g.topics())))
		if err != nil {
			g.t.Fatal(err)
		}
		meta[id] = sarama.ConsumerGroupMemberMetadata{Version: 1, Topics: slices.Collect(maps.Keys(g.topics())), UserData: ud}
	}
	leader := g.members[slices.Min(slices.Collect(maps.Keys(g.members)))]
	plan, err := leader.Plan(meta, g.topics())
	if err != nil {
		g.t.Fatalf("Plan: %v", err)
	}
	out := map[string][]ID{}
	claimed := map[Partition]string{}
	for id, s := range g.members {
		topics, ok := plan[id]
		if !ok {
			g.t.Fatalf("member %s is not in the plan", id)
		}
		for topic, ps := range topics {
			for _, p := range ps {
				if prev, dup := claimed[Partition{topic, p}]; dup {
					g.t.Fatalf("%s/%d given to %s and %s", topic, p, prev, id)
				}
				claimed[Partition{topic, p}] = id
			}
		}
		data, err := leader.AssignmentData(id, topics, g.gen)
		if err != nil {
			g.t.Fatalf("AssignmentData(%s): %v", id, err)
		}
		s.OnAssignment(&sarama.ConsumerGroupMemberAssignment{Version: 1, Topics: topics, UserData: data}, g.gen)
		a, err := s.Assigned()
		if err != nil || a.Generation != g.gen {
			g.t.Fatalf("Assigned(%s) = %+v, %v", id, a, err)
		}
		whole, err := g.layout.TasksOf(topics)
		if err != nil || !slices.Equal(whole, a.Tasks) {
			g.t.Fatalf("member %s: partitions %v make tasks %v (%v), Assigned says %v", id, topics, whole, err, a.Tasks)
		}
		out[id] = a.Tasks
	}
	n := 0
	for _, in := range g.layout.Topology().Inputs {
		n += int(in.Partitions)
	}
	if len(claimed) != n {
		g.t.Fatalf("plan assigns %d of %d partitions", len(claimed), n)
	}
	return out
}

func TestStrategyRebalances(t *testing.T) {
	g := newGroup(t, m1(7, align.RoutePartition))
	add := func(ids ...string) {
		for _, id := range ids {
			g.members[id] = NewStrategy(g.layout)
		}
	}
	steps := []struct {
		name   string
		change func()
		want   map[string][]ID
	}{
		{"one instance takes every task", func() { add("a") },
			map[string][]ID{"a": {0, 1, 2, 3, 4, 5, 6}}},
		{"two more join: a keeps 3, the rest spread", func() { add("b", "c") },
			map[string][]ID{"a": {0, 1, 2}, "b": {3, 4}, "c": {5, 6}}},
		{"a fourth joins mid-run: one task moves from a", func() { add("d") },
			map[string][]ID{"a": {0, 1}, "b": {3, 4}, "c": {5, 6}, "d": {2}}},
		{"the leader leaves: the others keep theirs, its tasks spread", func() { delete(g.members, "a") },
			map[string][]ID{"b": {0, 3, 4}, "c": {5, 6}, "d": {1, 2}}},
		{"an instance restarts with static membership and no memory: it gets its tasks back", func() { add("c") },
			map[string][]ID{"b": {0, 3, 4}, "c": {5, 6}, "d": {1, 2}}},
		{"an instance is lost for good", func() { delete(g.members, "d") },
			map[string][]ID{"b": {0, 1, 3, 4}, "c": {2, 5, 6}}},
		{"nothing changes: nothing moves", func() {},
			map[string][]ID{"b": {0, 1, 3, 4}, "c": {2, 5, 6}}},
	}
	for _, st := range steps {
		st.change()
		if got := g.rebalance(); !reflect.DeepEqual(got, st.want) {
			t.Fatalf("%s: tasks = %v\nwant %v", st.name, got, st.want)
		}
	}
}

func TestStrategyRestore(t *testing.T) {
	g := newGroup(t, m1(3, align.RoutePartition))
	g.members["a"] = NewStrategy(g.layout)
	g.members["b"] = NewStrategy(g.layout)
	g.rebalance() // a: 0, 1; b: 2
	g.members["c"] = NewStrategy(g.layout)
	g.members["c"].Restore(Assignment{Generation: 0, Tasks: []ID{1, 1}}) // says it held 1, from an old generation
	g.members["b"].Restore(Assignment{Generation: g.gen - 1, Tasks: []ID{0}})
	got := g.rebalance()
	want := map[string][]ID{"a": {0}, "b": {1}, "c": {2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tasks = %v, want %v (stale restored claims lose to a's newer one)", got, want)
	}
	g2 := newGroup(t, m1(3, align.RoutePartition))
	for _, id := range []string{"a", "b", "c"} {
		g2.members[id] = NewStrategy(g2.layout)
	}
	g2.members["c"].Restore(Assignment{Generation: 4, Tasks: []ID{0}})
	if got := g2.rebalance(); !slices.Equal(got["c"], []ID{0}) {
		t.Fatalf("a restored claim in an empty group: c got %v, want [0]", got["c"])
	}
}

func TestStrategyRefuses(t *testing.T) {
	l := mustLayout(t, m1(3, align.RoutePartition))
	other := mustLayout(t, m1(4, align.RoutePartition))
	topics := (&group{layout: l}).topics()
	member := func(s *Strategy) sarama.ConsumerGroupMemberMetadata {
		ud, _ := s.SubscriptionUserData(nil)
		return sarama.ConsumerGroupMemberMetadata{UserData: ud}
	}
	t.Run("a member under another layout gets nothing, and the group's settings", func(t *testing.T) {
		leader, b := NewStrategy(l), NewStrategy(other)
		plan, err := leader.Plan(map[string]sarama.ConsumerGroupMemberMetadata{"a": member(NewStrategy(l)), "b": member(b)}, topics)
		if err != nil || len(plan["b"]) != 0 || len(plan["a"]["a"]) != 7 {
			t.Fatalf("Plan = %v, %v; want every task for a, none for b", plan, err)
		}
		ud, err := leader.AssignmentData("b", nil, 4)
		if err != nil {
			t.Fatal(err)
		}
		b.OnAssignment(&sarama.ConsumerGroupMemberAssignment{UserData: ud}, 4)
		var se *SettingsError
		if _, err := b.Assigned(); !errors.As(err, &se) || se.Group != l.Settings() || se.Mine != other.Settings() {
			t.Fatalf("Assigned = %v, want a SettingsError with the group's settings", err)
		}
	})
	t.Run("user data this version cannot read: nothing for that member", func(t *testing.T) {
		plan, err := NewStrategy(l).Plan(map[string]sarama.ConsumerGroupMemberMetadata{"a": {UserData: []byte{9}}, "b": {}}, topics)
		if err != nil || len(plan["a"]) != 0 || len(plan["b"]["a"]) != 7 {
			t.Fatalf("Plan = %v, %v", plan, err)
		}
	})
	t.Run("a member without user data holds nothing", func(t *testing.T) {
		plan, err := NewStrategy(l).Plan(map[string]sarama.ConsumerGroupMemberMetadata{"a": {}}, topics)
		if err != nil || len(plan["a"]["a"]) != 7 {
			t.Fatalf("Plan = %v, %v", plan, err)
		}
	})
	t.Run("an input topic grew", func(t *testing.T) {
		grown := maps.Clone(topics)
		grown["b"] = append(slices.Clone(grown["b"]), 3)
		if _, err := NewStrategy(l).Plan(map[string]sarama.ConsumerGroupMemberMetadata{"a": {}}, grown); !errors.Is(err, ErrTopology) {
			t.Fatalf("Plan = %v, want ErrTopology", err)
		}
	})
	t.Run("an assignment from a leader under another layout", func(t *testing.T) {
		s := NewStrategy(l)
		s.OnAssignment(&sarama.ConsumerGroupMemberAssignment{Topics: map[string][]int32{"a": {2, 5}, "b": {2}},
			UserData: AppendAssignment(nil, other.Settings(), Assignment{Generation: 3, Tasks: []ID{2}})}, 3)
		var se *SettingsError
		if _, err := s.Assigned(); !errors.As(err, &se) {
			t.Fatalf("Assigned = %v, want a SettingsError", err)
		}
	})
	t.Run("an assignment holding part of a task", func(t *testing.T) {
		s := NewStrategy(l)
		s.OnAssignment(&sarama.ConsumerGroupMemberAssignment{Topics: map[string][]int32{"a": {2}}}, 3)
		if _, err := s.Assigned(); err == nil {
			t.Fatal("Assigned accepted part of a task")
		}
	})
	t.Run("an assignment whose user data disagrees with its partitions", func(t *testing.T) {
		s := NewStrategy(l)
		s.OnAssignment(&sarama.ConsumerGroupMemberAssignment{Topics: map[string][]int32{"a": {2, 5}, "b": {2}},
			UserData: AppendAssignment(nil, l.Settings(), Assignment{Generation: 3, Tasks: []ID{1}})}, 3)
		if _, err := s.Assigned(); err == nil {
			t.Fatal("Assigned accepted user data naming other tasks")
		}
	})
	t.Run("an assignment from another strategy: tasks from its partitions", func(t *testing.T) {
		s := NewStrategy(l)
		s.OnAssignment(&sarama.ConsumerGroupMemberAssignment{Topics: map[string][]int32{"a": {2, 5}, "b": {2}}}, 3)
		if a, err := s.Assigned(); err != nil || !slices.Equal(a.Tasks, []ID{2}) || a.Generation != 3 {
			t.Fatalf("Assigned = %+v, %v", a, err)
		}
	})
}

// The group's settings come from the members of the latest generation,
// the running fleet, whoever leads the group.
func TestGroupSettings(t *testing.T) {
	m := func(gen int32) Member { return Member{Generation: gen} }
	tests := []struct {
		name     string
		claims   map[string]Member
		settings map[string]string
		mine     string
		want     string
	}{
		{"the running fleet's over a newcomer that leads",
			map[string]Member{"a": m(5), "b": m(5), "c": m(-1)}, map[string]string{"a": "S1", "b": "S1", "c": "S2"}, "S2", "S1"},
		{"most of the latest generation",
			map[string]Member{"a": m(5), "b": m(5), "c": m(5)}, map[string]string{"a": "S1", "b": "S2", "c": "S2"}, "S1", "S2"},
		{"a tie goes to the leader's",
			map[string]Member{"a": m(5), "b": m(5)}, map[string]string{"a": "S1", "b": "S2"}, "S2", "S2"},
		{"a new group: the leader's on a tie",
			map[string]Member{"a": m(-1), "b": m(-1)}, map[string]string{"a": "S2", "b": "S1"}, "S2", "S2"},
		{"a tie the leader is not in: the least",
			map[string]Member{"a": m(5), "b": m(5), "c": m(-1)}, map[string]string{"a": "S3", "b": "S2", "c": "S1"}, "S1", "S2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := groupSettings(tt.claims, tt.settings, tt.mine); got != tt.want {
				t.Fatalf("groupSettings = %s, want %s", got, tt.want)
			}
		})
	}
}

// A SettingsError names each setting that differs, with both values.
func TestSettingsError(t *testing.T) {
	topo := func(f func(*Topology)) *Layout {
		tp := Topology{Inputs: []Input{{"a", 3}}, OutputPartitions: 3, Routing: align.RouteKey, Tasks: 3,
			OutputTopic: "aligned", PhaseLength: 100 * time.Millisecond}
		f(&tp)
		l, err := NewLayout(tp)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	group := topo(func(*Topology) {})
	mine := topo(func(tp *Topology) { tp.PhaseLength, tp.OutputTopic = time.Second, "aligned2" })
	err := &SettingsError{Group: group.Settings(), Mine: mine.Settings()}
	want := []Difference{{"output", "aligned:3", "aligned2:3"}, {"phase", "100ms", "1s"}}
	if got := err.Differences(); !slices.Equal(got, want) {
		t.Fatalf("Differences = %+v, want %+v", got, want)
	}
	if msg := err.Error(); !strings.Contains(msg, "phase 1s here, 100ms in the group") {
		t.Fatalf("Error = %q", msg)
	}
}
