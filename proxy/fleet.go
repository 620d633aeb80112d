package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/fleet"
	"github.com/phasegate/phasegate/internal/topicread"
	"github.com/phasegate/phasegate/tasks"
	"github.com/phasegate/phasegate/watermarks"
)

// reportEvery bounds how often the owned tasks' reports are written to the
// watermark topic when only their time watermark moved.
const reportEvery = 100 * time.Millisecond

// reportRefresh is how often the owned tasks are reported even when
// nothing changed (docs/FLEET.md, F3): a tombstone, a deleted and
// recreated topic, a report lost to a producer error, or an instance that
// restarted without a rebalance (static membership) leaves a task without
// a usable report, which holds the global watermark; the next refresh
// heals it.
const reportRefresh = time.Second

// newLayout builds the task layout from the topics' partition counts
// (tasks.Layout). With key routing every task writes every output
// partition: with more than one task, each writes its own lane there
// (MARKERS.md 3.3).
func newLayout(c sarama.Client, cfg Config, outParts int32) (*tasks.Layout, error) {
	t := tasks.Topology{Routing: align.RoutePartition, OutputPartitions: outParts, OutputTopic: cfg.OutputTopic,
		PhaseLength: cfg.Watermarks.PhaseLength, MaxOutOfOrderness: cfg.Watermarks.MaxOutOfOrderness}
	if cfg.Routing == align.RouteKey {
		t.Routing, t.Tasks = align.RouteKey, cfg.Tasks
	}
	for _, topic := range cfg.InputTopics {
		ps, err := c.Partitions(topic)
		if err != nil {
			return nil, fmt.Errorf("input topic %s: %w", topic, err)
		}
		t.Inputs = append(t.Inputs, tasks.Input{Topic: topic, Partitions: int32(len(ps))})
	}
	return tasks.NewLayout(t)
}

// reportIO writes this instance's task reports to the watermark topic and
// reads everyone's (docs/FLEET.md). It has its own client: the topic is
// not an input of the group and its producer is not transactional.
type reportIO struct {
	topic  string
	client sarama.Client
	prod   sarama.AsyncProducer
	cons   sarama.Consumer
	once   sync.Once
}

// dialReports creates the watermark topic when missing (one partition,
// compacted, replicated like the output topic), refuses one that exists
// with another shape, and connects its producer and consumer.
func dialReports(k Kafka, cfg Config, c sarama.Client, admin sarama.ClusterAdmin) (*reportIO, error) {
	replicas, err := c.Replicas(cfg.OutputTopic, 0)
	if err != nil {
		return nil, fmt.Errorf("replicas of output topic %s: %w", cfg.OutputTopic, err)
	}
	// An existing topic is checked, not created again: creating needs
	// CREATE, which a principal with an existing topic should not need
	// (an unauthorized create is refused before "already exists").
	meta, err := describeTopic(admin, cfg.WatermarkTopic)
	if err == nil && meta == nil {
		compact := "compact"
		err = admin.CreateTopic(cfg.WatermarkTopic, &sarama.TopicDetail{
			NumPartitions: 1, ReplicationFactor: int16(max(1, len(replicas))),
			ConfigEntries: map[string]*string{"cleanup.policy": &compact},
		}, false)
		switch {
		case err == nil, errors.Is(err, sarama.ErrTopicAlreadyExists): // created by this instance or another
			meta, err = awaitTopic(admin, cfg.WatermarkTopic)
		default:
			err = fmt.Errorf("watermark topic %s does not exist and cannot be created: %w (create it with one partition and cleanup.policy=compact, grant this principal CREATE on it, or set PHASEGATE_WATERMARK_TOPIC to an existing one)", cfg.WatermarkTopic, err)
		}
	}
	if err == nil {
		err = checkReportTopic(cfg.WatermarkTopic, meta, admin)
	}
	if err != nil {
		return nil, err
	}
	// The producer and the consumer connect on their own: a broker answers
	// one request of a connection at a time, and the consumer's fetch waits
	// up to Consumer.MaxWaitTime (500 ms) for a report, so on one
	// connection a report written behind it waited as long, and was read
	// as late (bench lanes: report -> seal p50 455 ms with 3 instances).
	r := &reportIO{topic: cfg.WatermarkTopic}
	if r.client, err = sarama.NewClient(k.Brokers, k.reportConfig()); err != nil {
		return nil, fmt.Errorf("connect to the watermark topic: %w", err)
	}
	if err = probeReports(k, cfg, r.client); err == nil {
		if r.prod, err = sarama.NewAsyncProducerFromClient(r.client); err == nil {
			r.cons, err = sarama.NewConsumer(k.Brokers, k.reportConfig())
		}
	}
	if err != nil {
		_ = r.close()
		return nil, fmt.Errorf("watermark topic %s (PHASEGATE_WATERMARK_TOPIC): %w", cfg.WatermarkTopic, err)
	}
	return r, nil
}

// probeReports proves, before anything is consumed, that this principal
// may write and read the watermark topic: it writes a tombstone whose key
// is no task ID ("probe:" and the transactional ID; readers ignore it,
// compaction drops it) and reads it back. Without the proof a missing
// ACL showed only once transactions had committed (e2e/cluster's ACL
// test: 1,800 of 2,000 records before the instance stopped).
func probeReports(k Kafka, cfg Config, client sarama.Client) error {
	pc := k.reportConfig()
	pc.Producer.Return.Successes = true
	sp, err := sarama.NewSyncProducer(k.Brokers, pc)
	if err != nil {
		return err
	}
	defer func() { _ = sp.Close() }()
	_, off, err := sp.SendMessage(&sarama.ProducerMessage{Topic: cfg.WatermarkTopic, Partition: 0, Key: sarama.StringEncoder("probe:" + cfg.TransactionalID)})
	if err != nil {
		return reportsProbeError("WRITE", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := topicread.New(client, cfg.WatermarkTopic)
	tr.Add(0, off, off+1)
	for !tr.Finished() {
		if err := tr.Fetch(ctx, nil, func(topicread.Record) {}); err != nil {
			return reportsProbeError("READ", err)
		}
	}
	return nil
}

// reportsProbeError says which ACL of the watermark topic is missing, when
// that is the cause.
func reportsProbeError(op string, err error) error {
	if errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		return fmt.Errorf("%w: %s: grant this principal READ, WRITE and DESCRIBE_CONFIGS on it (docs/SECURITY.md): %v", errNotAuthorized, op, err)
	}
	return fmt.Errorf("%s at start: %w", strings.ToLower(op), err)
}

// errReportTopic: an existing watermark topic that is not one compacted
// partition. With another cleanup policy the reports of idle tasks expire
// with the retention; with several partitions an instance reads one and
// misses the others' reports: both stall the fleet (docs/FLEET.md).
var errReportTopic = errors.New("the watermark topic must have one partition and cleanup.policy=compact")

// describeTopic returns topic's metadata, nil when it does not exist. It
// never creates it (a metadata request of the admin client does not).
func describeTopic(admin sarama.ClusterAdmin, topic string) (*sarama.TopicMetadata, error) {
	meta, err := admin.DescribeTopics([]string{topic})
	switch {
	case err != nil:
		return nil, fmt.Errorf("describe topic %s: %w", topic, err)
	case len(meta) != 1:
		return nil, fmt.Errorf("describe topic %s: %d topics in the answer", topic, len(meta))
	case errors.Is(meta[0].Err, sarama.ErrUnknownTopicOrPartition):
		return nil, nil
	case errors.Is(meta[0].Err, sarama.ErrLeaderNotAvailable):
		return meta[0], nil // it exists; awaitTopic waits for its leader
	case !errors.Is(meta[0].Err, sarama.ErrNoError):
		return nil, fmt.Errorf("describe topic %s: %w", topic, meta[0].Err)
	}
	return meta[0], nil
}

// awaitTopic describes a topic just created, by this instance or one
// starting at the same moment, until the broker lists it with a leader for
// every partition (at most 30 s): right after a create it may not (e2e
// TestSimultaneousStart: 33 exits in 35 failing rounds of three
// simultaneous starts, UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE).
func awaitTopic(admin sarama.ClusterAdmin, topic string) (*sarama.TopicMetadata, error) {
	var meta *sarama.TopicMetadata
	var err error
	if !untilNew(func() bool {
		meta, err = describeTopic(admin, topic)
		return err == nil && meta != nil && hasLeaders(meta)
	}) {
		if err == nil {
			err = errors.New("no leader for every partition yet")
		}
		return nil, fmt.Errorf("topic %s was created but is not ready after %s: %w", topic, newTopicWait, err)
	}
	return meta, nil
}

// newTopicWait bounds how long a topic just created (maybe by another
// instance) may take to reach the brokers asked about it.
const newTopicWait = 30 * time.Second

// untilNew calls done every 100 ms until it returns true (true) or
// newTopicWait has passed (false).
func untilNew(done func() bool) bool {
	for deadline := time.Now().Add(newTopicWait); !done(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// hasLeaders reports whether every partition of meta has a leader.
func hasLeaders(meta *sarama.TopicMetadata) bool {
	for _, p := range meta.Partitions {
		if !errors.Is(p.Err, sarama.ErrNoError) || p.Leader < 0 {
			return false
		}
	}
	return len(meta.Partitions) > 0
}

// checkReportTopic refuses an existing watermark topic of another shape.
func checkReportTopic(topic string, meta *sarama.TopicMetadata, admin sarama.ClusterAdmin) error {
	const fix = "(delete it, or set PHASEGATE_WATERMARK_TOPIC to a new name: phasegate creates it)"
	if n := len(meta.Partitions); n != 1 {
		return fmt.Errorf("%w: %s has %d partitions %s", errReportTopic, topic, n, fix)
	}
	// A broker that has not learnt of a topic just created (by another
	// instance starting at the same time) answers UNKNOWN_TOPIC_OR_PARTITION
	// for a while: e2e/cluster (a) saw an instance exit on it.
	var entries []sarama.ConfigEntry
	var err error
	untilNew(func() bool {
		entries, err = admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"cleanup.policy"}})
		var dce *sarama.DescribeConfigError
		return !errors.As(err, &dce) || dce.Err != sarama.ErrUnknownTopicOrPartition
	})
	if err != nil {
		return fmt.Errorf("describe the configuration of watermark topic %s: %w (grant this principal DESCRIBE_CONFIGS on it: docs/SECURITY.md)", topic, err)
	}
	for _, e := range entries {
		if e.Name == "cleanup.policy" && e.Value != "compact" {
			return fmt.Errorf("%w: %s has cleanup.policy=%s %s", errReportTopic, topic, e.Value, fix)
		}
	}
	return nil
}

// reportConfig configures the watermark topic's clients: an idempotent
// producer (a report lost or repeated is harmless, the next one replaces
// it; order per task is what matters) and a plain consumer.
func (k Kafka) reportConfig() *sarama.Config {
	c := k.Base()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Retry.Max = 10
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	c.Net.MaxOpenRequests = 1
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	// As the group's consumer (ConsumerConfig): the partition is fetched
	// again half a second after its leader failed, not two.
	c.Consumer.Retry.Backoff = 500 * time.Millisecond
	// A broker that hangs (paused, cut off) must not hold the fleet's
	// reports for the 30 s default: a fetch answers within MaxWaitTime
	// and a produce within Producer.Timeout, so 10 s only ends requests
	// that will not be answered, and the client retries on another
	// connection once leadership moved.
	c.Net.ReadTimeout = requestTimeout
	c.Producer.Timeout = 5 * time.Second
	return c
}

func (r *reportIO) close() error {
	r.once.Do(func() {
		if r.prod != nil {
			r.prod.AsyncClose()
			for range r.prod.Errors() {
			}
		}
		if r.cons != nil {
			_ = r.cons.Close()
		}
		_ = r.client.Close()
	})
	return nil
}

// fleetRecord is one record of the watermark topic.
type fleetRecord struct{ key, value []byte }

// readReports forwards every record of the watermark topic, from the
// oldest, to the loop until ctx ends. When the partition consumer stops
// (the topic was deleted, its partition moved and cannot be followed), it
// reads the topic again from the oldest record: reports are idempotent,
// and the owners' refreshes replace what was lost (reportRefresh).
func (p *Pipeline) readReports(ctx context.Context) {
	r := p.deps.Reports
	warn := &logLimiter{every: 10 * time.Second, last: map[string]time.Time{}} // this goroutine's own
	for {
		err := p.followReports(ctx, r, warn)
		if ctx.Err() != nil {
			return
		}
		if warn.allow("stopped", p.now()) {
			p.log.Warn("reading the watermark topic stopped; reading it again from the start, phases wait for the other instances' reports meanwhile",
				"topic", r.topic, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// errReportsClosed: sarama closed the watermark topic's partition
// consumer (a fatal error of the partition, such as a deleted topic).
var errReportsClosed = errors.New("the partition consumer closed")

// followReports reads the watermark topic from its oldest record until
// ctx ends (nil) or the partition consumer fails or closes (the error).
func (p *Pipeline) followReports(ctx context.Context, r *reportIO, warn *logLimiter) error {
	pc, err := r.cons.ConsumePartition(r.topic, 0, sarama.OffsetOldest)
	if err != nil {
		return err
	}
	defer pc.AsyncClose()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-pc.Messages():
			if !ok {
				return errReportsClosed
			}
			select {
			case p.reports <- fleetRecord{key: m.Key, value: m.Value}:
			case <-ctx.Done():
				return nil
			}
		case err, ok := <-pc.Errors():
			if !ok {
				return errReportsClosed
			}
			if errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
				p.stop(p.reportsDenied("READ", err))
				return nil
			}
			if warn.allow("failed", p.now()) {
				p.log.Warn("reading the watermark topic failed; phases wait for the other instances' reports", "topic", r.topic, "err", err)
			}
		}
	}
}

// applyReport takes one record of the watermark topic into the view. This
// instance's reports of its current generation are skipped: share applies
// them as it writes them, and the copy read back is older.
func (p *Pipeline) applyReport(rec fleetRecord) {
	if rec.value == nil {
		// A tombstone withdraws its task's report; one whose key is no
		// task ID (an instance's start-up probe) means nothing.
		if task, err := fleet.DecodeKey(rec.key); err == nil {
			p.view.Forget(task)
		}
		return
	}
	rep, ok, err := fleet.DecodeReport(rec.key, rec.value)
	switch {
	case err != nil:
		p.log.Warn("malformed record on the watermark topic ignored", "topic", p.cfg.WatermarkTopic, "err", err)
	case !ok:
		if task, err := fleet.DecodeKey(rec.key); err == nil {
			p.view.Forget(task)
		}
	case p.gen != nil && rep.Owner == p.cfg.TransactionalID && rep.Generation == p.gen.groupGen:
	default:
		p.view.Apply(rep)
		if p.log.Enabled(context.Background(), slog.LevelDebug) { // one per report: skip building the line
			p.log.Debug("watermark report read", "task", rep.Task, "owner", rep.Owner, "low", rep.Low, "idle", rep.Idle, "age", p.now().Sub(time.UnixMilli(rep.AtMs)))
		}
	}
}

// share tells the fleet what this instance's tasks know (applied to the
// view at once, queued for the watermark topic when it changed), then caps
// the session by the fleet's global watermark and has it seal the phases
// other tasks hold data of (docs/FLEET.md, F3 to F7). It reports whether
// the cap rose: a Step may then seal more.
func (p *Pipeline) share(g *generation) bool {
	now := p.now()
	if len(g.tasks) > 0 {
		rep := p.report(g, now)
		fleet.ApplyEach(p.view, rep, g.tasks)
		if g.due(rep, now) {
			p.toWrite.put(reportJob{rep: rep, tasks: g.tasks})
			g.sent, g.sentAt = rep, now
		}
	}
	global, ms, held := p.view.Advance()
	g.held = held
	rose := !g.floorSet || global > g.floor.Phase
	if rose {
		p.log.Debug("fleet's global watermark rose", "phase", global, "held_by_task", held)
	}
	g.floor, g.floorSet = watermarks.Mark{Phase: global, Ms: ms}, true
	g.s.Floor(g.floor, true)
	g.s.Expect(p.view.DataPhases(g.s.Global(), global))
	p.view.Prune()
	g.s.FleetMarked(p.view.Marked())
	return rose
}

// reportQueue hands the owned tasks' reports from the loop to
// writeReports, so that a slow producer never stalls the loop: writing
// them itself, one record per owned task, the loop waited on the
// producer's input for up to 0.74 s (e2e P1, 256 tasks, while a
// transaction step was in flight) and read no record meanwhile. A report
// queued behind an unwritten one of the same generation and tasks takes
// its place, naming the open phases of both (mergeOpen).
type reportQueue struct {
	mu     sync.Mutex
	jobs   []reportJob
	closed bool
	ready  chan struct{} // capacity 1: jobs were queued, or the queue closed
}

// reportJob is one report to write for each of tasks.
type reportJob struct {
	rep   fleet.Report
	tasks []tasks.ID
}

func newReportQueue() *reportQueue { return &reportQueue{ready: make(chan struct{}, 1)} }

// put queues j; it never blocks.
func (q *reportQueue) put(j reportJob) {
	q.mu.Lock()
	if n := len(q.jobs); n > 0 && q.jobs[n-1].rep.Generation == j.rep.Generation && slices.Equal(q.jobs[n-1].tasks, j.tasks) {
		j.rep.Open = mergeOpen(q.jobs[n-1].rep.Open, j.rep.Open)
		q.jobs[n-1] = j
	} else {
		q.jobs = append(q.jobs, j)
	}
	q.mu.Unlock()
	q.signal()
}

// close ends the queue: take returns what is left, and closed.
func (q *reportQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *reportQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the queued jobs in order, and whether the queue is closed
// (nothing more will come); it never blocks.
func (q *reportQueue) take() (jobs []reportJob, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	jobs, q.jobs = q.jobs, nil
	return jobs, q.closed
}

// mergeOpen is the open phases of a report and of the unwritten one it
// replaces, ascending, the lowest fleet.MaxOpen. A phase is named open by
// every report of its task until the task seals it (FLEET.md F7), so a
// report that raised low past phase N while naming N must not be lost to
// a later one that no longer names it: another instance reading only the
// later one would seal N without writing N's marker. Past fleet.MaxOpen
// the older phases can crowd out newer ones, as one report's own list
// keeps its lowest (report): a task with more open phases than that
// loses F7's guarantee either way.
func mergeOpen(older, newer []uint64) []uint64 {
	out := make([]uint64, 0, len(older)+len(newer))
	out = append(append(out, older...), newer...)
	slices.Sort(out)
	out = slices.Compact(out)
	return out[:min(len(out), fleet.MaxOpen)]
}

// writeReports writes the queued reports to the watermark topic, one
// record per task, until the queue is closed and empty. It is the report
// producer's only user, and takes its errors whatever it waits for: a
// producer whose errors nobody takes stops taking input.
func (p *Pipeline) writeReports() {
	prod := p.deps.Reports.prod
	for {
		jobs, closed := p.toWrite.take()
		for _, j := range jobs {
			rep := j.rep
			for _, id := range j.tasks {
				rep.Task = int32(id)
				msg := &sarama.ProducerMessage{Topic: p.cfg.WatermarkTopic, Partition: 0,
					Key: sarama.ByteEncoder(rep.AppendKey(nil)), Value: sarama.ByteEncoder(rep.AppendValue(nil))}
				for sent := false; !sent; {
					select {
					case prod.Input() <- msg:
						sent = true
					case err := <-prod.Errors():
						p.reportFailed(err)
					}
				}
			}
		}
		if closed {
			return
		}
		select {
		case <-p.toWrite.ready:
		case err := <-prod.Errors():
			p.reportFailed(err)
		}
	}
}

// reportFailed logs a report the producer could not write, and stops the
// instance when the principal may not write the topic.
func (p *Pipeline) reportFailed(err *sarama.ProducerError) {
	if errors.Is(err.Err, sarama.ErrTopicAuthorizationFailed) {
		p.stop(p.reportsDenied("WRITE", err.Err))
		return
	}
	p.log.Warn("writing a task's watermark report failed; the next report replaces it", "topic", p.cfg.WatermarkTopic, "err", err.Err)
}

// reportsDenied is the error of an ACL missing on the watermark topic:
// without it the fleet's other instances stall on this one's tasks.
func (p *Pipeline) reportsDenied(op string, err error) error {
	return fmt.Errorf("%w: %s on the watermark topic %s=%s: grant this principal READ, WRITE and DESCRIBE_CONFIGS on it (docs/SECURITY.md): %v",
		errNotAuthorized, op, "PHASEGATE_WATERMARK_TOPIC", p.cfg.WatermarkTopic, err)
}

// report is what this instance knows of each of its tasks now: the
// session's own watermark and open phases, for every task it owns (their
// partitions share one session, so the fleet's minimum is the same).
func (p *Pipeline) report(g *generation, now time.Time) fleet.Report {
	m := g.s.Local()
	return fleet.Report{
		Layout: p.deps.Layout.Fingerprint(), Low: m.Phase, LowMs: m.Ms, Idle: m.Idle, High: m.Phase,
		Marked: g.s.Marked(), Open: g.s.DataPhases([]uint64{}, fleet.MaxOpen), Owner: p.cfg.TransactionalID,
		Generation: g.groupGen, AtMs: now.UnixMilli(),
	}
}

// due reports whether rep must be written: it differs from the last one
// queued in its watermark phase, idleness, generation, open phases or
// marked phase (which others forget data phases by, FLEET.md rule F8, and
// which lets a shared partition's writers stream the next phase), or only
// in its time watermark and reportEvery has passed, or reportRefresh has
// passed whatever changed.
func (g *generation) due(rep fleet.Report, now time.Time) bool {
	s := g.sent
	switch {
	case g.sentAt.IsZero(), s.Low != rep.Low, s.Idle != rep.Idle, s.Generation != rep.Generation, !slices.Equal(s.Open, rep.Open),
		s.Marked != rep.Marked, now.Sub(g.sentAt) >= reportRefresh:
		return true
	}
	return s.LowMs != rep.LowMs && now.Sub(g.sentAt) >= reportEvery
}

// TaskStatus is one task of the fleet in Status, as this instance sees it
// on the watermark topic.
type TaskStatus struct {
	Task       int32  `json:"task"`
	Owner      string `json:"owner,omitempty"`
	Mine       bool   `json:"mine"`
	Generation int32  `json:"generation"`
	Low        uint64 `json:"low_watermark_phase"`
	Idle       bool   `json:"idle"`
	Open       int    `json:"open_phases"`
	// Reported is false while no report of the task was read: it holds the
	// global watermark (as does a report from a generation this instance
	// has not reached, Usable false).
	Reported bool      `json:"reported"`
	Usable   bool      `json:"usable"`
	At       time.Time `json:"reported_at,omitzero"`
}

// fleetStatus is every task as the view holds it.
func (p *Pipeline) fleetStatus(g *generation) []TaskStatus {
	states := p.view.Tasks()
	out := make([]TaskStatus, len(states))
	for i, s := range states {
		r := s.Report
		out[i] = TaskStatus{Task: s.Task, Reported: s.Reported, Usable: s.Usable}
		if s.Reported {
			out[i].Owner, out[i].Generation, out[i].Low, out[i].Idle, out[i].Open = r.Owner, r.Generation, r.Low, r.Idle, len(r.Open)
			out[i].At = time.UnixMilli(r.AtMs).UTC()
		}
		out[i].Mine = g != nil && slices.Contains(g.tasks, tasks.ID(s.Task))
	}
	return out
}

// FleetSummary is the fleet's tasks in /phases: how many, which are this
// instance's, how many each instance owns, and the live tasks with the
// lowest watermark (those holding the global watermark back).
type FleetSummary struct {
	Tasks      int            `json:"tasks"`
	Owned      []int32        `json:"owned"`
	PerOwner   map[string]int `json:"tasks_per_owner"`
	Unreported int            `json:"unreported"`
	Lowest     []TaskStatus   `json:"lowest"`
}

// summarizeFleet summarises tasks, listing at most top of the lowest.
func summarizeFleet(tasks []TaskStatus, top int) FleetSummary {
	f := FleetSummary{Tasks: len(tasks), Owned: []int32{}, PerOwner: map[string]int{}, Lowest: []TaskStatus{}}
	var live []TaskStatus
	for _, t := range tasks {
		if t.Mine {
			f.Owned = append(f.Owned, t.Task)
		}
		if !t.Reported {
			f.Unreported++
			continue
		}
		f.PerOwner[t.Owner]++
		if !t.Idle {
			live = append(live, t)
		}
	}
	slices.SortStableFunc(live, func(a, b TaskStatus) int { return cmp.Compare(a.Low, b.Low) })
	f.Lowest = append(f.Lowest, live[:min(top, len(live))]...)
	return f
}
