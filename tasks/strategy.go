package tasks

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/IBM/sarama"
)

// StrategyName is the group protocol name of Strategy. Every member of a
// group must offer it: Kafka picks a protocol all members support.
const StrategyName = "phasegate-tasks"

// Strategy is a sarama BalanceStrategy that assigns whole tasks of a
// Layout to the members of a consumer group, balanced by count and sticky
// across rebalances (Assign). Put it in
// Config.Consumer.Group.Rebalance.GroupStrategies, one Strategy per
// consumer group client: it remembers what its member was assigned.
//
// How stickiness travels: the leader's AssignmentData encodes each
// member's tasks and the generation (AppendAssignment) into its
// assignment; OnAssignment keeps it; SubscriptionUserData sends it back in
// the next JoinGroup, where the leader's Plan reads every member's claims.
//
// How settings are agreed: every encoding carries the layout's Settings.
// Plan takes the group's settings from the members that held tasks in the
// latest generation (those most of them share; the leader's own on a tie,
// or when nobody held any), assigns tasks to the members with those
// settings only, and sends the group's settings to every member.
// OnAssignment compares them with its own: a member with other settings
// (another phase length, output topic, routing, task count, topics) gets
// a *SettingsError from Assigned and must stop, so that two instances
// never write under different settings, and the running fleet is not the
// one that stops.
//
// Plan, AssignmentData, SubscriptionUserData and OnAssignment are called by
// sarama on its rebalance path; Assigned and Restore by the pipeline. All
// are safe for concurrent use.
type Strategy struct {
	layout *Layout

	mu      sync.Mutex // guards last, err and planned
	last    Assignment // this member's latest assignment (or what Restore set)
	err     error      // why the latest assignment cannot be used, or nil
	planned string     // the group's settings, as the last Plan found them (leader only)
}

var (
	_ sarama.BalanceStrategy                     = (*Strategy)(nil)
	_ sarama.SubscriptionUserDataBalanceStrategy = (*Strategy)(nil)
	_ sarama.OnAssignmentBalanceStrategy         = (*Strategy)(nil)
)

// NewStrategy returns a Strategy for l whose member holds nothing yet.
func NewStrategy(l *Layout) *Strategy {
	return &Strategy{layout: l, last: Assignment{Generation: -1}}
}

// Name returns StrategyName.
func (s *Strategy) Name() string { return StrategyName }

// Plan runs on the group leader. It checks that topics match the layout's
// topology (a changed partition count is an error wrapping ErrTopology:
// the task set would change, which needs every instance restarted with the
// new layout), finds the group's settings (groupSettings), and assigns
// with Assign among the members that have them, or hold nothing and sent
// no user data. A member with other settings, or user data this version
// cannot read, gets no task. Every member gets an entry in the plan, so
// that sarama calls AssignmentData for it, even with no task.
func (s *Strategy) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	if err := s.layout.CheckTopics(topics); err != nil {
		return nil, err
	}
	ids := slices.Sorted(maps.Keys(members))
	claims := make(map[string]Member, len(ids))
	settings := make(map[string]string, len(ids))
	for _, id := range ids {
		m := Member{ID: id, Generation: -1}
		if ud := members[id].UserData; len(ud) > 0 {
			st, a, err := DecodeAssignment(ud)
			if err != nil {
				settings[id] = "" // unreadable: refused below
				continue
			}
			settings[id] = st
			m.Previous, m.Generation = a.Tasks, a.Generation
		} else {
			settings[id] = s.layout.settings // a member that holds nothing and says nothing
		}
		claims[id] = m
	}
	group := groupSettings(claims, settings, s.layout.settings)
	s.mu.Lock()
	s.planned = group
	s.mu.Unlock()
	ms := make([]Member, 0, len(ids))
	for _, id := range ids {
		if m, ok := claims[id]; ok && settings[id] == group {
			ms = append(ms, m)
		}
	}
	plan := make(sarama.BalanceStrategyPlan, len(ids))
	for _, id := range ids {
		plan[id] = map[string][]int32{}
	}
	if group != s.layout.settings {
		return plan, nil // the leader itself is refused: it plans no task under settings it does not share
	}
	for id, ts := range Assign(s.layout.Len(), ms) {
		for _, t := range ts {
			for _, p := range s.layout.Partitions(t) {
				plan.Add(id, p.Topic, p.Partition)
			}
		}
	}
	return plan, nil
}

// groupSettings is the group's settings: those most of the members of the
// latest generation (the highest Generation claimed) share; on a tie, the
// leader's own (mine) when it is among them, else the least in byte
// order.
func groupSettings(claims map[string]Member, settings map[string]string, mine string) string {
	latest := int32(-1)
	for _, m := range claims {
		latest = max(latest, m.Generation)
	}
	votes := map[string]int{}
	for id, m := range claims {
		if m.Generation == latest {
			votes[settings[id]]++
		}
	}
	best, n := mine, votes[mine]
	for _, st := range slices.Sorted(maps.Keys(votes)) {
		if votes[st] > n {
			best, n = st, votes[st]
		}
	}
	return best
}

// AssignmentData runs on the leader for each member of the plan: it
// encodes the member's tasks, derived from its partitions, and the new
// generation.
func (s *Strategy) AssignmentData(memberID string, topics map[string][]int32, generationID int32) ([]byte, error) {
	ids, err := s.layout.TasksOf(topics)
	if err != nil {
		return nil, fmt.Errorf("tasks: member %s: %w", memberID, err)
	}
	s.mu.Lock()
	group := s.planned
	s.mu.Unlock()
	return AppendAssignment(nil, group, Assignment{Generation: generationID, Tasks: ids}), nil
}

// SubscriptionUserData runs before each JoinGroup: it reports this
// member's latest assignment (or what Restore set), under the layout
// fingerprint. It never fails.
func (s *Strategy) SubscriptionUserData([]string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return AppendAssignment(nil, s.layout.settings, s.last), nil
}

// OnAssignment runs after each SyncGroup with this member's assignment.
// It records the tasks for Assigned. The tasks are read from the
// assignment's UserData when present (an assignment made under another
// layout makes Assigned fail) and otherwise derived from its partitions.
func (s *Strategy) OnAssignment(a *sarama.ConsumerGroupMemberAssignment, generationID int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last, s.err = Assignment{Generation: -1}, nil
	var topics map[string][]int32
	var ud []byte
	if a != nil {
		topics, ud = a.Topics, a.UserData
	}
	ids, err := s.layout.TasksOf(topics)
	if err != nil {
		s.err = err
		return
	}
	if len(ud) > 0 {
		group, got, err := DecodeAssignment(ud)
		switch {
		case err != nil:
			s.err = err
			return
		case group != s.layout.settings:
			s.err = &SettingsError{Group: group, Mine: s.layout.settings}
			return
		case !slices.Equal(got.Tasks, ids):
			s.err = fmt.Errorf("tasks: assignment user data names tasks %v, its partitions make %v", got.Tasks, ids)
			return
		}
	}
	s.last = Assignment{Generation: generationID, Tasks: ids}
}

// Assigned returns this member's tasks from the latest rebalance (call it
// in the ConsumerGroupHandler's Setup, whose session has the same
// generation), or an error when that assignment cannot be trusted: made
// under another layout, or holding part of a task. The pipeline must then
// consume nothing and leave the group.
func (s *Strategy) Assigned() (Assignment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Assignment{Generation: s.last.Generation, Tasks: slices.Clone(s.last.Tasks)}, s.err
}

// Restore sets what this member reports holding before its first
// rebalance: a restarted instance that learns from the watermark topic
// which tasks it owned (Report.Owner) gets them back when the leader
// plans, unless a member with a newer generation claims them. Call it
// before the consumer group's first Consume.
func (s *Strategy) Restore(a Assignment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := slices.Clone(a.Tasks)
	slices.Sort(ts)
	s.last = Assignment{Generation: a.Generation, Tasks: slices.Compact(ts)}
}

// SettingsError: the group runs with other settings than this member
// (Layout.Settings): another phase length, out-of-orderness bound, output
// topic, routing, task count, or input topics. The member got no task and
// must stop; Differences names what differs.
type SettingsError struct {
	Group, Mine string // Layout.Settings of the group and of this member
}

// Difference is one setting on which a member and its group disagree.
type Difference struct {
	Key, Group, Mine string
}

// Differences returns the settings that differ, in Settings order.
func (e *SettingsError) Differences() []Difference {
	group, mine := splitSettings(e.Group), splitSettings(e.Mine)
	var out []Difference
	for _, kv := range mine {
		if g := lookup(group, kv[0]); g != kv[1] {
			out = append(out, Difference{Key: kv[0], Group: g, Mine: kv[1]})
		}
	}
	for _, kv := range group {
		if lookup(mine, kv[0]) == "" {
			out = append(out, Difference{Key: kv[0], Group: kv[1]})
		}
	}
	return out
}

func (e *SettingsError) Error() string {
	var b strings.Builder
	b.WriteString("tasks: the consumer group runs with other settings than this instance:")
	for _, d := range e.Differences() {
		fmt.Fprintf(&b, " %s %s here, %s in the group;", d.Key, d.Mine, d.Group)
	}
	b.WriteString(" every instance of a group must agree (to change one, stop every instance, or start a new group and output topic)")
	return b.String()
}

// splitSettings splits Settings' words into key and value.
func splitSettings(s string) [][2]string {
	var out [][2]string
	for _, w := range strings.Fields(s) {
		k, v, _ := strings.Cut(w, "=")
		out = append(out, [2]string{k, v})
	}
	return out
}

func lookup(kvs [][2]string, key string) string {
	for _, kv := range kvs {
		if kv[0] == key {
			return kv[1]
		}
	}
	return ""
}
