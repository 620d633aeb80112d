package tasks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/align"
)

// TestStrategyInGroup runs Strategy inside sarama's real group protocol
// against kfake (an in-process Kafka; the protocol, not proof of
// transactions): three members join one group, then one leaves. It checks
// that sarama calls the hooks as Strategy expects: every member's
// Assigned matches the whole tasks of its claims, the group covers every
// task once, shares are 3/2/2, and the survivors keep their tasks.
func TestStrategyInGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process Kafka")
	}
	topo := m1(7, align.RoutePartition)
	layout := mustLayout(t, topo)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	createTopics(t, c.ListenAddrs(), topo.Inputs)

	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	members := map[string]*groupMember{}
	for _, name := range []string{"a", "b", "c"} {
		members[name] = startMember(ctx, t, c.ListenAddrs(), layout, name)
	}
	first := waitStable(t, layout, members)
	var shares []int
	for _, ts := range first {
		shares = append(shares, len(ts))
	}
	slices.Sort(shares)
	if !slices.Equal(shares, []int{2, 2, 3}) {
		t.Fatalf("shares %v, want 2, 2, 3 (%v)", shares, first)
	}

	members["c"].stop(t)
	delete(members, "c")
	second := waitStable(t, layout, members)
	for name, ts := range second {
		for _, id := range first[name] {
			if !slices.Contains(ts, id) {
				t.Fatalf("survivor %s lost task %d: before %v, after %v", name, id, first, second)
			}
		}
	}
}

// groupMember is one sarama consumer group client with its own Strategy.
type groupMember struct {
	cg   sarama.ConsumerGroup
	s    *Strategy
	done chan struct{}

	mu      sync.Mutex // guards gen, tasks, err and consume
	gen     int32
	tasks   []ID
	err     error // what Setup found wrong: fails the test
	consume error // the last Consume error: retried, as the pipeline does
}

func startMember(ctx context.Context, t *testing.T, brokers []string, l *Layout, name string) *groupMember {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "tasks-test-" + name
	cfg.Version = sarama.V3_9_0_0
	cfg.Consumer.Group.Session.Timeout = 3 * time.Second // with 1 s, a survivor once lost a task under -race on 2 loaded cores (suspected: its session expired and it rejoined without its tasks)
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 5 * time.Second
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 50 * time.Millisecond
	m := &groupMember{s: NewStrategy(l), done: make(chan struct{}), gen: -1}
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{m.s}
	cg, err := sarama.NewConsumerGroup(brokers, "tasks-test", cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.cg = cg
	var topics []string
	for _, in := range l.Topology().Inputs {
		topics = append(topics, in.Topic)
	}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, topics, m); err != nil {
				if err == sarama.ErrClosedConsumerGroup {
					return
				}
				m.mu.Lock()
				m.consume = err
				m.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

func (m *groupMember) stop(t *testing.T) {
	t.Helper()
	if err := m.cg.Close(); err != nil && err != sarama.ErrClosedConsumerGroup {
		t.Error(err)
	}
	<-m.done
}

// Setup records what the session claims, read through the Strategy.
func (m *groupMember) Setup(sess sarama.ConsumerGroupSession) error {
	a, err := m.s.Assigned()
	if err == nil && a.Generation != sess.GenerationID() {
		err = fmt.Errorf("Assigned generation %d, session %d", a.Generation, sess.GenerationID())
	}
	if err == nil {
		var whole []ID
		if whole, err = m.s.layout.TasksOf(sess.Claims()); err == nil && !slices.Equal(whole, a.Tasks) {
			err = fmt.Errorf("claims %v make tasks %v, Assigned says %v", sess.Claims(), whole, a.Tasks)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen, m.tasks, m.err = sess.GenerationID(), a.Tasks, err
	return nil
}

func (m *groupMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *groupMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-sess.Context().Done():
			return nil
		case _, ok := <-claim.Messages():
			if !ok {
				return nil
			}
		}
	}
}

// waitStable polls until every member is in one generation and together
// they hold every task once, and returns each member's tasks.
func waitStable(t *testing.T, l *Layout, members map[string]*groupMember) map[string][]ID {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		out := map[string][]ID{}
		gens := map[int32]bool{}
		held := map[ID]int{}
		for name, m := range members {
			m.mu.Lock()
			if m.err != nil {
				t.Fatalf("member %s: %v", name, m.err)
			}
			out[name], gens[m.gen] = m.tasks, true
			for _, id := range m.tasks {
				held[id]++
			}
			m.mu.Unlock()
		}
		if len(gens) == 1 && !gens[-1] && len(held) == l.Len() && !slices.ContainsFunc(slices.Collect(maps.Values(held)), func(n int) bool { return n > 1 }) {
			return out
		}
		last = fmt.Sprintf("generations %v, tasks %v", slices.Collect(maps.Keys(gens)), out)
		for name, m := range members {
			m.mu.Lock()
			if m.consume != nil {
				last += fmt.Sprintf("; %s: %v", name, m.consume)
			}
			m.mu.Unlock()
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for an event
	}
	t.Fatalf("group not stable after 20 s: %s", last)
	return nil
}

func createTopics(t *testing.T, brokers []string, inputs []Input) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, in := range inputs {
		resp, err := adm.CreateTopic(t.Context(), in.Partitions, 1, nil, in.Topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
