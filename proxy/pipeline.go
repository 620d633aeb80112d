package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/fleet"
	"github.com/phasegate/phasegate/tasks"
	"github.com/phasegate/phasegate/txn"
	"github.com/phasegate/phasegate/watermarks"
)

// Deps are the Kafka clients a Pipeline drives. Dial builds them; tests may
// build their own.
type Deps struct {
	Client   sarama.Client        // metadata, offsets and lag of the inputs
	Admin    sarama.ClusterAdmin  // committed offsets and their metadata
	Group    sarama.ConsumerGroup // membership, assignment, fetching
	Producer *txn.Producer
	Logger   *slog.Logger
	Metrics  *Metrics
	// Layout is the topology's task layout; Strategy, the group's
	// assignment strategy, assigns its tasks.
	Layout   *tasks.Layout
	Strategy *tasks.Strategy
	// Reports reads and writes the watermark topic.
	Reports *reportIO
}

// session is the alignment state of one consumer group session.
type session = align.Session[*sarama.ConsumerMessage]

// Pipeline is one phasegate instance's data path. Run drives it; Status and
// Ready are safe for concurrent use.
type Pipeline struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time

	outParts, quarParts int32
	// fetchSize is what a fetch asks of each partition (FetchBytes, as
	// Dial sets it in the group's configuration); a claim queues up to
	// twice it.
	fetchSize int64
	// streamFor is align.Config.StreamFor, from the producer's
	// transaction timeout (streamFor).
	streamFor time.Duration

	// Channels from the consumer group's goroutines to the loop; hot
	// carries the records of the partitions holding the watermark, which
	// the loop takes first.
	in, hot chan delivery
	setups  chan setupReq
	ends    chan endReq
	lags    chan lagReport
	lagNow  chan struct{} // capacity 1: measure the lag now (pollLag)
	// fatal carries an error of a helper goroutine that stops the
	// instance (an ACL missing on the watermark topic); capacity 1.
	fatal   chan error
	reports chan fleetRecord
	// toWrite carries the owned tasks' reports to writeReports.
	toWrite *reportQueue
	// commits carries a Batch to the committer goroutine, done its result.
	commits chan commitReq
	done    chan commitDone

	status   atomic.Pointer[Status]
	stopping atomic.Bool
	assigned atomic.Pointer[[]align.TP] // read by the lag poller

	// The fields below are owned by the loop goroutine.
	gen    *generation
	genSeq int64
	// inflight is true while the committer writes a Batch; waiting are the
	// session ends and starts held until it has finished.
	inflight bool
	// open is true while a transaction holds streamed records: the last
	// result was a StreamBatch's.
	open       bool
	waiting    []func()
	view       *fleet.View // every task's latest report (docs/FLEET.md)
	owned      []tasks.ID  // the tasks of the last generation, for the move logs
	committed  map[align.TP]align.Start
	history    []SealStatus
	lastStatus time.Time
	lastSeal   time.Time
	// peakBuffered is the most bytes buffered at once since the start.
	peakBuffered int64
	// unstepped weighs the records handled since step last ran (as the
	// buffer weighs them).
	unstepped   int64
	limiter     logLimiter
	transitions transitions

	// closers run last in Run, after the group and the producer.
	closers []func() error
}

// generation is one consumer group session on the loop: the tasks it owns,
// their alignment state (one session over all their partitions) and what
// the claims of that session need.
type generation struct {
	id        int64
	groupGen  int32
	tasks     []tasks.ID
	ctx       context.Context
	cancel    context.CancelFunc
	groupMeta *sarama.ConsumerGroupMetadata
	s         *session
	gates     map[align.TP]*gate // read-only after setup
	// toHot counts the claims waiting for their records on in to be taken
	// before they send on hot (gate.waitHot).
	toHot atomic.Int32

	// sent is the last report queued for the tasks, at sentAt; floor the
	// fleet's global watermark the session is capped by (share), held the
	// lowest task without a usable report (-1: none).
	sent     fleet.Report
	sentAt   time.Time
	floor    watermarks.Mark
	floorSet bool
	held     int32
}

// delivery is one record forwarded by a claim, tagged with its generation.
type delivery struct {
	gen  int64
	msg  *sarama.ConsumerMessage
	gate *gate // the claim's, to count the record taken (gate.pending)
	size int64 // key, value and headers (messageBytes)
}

// New checks the output and quarantine topics and returns a pipeline ready
// to Run.
func New(cfg Config, d Deps) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	out, err := d.Client.Partitions(cfg.OutputTopic)
	if err != nil {
		return nil, fmt.Errorf("output topic %s: %w (create it before starting phasegate)", cfg.OutputTopic, err)
	}
	quar, err := d.Client.Partitions(cfg.QuarantineTopic)
	if err != nil {
		return nil, fmt.Errorf("quarantine topic %s: %w", cfg.QuarantineTopic, err)
	}
	p := &Pipeline{
		cfg: cfg, deps: d, log: d.Logger, metrics: d.Metrics, now: cfg.Watermarks.Now,
		outParts:  int32(len(out)),
		fetchSize: FetchBytes(cfg.Watermarks.MaxBufferBytes, d.Layout.InputPartitions()),
		streamFor: streamFor(d.Producer.Timeout(), cfg.Watermarks),
		quarParts: int32(len(quar)),
		in:        make(chan delivery, inCapacity),
		hot:       make(chan delivery, inCapacity),
		setups:    make(chan setupReq),
		ends:      make(chan endReq),
		lags:      make(chan lagReport),
		lagNow:    make(chan struct{}, 1),
		fatal:     make(chan error, 1),
		reports:   make(chan fleetRecord),
		toWrite:   newReportQueue(),
		commits:   make(chan commitReq, 1),
		done:      make(chan commitDone, 1),
		view:      fleet.NewView(d.Layout.Len(), d.Layout.Fingerprint()),
		committed: map[align.TP]align.Start{},
		limiter:   logLimiter{every: 10 * time.Second, last: map[string]time.Time{}},
	}
	p.status.Store(&Status{})
	return p, nil
}

// Run consumes until ctx ends or a fatal error (fencing, a lost group). On
// ctx's end it shuts down in order: stop consuming (Ready fails from then
// on), let the transaction in flight finish and the queued reports be
// written, leave the group, close the producer. Records of open phases are
// not committed: the next owner reads them again from the committed
// offsets. Run returns nil after a requested shutdown.
func (p *Pipeline) Run(ctx context.Context) error {
	consumeCtx, stopConsume := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	consumeErr := make(chan error, 1)
	consumeDone := make(chan struct{})
	wg.Go(func() {
		defer close(consumeDone)
		consumeErr <- p.consume(consumeCtx)
	})
	wg.Go(func() { p.pollLag(consumeCtx) })
	wg.Go(func() { p.readReports(consumeCtx) })
	commitsDone := make(chan struct{})
	go func() { defer close(commitsDone); p.runCommits() }()
	reportsDone := make(chan struct{})
	go func() { defer close(reportsDone); p.writeReports() }()

	err := p.loop(ctx, consumeDone)
	p.transitions.flush(p.log, p.now(), true)
	p.stopping.Store(true)
	p.toWrite.close() // writeReports writes what is queued, then returns
	if cerr := p.awaitCommit(); cerr != nil && err == nil {
		err = cerr
	}
	close(p.commits)
	<-commitsDone
	<-reportsDone
	stopConsume()
	p.drain(consumeDone)
	wg.Wait()
	if cerr := <-consumeErr; cerr != nil && (err == nil || errors.Is(err, errGroupStopped)) {
		err = cerr // why the group stopped
	}
	if cerr := p.deps.Group.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("leave group: %w", cerr)
	}
	var refused *tasks.SettingsError
	if p.cfg.InstanceID != "" && (ctx.Err() != nil || errors.As(err, &refused)) && !errors.Is(err, errFencedInstance) {
		// A static member does not leave the group when it closes (KIP-345),
		// so that a restart gets its partitions back at once. A requested
		// shutdown leaves explicitly, so that a standby takes over now rather
		// than after the session timeout, and so does a member the group
		// refused for its settings: the group rebalances without it at once.
		if _, lerr := p.deps.Admin.RemoveMemberFromConsumerGroup(p.cfg.GroupID, []string{p.cfg.InstanceID}); lerr != nil {
			p.log.Warn("could not leave the consumer group; another instance takes over after the session timeout", "err", lerr)
		}
	}
	if cerr := p.deps.Producer.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close producer: %w", cerr)
	}
	for _, c := range p.closers {
		_ = c()
	}
	return err
}

// errGroupStopped means the consumer group goroutine ended by itself.
var errGroupStopped = errors.New("the consumer group stopped; see the log lines before this one")

// errNotAuthorized means the principal lacks an ACL phasegate needs
// (docs/SECURITY.md): every retry would fail the same way, so the instance
// stops and says which.
var errNotAuthorized = errors.New("not authorized")

// errFencedInstance means the group coordinator refused this static
// member: another process joined with the same name, or the coordinator
// no longer knows this member's ID. Either way the instance stops; a
// restart joins afresh (and, if two processes share the name, fixing the
// configuration is the way out).
var errFencedInstance = errors.New("fenced as a static member of the consumer group: another process joined with the same name, or the coordinator no longer knows this member (exiting; a restart joins afresh)")

// consume keeps the instance in the consumer group until ctx ends. Each
// Consume call is one session; a session ends on a rebalance or a rewind.
func (p *Pipeline) consume(ctx context.Context) error {
	h := &handler{p: p}
	for {
		err := p.deps.Group.Consume(ctx, p.cfg.InputTopics, h)
		if ctx.Err() != nil || errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return nil
		}
		if errors.Is(err, sarama.ErrFencedInstancedId) {
			return fmt.Errorf("%w: %s=%s (%v)", errFencedInstance, "PHASEGATE_INSTANCE_ID", p.cfg.InstanceID, err)
		}
		if se := (*tasks.SettingsError)(nil); errors.As(err, &se) {
			return err // a group that runs with other settings: this instance stops, the group goes on
		}
		if errors.Is(err, sarama.ErrGroupAuthorizationFailed) {
			return fmt.Errorf("%w: %s=%s: grant this principal READ on the group (docs/SECURITY.md): %v", errNotAuthorized, "PHASEGATE_GROUP_ID", p.cfg.GroupID, err)
		}
		if err != nil {
			p.log.Warn("consumer group session failed; rejoining", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// stop hands an error that stops the instance to the loop (the first one
// wins); any goroutine may call it.
func (p *Pipeline) stop(err error) {
	select {
	case p.fatal <- err:
	default:
	}
}

// loop is the pipeline goroutine: it owns every piece of hot state.
func (p *Pipeline) loop(ctx context.Context, consumeDone <-chan struct{}) error {
	tick := time.NewTicker(p.cfg.Tick)
	defer tick.Stop()
	later := time.NewTimer(time.Hour) // a Step put off (stepGap)
	later.Stop()
	defer later.Stop()
	var stepped time.Time // when step last ran
	for {
		in, hot := p.lanes()
		soon := false // a Step may wait for the gap
		select {
		case <-ctx.Done():
			return nil
		case <-consumeDone:
			return errGroupStopped
		case err := <-p.fatal:
			return err
		case d := <-hot:
			p.handle(d)
			p.drainIn()
			soon = true
		case d := <-in:
			p.handle(d)
			p.drainIn()
			soon = true
		case r := <-p.setups:
			p.whenIdle(func() { p.setup(r) })
		case r := <-p.ends:
			p.whenIdle(func() { p.end(r) })
		case d := <-p.done:
			if err := p.finishCommit(d); err != nil {
				return err
			}
		case r := <-p.lags:
			p.lag(r)
		case r := <-p.reports:
			p.applyReport(r)
			soon = true
		case <-later.C:
		case <-tick.C:
		}
		if wait := stepGap - time.Since(stepped); soon && wait > 0 && !p.stepDue() {
			later.Reset(wait)
			continue
		}
		later.Stop()
		stepped, p.unstepped = time.Now(), 0
		p.step()
	}
}

// stepGap is the least time between two Steps that records or watermark
// reports bring about: a Step costs O(partitions), and the loop, faster
// than the claims, took the records 4.5 at a time at 512 partitions, and
// each report it reads back (one per owned task) alone: 111,000 Steps for
// 500,000 records. A Step put off runs once the gap has passed, or as soon
// as the records handled since weigh a 64th of PHASEGATE_MAX_BUFFER_BYTES,
// so seals and pauses come at most that late.
const stepGap = time.Millisecond

// stepDue reports whether the records handled since the last Step weigh a
// 64th of PHASEGATE_MAX_BUFFER_BYTES: the most that seals and pause
// decisions may wait for (the loop steps at once, drainIn stops).
func (p *Pipeline) stepDue() bool {
	return p.unstepped >= p.cfg.Watermarks.MaxBufferBytes/64
}

// inCapacity bounds the records between the claims and the loop, on each
// of in and hot: with the gates of paused partitions closed, at most this
// many records of a paused partition can still reach the buffer.
const inCapacity = 64

// batch is how many waiting records the loop handles before it evaluates
// seals and backpressure again.
const batch = 256

// drainIn handles the records already waiting, up to a batch, those of the
// partitions holding the watermark first, so Step runs once per batch
// rather than once per record. It stops early once a Step is due
// (stepDue), so no pause decision is late by more than that.
func (p *Pipeline) drainIn() {
	for range batch {
		if p.stepDue() {
			return
		}
		in, hot := p.lanes()
		select {
		case d := <-hot:
			p.handle(d)
			continue
		default:
		}
		select {
		case d := <-in:
			p.handle(d)
		default:
			return
		}
	}
}

// batchBytes bounds the sealed phases one transaction takes (align
// Config.BatchBytes; at least one phase): what seals while a commit is in
// flight waits for the next, so no transaction outlives
// PHASEGATE_TRANSACTION_TIMEOUT however long the one before took (e2e P1
// was fenced that way once, when each transaction took everything sealed
// during the last). 16 MiB: 4 MiB ran the 100 ms phases of make bench at
// 0.59x (20 transactions instead of 8: a transaction has a fixed cost).
const batchBytes = 16 << 20

// lanes returns the channels the loop takes records from now; a nil one
// is held (held).
func (p *Pipeline) lanes() (in, hot <-chan delivery) {
	g := p.gen
	if g == nil {
		return p.in, p.hot
	}
	holdIn, holdHot := held(p.inflight, g.s.BufferedBytes(), g.s.Waiting(), p.cfg.Watermarks.MaxBufferBytes, g.toHot.Load() > 0)
	if !holdIn {
		in = p.in
	}
	if !holdHot {
		hot = p.hot
	}
	return in, hot
}

// held decides which channels the loop holds. Nothing is held while no
// transaction step is in flight: what is buffered then goes into the
// next. While one is:
//
//   - the in channel is held once the buffer holds the whole bound, or the
//     sealed phases waiting for the next transaction half of it; the
//     tracker pauses the partitions running ahead, and what they sent
//     before their pause waits on the channel. But a partition that
//     begins holding while records of it wait there sends on hot only
//     after them (gate.switchable), so in is read while such a partition
//     waits (toHot; the loop sees the count at its next event, a tick at
//     the latest): held, it waited for the whole transaction step (e2e
//     P1: 1.7 s with its claim's records queued, in full and held, hot
//     empty). What in gives past the bound then is what the channel holds
//     (inCapacity), and what the loop takes before the claim sees its
//     last record taken;
//   - the hot channel (the partitions holding the watermark, which the
//     tracker never pauses and the next seal waits for) is held only
//     once the buffer holds the whole bound and a sealed phase waits for
//     the transaction after the one in flight. Until then the holders are
//     read: holding them too starved them for whole transaction steps at
//     the bound (e2e P1: 2.1 s), and a streamed phase that could not seal
//     fell back. Each holder leaves the hot channel with the record that
//     takes it past the watermark (align Outcome.Passed), so past the
//     bound the buffer gains the holders' records of one phase, and not
//     at all once it is sealed.
func held(inflight bool, buffered, waiting, bound int64, toHot bool) (holdIn, holdHot bool) {
	if !inflight {
		return false, false
	}
	full := buffered >= bound
	return (full || 2*waiting >= bound) && !toHot, full && waiting > 0
}

// drain answers session requests and drops records until the consumer
// group goroutine has exited.
func (p *Pipeline) drain(consumeDone <-chan struct{}) {
	p.dropGeneration()
	for _, w := range p.waiting {
		w() // stopping: a setup is refused, an end answered
	}
	p.waiting = nil
	for {
		select {
		case <-consumeDone:
			return
		case <-p.in:
		case <-p.hot:
		case r := <-p.setups:
			r.reply <- setupReply{err: errStopping}
		case r := <-p.ends:
			close(r.reply)
		case <-p.lags:
		case <-p.reports:
		}
	}
}

// dropGeneration ends the current session's state: its claims stop, and
// the next session starts from the committed offsets.
func (p *Pipeline) dropGeneration() {
	if p.gen != nil {
		p.gen.cancel()
		p.gen = nil
	}
	p.abortOpen()
}

// Ready reports whether the instance is in the group and its phases are
// advancing or its partitions idle: what /readyz serves.
func (p *Pipeline) Ready() bool {
	return !p.stopping.Load() && p.status.Load().Ready
}

// Status returns the latest published status (refreshed a few times a
// second by the loop).
func (p *Pipeline) Status() *Status { return p.status.Load() }

// logLimiter lets one warning per key through per interval.
type logLimiter struct {
	every time.Duration
	last  map[string]time.Time
}

func (l *logLimiter) allow(key string, now time.Time) bool {
	if now.Sub(l.last[key]) < l.every {
		return false
	}
	l.last[key] = now
	return true
}
