package tasks

import (
	"fmt"
	"maps"
	"slices"
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
// Every encoding carries the layout fingerprint: Plan refuses members
// whose layout differs from the leader's, and Assigned reports an
// assignment made under another layout, so that two instances never write
// under different layouts.
//
// Plan, AssignmentData, SubscriptionUserData and OnAssignment are called by
// sarama on its rebalance path; Assigned and Restore by the pipeline. All
// are safe for concurrent use.
type Strategy struct {
	layout *Layout

	mu   sync.Mutex // guards last and err
	last Assignment // this member's latest assignment (or what Restore set)
	err  error      // why the latest assignment cannot be used, or nil
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
// new layout) and that every member's UserData is empty (a member that
// holds nothing) or an encoding under the same layout fingerprint, then
// assigns with Assign. Every member gets an entry in the plan, so that
// sarama calls AssignmentData for it, even with no task.
func (s *Strategy) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	if err := s.layout.CheckTopics(topics); err != nil {
		return nil, err
	}
	ms := make([]Member, 0, len(members))
	for _, id := range slices.Sorted(maps.Keys(members)) {
		m := Member{ID: id, Generation: -1}
		if ud := members[id].UserData; len(ud) > 0 {
			fp, a, err := DecodeAssignment(ud)
			if err != nil {
				return nil, fmt.Errorf("tasks: member %s: %w", id, err)
			}
			if fp != s.layout.fp {
				return nil, &LayoutMismatchError{Member: id, Got: fp, Want: s.layout.fp}
			}
			m.Previous, m.Generation = a.Tasks, a.Generation
		}
		ms = append(ms, m)
	}
	plan := make(sarama.BalanceStrategyPlan, len(ms))
	for id, ts := range Assign(s.layout.Len(), ms) {
		plan[id] = map[string][]int32{}
		for _, t := range ts {
			for _, p := range s.layout.Partitions(t) {
				plan.Add(id, p.Topic, p.Partition)
			}
		}
	}
	return plan, nil
}

// AssignmentData runs on the leader for each member of the plan: it
// encodes the member's tasks, derived from its partitions, and the new
// generation.
func (s *Strategy) AssignmentData(memberID string, topics map[string][]int32, generationID int32) ([]byte, error) {
	ids, err := s.layout.TasksOf(topics)
	if err != nil {
		return nil, fmt.Errorf("tasks: member %s: %w", memberID, err)
	}
	return AppendAssignment(nil, s.layout.fp, Assignment{Generation: generationID, Tasks: ids}), nil
}

// SubscriptionUserData runs before each JoinGroup: it reports this
// member's latest assignment (or what Restore set), under the layout
// fingerprint. It never fails.
func (s *Strategy) SubscriptionUserData([]string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return AppendAssignment(nil, s.layout.fp, s.last), nil
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
		fp, got, err := DecodeAssignment(ud)
		switch {
		case err != nil:
			s.err = err
			return
		case fp != s.layout.fp:
			s.err = &LayoutMismatchError{Member: "leader", Got: fp, Want: s.layout.fp}
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

// LayoutMismatchError: a member, or the leader, works under another task
// layout (another topology or version of phasegate).
type LayoutMismatchError struct {
	Member    string
	Got, Want uint64 // fingerprints: theirs, ours
}

func (e *LayoutMismatchError) Error() string {
	return fmt.Sprintf("tasks: %s uses task layout %016x, this instance %016x: every instance needs the same input topics, output partitions and routing",
		e.Member, e.Got, e.Want)
}
