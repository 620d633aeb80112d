package proxy

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/IBM/sarama/mocks"

	"github.com/phasegate/phasegate/fleet"
	"github.com/phasegate/phasegate/tasks"
)

// The fleet summary counts tasks per owner, names this instance's and
// lists the live tasks with the lowest watermark, at most top.
func TestSummarizeFleet(t *testing.T) {
	tasks := []TaskStatus{
		{Task: 0, Owner: "a", Mine: true, Reported: true, Low: 12},
		{Task: 1, Owner: "b", Reported: true, Low: 10},
		{Task: 2, Owner: "b", Reported: true, Low: 30, Idle: true},
		{Task: 3},
		{Task: 4, Owner: "a", Mine: true, Reported: true, Low: 11},
	}
	cases := []struct {
		top    int
		lowest []int32
	}{{0, nil}, {1, []int32{1}}, {2, []int32{1, 4}}, {10, []int32{1, 4, 0}}}
	for _, c := range cases {
		f := summarizeFleet(tasks, c.top)
		var lowest []int32
		for _, l := range f.Lowest {
			lowest = append(lowest, l.Task)
		}
		if !slices.Equal(lowest, c.lowest) {
			t.Errorf("top %d: lowest %v, want %v (idle and unreported tasks left out)", c.top, lowest, c.lowest)
		}
		if f.Tasks != 5 || !slices.Equal(f.Owned, []int32{0, 4}) || f.Unreported != 1 || f.PerOwner["a"] != 2 || f.PerOwner["b"] != 2 {
			t.Errorf("top %d: %+v", c.top, f)
		}
	}
}

// A report is written when what others seal or stream by changed (its
// marked phase: others forget data phases by it, FLEET.md rule F8, and a
// shared partition's writers stream the next phase once every task marked
// the last), and a change of only its time watermark waits for
// reportEvery; an unchanged report is written again after reportRefresh
// (FLEET.md F3).
func TestReportDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sent := fleet.Report{Low: 5, LowMs: 500, Marked: 4, Open: []uint64{5}, Generation: 2}
	with := func(f func(*fleet.Report)) fleet.Report { r := sent; f(&r); return r }
	cases := []struct {
		name  string
		rep   fleet.Report
		after time.Duration
		want  bool
	}{
		{"unchanged", sent, reportRefresh - time.Millisecond, false},
		{"unchanged, refreshed", sent, reportRefresh, true},
		{"low", with(func(r *fleet.Report) { r.Low = 6 }), 0, true},
		{"open", with(func(r *fleet.Report) { r.Open = []uint64{5, 6} }), 0, true},
		{"generation", with(func(r *fleet.Report) { r.Generation = 3 }), 0, true},
		{"low_ms, early", with(func(r *fleet.Report) { r.LowMs = 600 }), reportEvery / 2, false},
		{"low_ms, later", with(func(r *fleet.Report) { r.LowMs = 600 }), reportEvery, true},
		{"marked", with(func(r *fleet.Report) { r.Marked = 5 }), 0, true},
	}
	for _, c := range cases {
		g := &generation{sent: sent, sentAt: t0}
		if got := g.due(c.rep, t0.Add(c.after)); got != c.want {
			t.Errorf("%s: due = %v, want %v", c.name, got, c.want)
		}
	}
}

// The reports the loop queues are written in order, one record per task.
// A report queued while the writer is busy, behind an unwritten one of the
// same generation and tasks, replaces it and names the open phases of both
// (FLEET.md F7); one of another generation or of other tasks waits its
// turn. A queued report wakes the writer; what is queued when the queue
// closes is still written; a write error is taken (and logged) while the
// writer waits for work and while it waits on the producer's input (it is
// the producer's only user). Without the merge, phase 3
// (sealed by the time of the second report) would be named by no record.
func TestReportQueue(t *testing.T) {
	rep := func(gen int32, low uint64, open ...uint64) fleet.Report {
		return fleet.Report{Layout: 7, Low: low, High: low, Open: open, Owner: "a", Generation: gen}
	}
	in := make(chan *sarama.ProducerMessage)
	errs := make(chan *sarama.ProducerError, 1)
	p := &Pipeline{cfg: Config{WatermarkTopic: "w"}, log: slog.New(slog.DiscardHandler), toWrite: newReportQueue(),
		deps: Deps{Reports: &reportIO{prod: fakeReportProducer{in: in, errs: errs}}}}
	done := make(chan struct{})
	go func() { defer close(done); p.writeReports() }()

	type written struct {
		task int32
		gen  int32
		low  uint64
		open []uint64
	}
	next := func(i int, w written) {
		t.Helper()
		var m *sarama.ProducerMessage
		select {
		case m = <-in:
		case <-time.After(5 * time.Second):
			t.Fatalf("record %d (%+v) not written", i, w)
		}
		key, _ := m.Key.Encode()
		value, _ := m.Value.Encode()
		r, ok, err := fleet.DecodeReport(key, value)
		if err != nil || !ok {
			t.Fatalf("record %d: %v (ok %v)", i, err, ok)
		}
		if r.Task != w.task || r.Generation != w.gen || r.Low != w.low || !slices.Equal(r.Open, w.open) || m.Topic != "w" {
			t.Errorf("record %d: task %d generation %d low %d open %v on %s, want %+v on w", i, r.Task, r.Generation, r.Low, r.Open, m.Topic, w)
		}
	}

	taken := func(when string) {
		t.Helper()
		errs <- &sarama.ProducerError{Err: errors.New("broker gone")}
		waitFor(t, 5*time.Second, "the writer to take the write error while it "+when, func() bool { return len(errs) == 0 })
	}
	taken("waited for work")
	both := []tasks.ID{0, 1}
	p.toWrite.put(reportJob{rep: rep(1, 2, 2), tasks: both})
	next(0, written{0, 1, 2, []uint64{2}}) // the writer woke; it now waits to write task 1's
	taken("waited on the producer's input")
	p.toWrite.put(reportJob{rep: rep(1, 3, 3), tasks: both})
	p.toWrite.put(reportJob{rep: rep(1, 5, 4, 5), tasks: both})       // replaces it: open 3, 4, 5
	p.toWrite.put(reportJob{rep: rep(2, 5, 5), tasks: both})          // another generation: queued after
	p.toWrite.put(reportJob{rep: rep(2, 6, 6), tasks: []tasks.ID{1}}) // other tasks: queued after
	p.toWrite.close()
	for i, w := range []written{
		{1, 1, 2, []uint64{2}},
		{0, 1, 5, []uint64{3, 4, 5}}, {1, 1, 5, []uint64{3, 4, 5}},
		{0, 2, 5, []uint64{5}}, {1, 2, 5, []uint64{5}},
		{1, 2, 6, []uint64{6}},
	} {
		next(i+1, w)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("writeReports did not return once the queue was closed and written")
	}
}

// mergeOpen keeps the lowest fleet.MaxOpen of both lists, ascending,
// each phase once.
func TestMergeOpen(t *testing.T) {
	many := make([]uint64, fleet.MaxOpen)
	for i := range many {
		many[i] = uint64(2 * i)
	}
	for _, c := range []struct {
		name         string
		older, newer []uint64
		want         []uint64
	}{
		{name: "disjoint", older: []uint64{1, 2}, newer: []uint64{4}, want: []uint64{1, 2, 4}},
		{name: "overlapping", older: []uint64{1, 2, 3}, newer: []uint64{2, 3, 4}, want: []uint64{1, 2, 3, 4}},
		{name: "empty newer", older: []uint64{9}, want: []uint64{9}},
		{name: "both empty", want: []uint64{}},
	} {
		if got := mergeOpen(c.older, c.newer); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	got := mergeOpen(many, []uint64{1})
	if len(got) != fleet.MaxOpen || got[0] != 0 || got[1] != 1 || got[len(got)-1] != many[len(many)-2] {
		t.Errorf("over MaxOpen: %d phases, up to %v; want %d, the lowest", len(got), got[len(got)-1], fleet.MaxOpen)
	}
}

// fakeReportProducer is an AsyncProducer whose Input is in and Errors
// errs; nothing else is used.
type fakeReportProducer struct {
	sarama.AsyncProducer
	in   chan *sarama.ProducerMessage
	errs chan *sarama.ProducerError
}

func (p fakeReportProducer) Input() chan<- *sarama.ProducerMessage { return p.in }
func (p fakeReportProducer) Errors() <-chan *sarama.ProducerError  { return p.errs }

// seqConsumer hands out the partition consumers of its mocks in turn, one
// per ConsumePartition: a reopened partition gets a fresh one.
type seqConsumer struct {
	sarama.Consumer
	mu sync.Mutex
	cs []sarama.Consumer
}

func (s *seqConsumer) ConsumePartition(topic string, partition int32, offset int64) (sarama.PartitionConsumer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cs[0]
	s.cs = s.cs[1:]
	return c.ConsumePartition(topic, partition, offset)
}

// The watermark topic's partition consumer closes (sarama closes it on
// ErrOffsetOutOfRange: the topic was deleted and created again). The
// reader opens it again from the oldest record and forwards what it
// gives; before, it took the nil record of the closed channel and the
// process panicked.
func TestReadReportsReopens(t *testing.T) {
	first, second := mocks.NewConsumer(t, nil), mocks.NewConsumer(t, nil)
	closed := first.ExpectConsumePartition("wm", 0, sarama.OffsetOldest)
	again := second.ExpectConsumePartition("wm", 0, sarama.OffsetOldest)
	closed.YieldMessage(&sarama.ConsumerMessage{Key: []byte("0"), Value: []byte("before")})
	p := &Pipeline{
		deps:    Deps{Reports: &reportIO{topic: "wm", cons: &seqConsumer{cs: []sarama.Consumer{first, second}}}},
		reports: make(chan fleetRecord), log: slog.New(slog.DiscardHandler), now: time.Now,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.readReports(ctx) }()
	defer func() { cancel(); <-done }()
	next := func() string {
		t.Helper()
		select {
		case r := <-p.reports:
			return string(r.value)
		case <-time.After(5 * time.Second):
			t.Fatal("no record forwarded within 5 s")
			return ""
		}
	}
	if got := next(); got != "before" {
		t.Fatalf("first record %q, want before", got)
	}
	closed.AsyncClose()
	again.YieldMessage(&sarama.ConsumerMessage{Key: []byte("0"), Value: []byte("after")})
	if got := next(); got != "after" {
		t.Fatalf("after the close: %q, want after", got)
	}
}

// An ACL missing on the watermark topic stops the instance with an error
// that names the topic and the grant (docs/SECURITY.md): without it the
// other instances stall on this one's tasks. Before, a missing READ or
// WRITE only logged a warning and the instance ran on.
func TestWatermarkTopicNotAuthorizedStops(t *testing.T) {
	newP := func(cons sarama.Consumer) *Pipeline {
		return &Pipeline{cfg: Config{WatermarkTopic: "wm"}, deps: Deps{Reports: &reportIO{topic: "wm", cons: cons}},
			reports: make(chan fleetRecord), fatal: make(chan error, 1), log: slog.New(slog.DiscardHandler), now: time.Now}
	}
	check := func(t *testing.T, p *Pipeline, op string) {
		t.Helper()
		select {
		case err := <-p.fatal:
			if !errors.Is(err, errNotAuthorized) || !strings.Contains(err.Error(), op+" on the watermark topic PHASEGATE_WATERMARK_TOPIC=wm") {
				t.Fatalf("stopped with %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the instance did not stop")
		}
	}
	t.Run("write", func(t *testing.T) {
		p := newP(nil)
		p.reportFailed(&sarama.ProducerError{Err: sarama.ErrTopicAuthorizationFailed})
		check(t, p, "WRITE")
	})
	t.Run("read", func(t *testing.T) {
		c := mocks.NewConsumer(t, nil)
		c.ExpectConsumePartition("wm", 0, sarama.OffsetOldest).YieldError(sarama.ErrTopicAuthorizationFailed)
		p := newP(c)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = p.followReports(ctx, p.deps.Reports, &logLimiter{last: map[string]time.Time{}})
		}()
		check(t, p, "READ")
		cancel()
		<-done
	})
}

// describeConfigs answers DescribeConfig with unknown-topic errors first,
// as a broker does that has not yet learnt of a topic another instance
// just created, then with policy.
type describeConfigs struct {
	sarama.ClusterAdmin
	unknown int
	policy  string
}

func (a *describeConfigs) DescribeConfig(sarama.ConfigResource) ([]sarama.ConfigEntry, error) {
	if a.unknown > 0 {
		a.unknown--
		return nil, &sarama.DescribeConfigError{Err: sarama.ErrUnknownTopicOrPartition}
	}
	return []sarama.ConfigEntry{{Name: "cleanup.policy", Value: a.policy}}, nil
}

// The watermark topic's shape is checked once the broker asked knows the
// topic (e2e/cluster (a): an instance exited when another had just created
// it), and a topic of another shape is refused.
func TestReportTopicChecked(t *testing.T) {
	meta := &sarama.TopicMetadata{Partitions: []*sarama.PartitionMetadata{{ID: 0}}}
	if err := checkReportTopic("wm", meta, &describeConfigs{unknown: 2, policy: "compact"}); err != nil {
		t.Errorf("a topic the broker learns of after two answers: %v, want accepted", err)
	}
	if err := checkReportTopic("wm", meta, &describeConfigs{policy: "delete"}); !errors.Is(err, errReportTopic) {
		t.Errorf("cleanup.policy=delete: %v, want errReportTopic", err)
	}
}
