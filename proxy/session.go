package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/internal/topicread"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/tasks"
	"github.com/phasegate/phasegate/watermarks"
)

// setupReq asks the loop to build a generation for a new session.
type setupReq struct {
	session sarama.ConsumerGroupSession
	reply   chan setupReply
}

type setupReply struct {
	gen *generation
	err error
}

// endReq tells the loop that a session ended (after all its claims returned).
type endReq struct {
	gen   int64
	reply chan struct{}
}

// gate is the loop's word to one partition's claim: closed while the
// partition is paused (its records wait in the claim rather than in the
// phase buffer), hot while it holds the watermark back (its records go to
// the loop ahead of every other partition's).
type gate struct {
	closed atomic.Bool
	hot    atomic.Bool
	wake   chan struct{} // capacity 1
	// pending counts the partition's records sent on in or hot and not
	// yet taken by the loop: the claim changes channel only at 0, so that
	// no record overtakes an earlier one of its partition. queued is the
	// claim's queue length.
	pending atomic.Int32
	queued  atomic.Int32
	// switching is set while the claim waits for its records on one
	// channel to be taken before it sends on the other (switchable); the
	// loop wakes it when it takes the last (handle).
	switching atomic.Bool
	// toHot is the generation's count of claims whose partition holds the
	// watermark but whose earlier records still wait on in: the loop reads
	// in while any does, held or not (lanes). waitsHot, the claim's own,
	// says whether it counts itself there.
	toHot    *atomic.Int32
	waitsHot bool
}

// taken counts a record of the gate's partition as taken by the loop,
// and wakes the claim when it waits for the last one (switchable).
func (g *gate) taken() {
	if g.pending.Add(-1) == 0 && g.switching.Load() {
		g.poke()
	}
}

// switchable reports whether the claim may send on the other channel now:
// none of its records waits on the one it used. When some do, it marks the
// gate so that the loop wakes the claim once it has taken the last.
func (g *gate) switchable() bool {
	if g.pending.Load() > 0 {
		g.switching.Store(true)
		if g.pending.Load() > 0 { // else the loop took the last meanwhile
			return false
		}
	}
	g.switching.Store(false)
	return true
}

// waitHot counts the claim in toHot while it waits to send on hot (on),
// and no longer once it does not; the claim calls it.
func (g *gate) waitHot(on bool) {
	if on == g.waitsHot {
		return
	}
	g.waitsHot = on
	if on {
		g.toHot.Add(1)
	} else {
		g.toHot.Add(-1)
	}
}

// delivering reports whether records of the partition are on their way
// to the loop: queued in the claim or on a channel.
func (g *gate) delivering() bool { return g.queued.Load() > 0 || g.pending.Load() > 0 }

// newGate returns an open gate counting in toHot (waitHot).
func newGate(toHot *atomic.Int32) *gate {
	return &gate{wake: make(chan struct{}, 1), toHot: toHot}
}

// set opens or closes the gate; the loop calls it.
func (g *gate) set(closed bool) {
	g.closed.Store(closed)
	g.poke()
}

// setHot marks the partition as holding the watermark, or not.
func (g *gate) setHot(hot bool) {
	g.hot.Store(hot)
	g.poke()
}

// poke wakes the claim so that it acts on a change at once.
func (g *gate) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

var errStopping = errors.New("shutting down")

// handler adapts sarama's ConsumerGroupHandler to the loop. Its methods run
// on sarama's goroutines and only talk to the loop over channels; of a
// generation they read only id, ctx and gates, which never change, and
// count themselves in its toHot (gate.waitHot).
type handler struct {
	p   *Pipeline
	gen atomic.Pointer[generation]
}

func (h *handler) Setup(s sarama.ConsumerGroupSession) error {
	reply := make(chan setupReply, 1)
	h.p.setups <- setupReq{session: s, reply: reply}
	r := <-reply
	if r.err != nil {
		return r.err
	}
	h.gen.Store(r.gen)
	return nil
}

func (h *handler) Cleanup(sarama.ConsumerGroupSession) error {
	g := h.gen.Load()
	if g == nil {
		return nil
	}
	reply := make(chan struct{})
	h.p.ends <- endReq{gen: g.id, reply: reply}
	<-reply
	return nil
}

// ConsumeClaim forwards the claim's records to the loop until the claim or
// the generation ends. It always takes what sarama delivers into its own
// queue, and bounds the queue by pausing the partition's fetches instead:
// sarama's fetcher for a broker waits until every partition of a fetch
// response has been taken before it sends the next fetch, so a claim that
// waited on the loop would stall every partition of its broker, the ones
// holding the watermark included (e2e P1: a holder received nothing for
// 10 s while 511 claims competed for the loop). The queue goes to the loop
// in order while the gate is open, on the hot channel while the partition
// holds the watermark. It sends on a channel only once none of its records
// waits on the other (gate.switchable): a partition that stopped holding
// sends nothing more on hot, and one that began holding has the loop read
// in until its records there are taken (gate.waitHot). The fetches stop
// while the gate is closed or the queue holds two fetches' worth
// (FetchBytes), and start again below one: what was in flight still
// arrives and is queued. A smaller bound
// costs throughput: with every partition of a broker paused, sarama
// sleeps 100 ms before it looks again (256 records per claim ran make
// bench's 5 partitions at 0.6-0.8x).
func (h *handler) ConsumeClaim(_ sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	g := h.gen.Load()
	tp := align.TP{Topic: claim.Topic(), Partition: claim.Partition()}
	gate := g.gates[tp]
	if gate == nil {
		gate = newGate(new(atomic.Int32)) // a claim outside the generation's partitions: never closed
	}
	defer gate.waitHot(false)
	var queue fifo   // the records sarama delivered, not yet sent on
	var queued int64 // the queue's bytes
	limit := h.p.fetchSize
	fetching := true // the session starts with every partition resumed
	lane := h.p.in
	for {
		closed := gate.closed.Load()
		if want := !closed && (queued < limit || fetching && queued < 2*limit); want != fetching {
			fetching = want
			h.p.fetch(tp, want)
		}
		want := h.p.in
		if gate.hot.Load() {
			want = h.p.hot
		}
		if lane != want && gate.switchable() {
			lane = want
		}
		gate.waitHot(lane != want && want == h.p.hot)
		var out chan<- delivery // nil (never ready) unless queued records may go
		var next delivery
		if !closed && queue.len() > 0 && lane == want {
			out, next = lane, queue.front()
		}
		select {
		case msg, ok := <-claim.Messages():
			// Then what else sarama has ready, while the fetch decision
			// above stands, without a select over every channel per record.
			for ok {
				d := delivery{gen: g.id, msg: msg, gate: gate, size: detach(msg)}
				queue.push(d)
				queued += d.size
				if queued >= limit {
					break
				}
				select {
				case msg, ok = <-claim.Messages():
					continue
				default:
				}
				break
			}
			if !ok {
				return nil // queued records are read again by the next session
			}
			gate.queued.Store(int32(queue.len()))
		case out <- next:
			// Then more while the loop takes them at once and the gate
			// still wants this lane (checked per record, as above).
			for sent := true; sent; {
				gate.pending.Add(1)
				queued -= queue.pop().size
				sent = false
				if queue.len() > 0 && !gate.closed.Load() && gate.hot.Load() == (lane == h.p.hot) {
					select {
					case out <- queue.front():
						sent = true
					default:
					}
				}
			}
			gate.queued.Store(int32(queue.len()))
		case <-gate.wake:
		case <-g.ctx.Done():
			return nil
		}
	}
}

// fifo is a claim's queue. It reuses its array from the start whenever
// it empties, which a claim's queue does whenever the loop keeps up, and
// moves what is left to the front before it grows: popping by reslicing
// made each claim allocate a new array every few fetches (6 % of the
// bytes the sidecar allocated at 5 partitions, bench partitions).
type fifo struct {
	q    []delivery
	head int
}

func (f *fifo) len() int        { return len(f.q) - f.head }
func (f *fifo) front() delivery { return f.q[f.head] }

func (f *fifo) push(d delivery) {
	if len(f.q) == cap(f.q) && f.head > 0 {
		n := copy(f.q, f.q[f.head:])
		clear(f.q[n:])
		f.q, f.head = f.q[:n], 0
	}
	f.q = append(f.q, d)
}

func (f *fifo) pop() delivery {
	d := f.q[f.head]
	f.q[f.head] = delivery{} // the record is the loop's now
	if f.head++; f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
	}
	return d
}

// detach copies a record's key, value and header bytes into one buffer of
// their own and points the message at it, and returns their size
// (messageBytes). sarama's slices point into the whole fetch response, which
// one record held in the buffer would keep alive, every partition's bytes
// of that response with it. At 2,048 partitions a heap profile held 137 MB
// of responses beside 91 MB of parsed records; with the copies the heap
// live after a collection peaked at 370 MB instead of 408 MB, and the
// collector, held to the soft memory limit, took 10-11 % of the CPU instead
// of 12-13 % (README, Performance). Empty and null stay apart.
func detach(m *sarama.ConsumerMessage) int64 {
	n := messageBytes(m)
	buf := make([]byte, 0, n)
	own := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	m.Key, m.Value = own(m.Key), own(m.Value)
	for _, h := range m.Headers {
		h.Key, h.Value = own(h.Key), own(h.Value)
	}
	return n
}

// messageBytes is a record's key, value and headers.
func messageBytes(m *sarama.ConsumerMessage) int64 {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// fetch pauses or resumes sarama's fetches of one partition.
func (p *Pipeline) fetch(tp align.TP, on bool) {
	parts := map[string][]int32{tp.Topic: {tp.Partition}}
	if on {
		p.deps.Group.Resume(parts)
	} else {
		p.deps.Group.Pause(parts)
	}
}

// setup builds the generation of a new session from the committed offsets
// (and their metadata) of its claims.
func (p *Pipeline) setup(r setupReq) {
	if p.stopping.Load() {
		r.reply <- setupReply{err: errStopping}
		return
	}
	g, err := p.newGeneration(r.session)
	if se := (*tasks.SettingsError)(nil); err != nil && !errors.As(err, &se) {
		p.log.Warn("cannot start the consumer session; retrying", "err", err)
	}
	r.reply <- setupReply{gen: g, err: err}
}

func (p *Pipeline) newGeneration(cs sarama.ConsumerGroupSession) (*generation, error) {
	claims := cs.Claims()
	owned, err := p.ownedTasks(claims)
	if err != nil {
		return nil, err
	}
	starts, err := p.starts(claims)
	if err != nil {
		return nil, err
	}
	cfg := p.alignConfig()
	for _, id := range owned {
		var inputs []align.TP
		for _, k := range p.deps.Layout.Partitions(id) {
			inputs = append(inputs, align.TP{Topic: k.Topic, Partition: k.Partition})
		}
		for _, o := range p.deps.Layout.Outputs(id) {
			task, writers, _ := p.deps.Layout.MarkerFields(id, o)
			cfg.Outputs = append(cfg.Outputs, align.Output{Partition: o, Task: task, Writers: writers, Inputs: inputs})
		}
	}
	if cfg.Outputs == nil {
		cfg.Outputs = []align.Output{} // no task: no marker (nil would mean every output)
	}
	s, err := align.New[*sarama.ConsumerMessage](cfg, starts)
	if err != nil {
		return nil, err
	}
	for _, k := range s.Foreign() {
		p.log.Warn("committed offset carries no phasegate metadata; this partition starts without replay protection",
			"topic", k.Topic, "partition", k.Partition)
	}
	// F3: nothing seals before the fleet's cap is known. share sets it at
	// the end of the first Step; until then the session is capped by the
	// global watermark the view last computed (0 before any).
	global, globalMs, _ := p.view.Global()
	s.Floor(watermarks.Mark{Phase: global, Ms: globalMs}, true)
	p.genSeq++
	ctx, cancel := context.WithCancel(cs.Context())
	g := &generation{
		id: p.genSeq, groupGen: cs.GenerationID(), tasks: owned, ctx: ctx, cancel: cancel, s: s, gates: map[align.TP]*gate{},
		groupMeta: sarama.NewConsumerGroupMetadataFromSession(cs, p.cfg.GroupID, nil), held: -1,
	}
	for _, st := range starts {
		// The claim starts here: what this process committed last may be
		// newer than what the group's offset fetch returned.
		cs.MarkOffset(st.Topic, st.Partition, st.Offset, st.Metadata)
	}
	assigned := s.Partitions()
	for _, k := range assigned {
		g.gates[k] = newGate(&g.toHot)
		p.metrics.initPartition(k)
	}
	p.view.SetGeneration(g.groupGen)
	p.deps.Group.ResumeAll()
	p.assigned.Store(&assigned)
	select {
	case p.lagNow <- struct{}{}:
	default:
	}
	p.gen = g
	p.metrics.rebalances.Inc()
	p.metrics.tasksOwned.Set(float64(len(owned)))
	p.log.Info("tasks assigned", "generation", g.groupGen, "member", cs.MemberID(), "tasks", owned,
		"of", p.deps.Layout.Len(), "gained", diffTasks(owned, p.owned), "lost", diffTasks(p.owned, owned),
		"partitions", len(assigned), "global_watermark", s.Global())
	p.owned = owned
	return g, nil
}

// ownedTasks returns the tasks of this session's claims: whole tasks of
// this instance's layout, or an error that names the cause.
func (p *Pipeline) ownedTasks(claims map[string][]int32) ([]tasks.ID, error) {
	a, err := p.deps.Strategy.Assigned()
	if se := (*tasks.SettingsError)(nil); errors.As(err, &se) {
		return nil, fmt.Errorf("consumer group %s: %w", p.cfg.GroupID, err)
	}
	if err != nil {
		return nil, fmt.Errorf("the group's assignment cannot be used: %w (every member of group %s must run this version of phasegate with the same settings)", err, p.cfg.GroupID)
	}
	owned, err := p.deps.Layout.TasksOf(claims)
	if err != nil {
		return nil, fmt.Errorf("the group's assignment: %w (every member of group %s must run phasegate's %s assignment)", err, p.cfg.GroupID, tasks.StrategyName)
	}
	if !slices.Equal(owned, a.Tasks) {
		return nil, fmt.Errorf("the group assigned the partitions of tasks %v but the assignment names tasks %v", owned, a.Tasks)
	}
	if len(owned) == 0 {
		p.log.Info("standby: the other phasegate instances in the group own every task", "group", p.cfg.GroupID, "tasks", p.deps.Layout.Len())
	}
	return owned, nil
}

// diffTasks returns the tasks of a not in b.
func diffTasks(a, b []tasks.ID) []tasks.ID {
	out := []tasks.ID{}
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// starts reads where each claimed partition starts: the committed offset
// and metadata (or what this process committed last, when newer), else the
// earliest offset.
func (p *Pipeline) starts(claims map[string][]int32) ([]align.Start, error) {
	fetched, err := p.deps.Admin.ListConsumerGroupOffsets(p.cfg.GroupID, claims)
	if err != nil {
		return nil, fmt.Errorf("fetch committed offsets: %w", err)
	}
	var starts []align.Start
	for topic, ids := range claims {
		var fresh []int32 // nothing committed: they start at the log's first offset
		for _, id := range ids {
			st := align.Start{TP: align.TP{Topic: topic, Partition: id}, Offset: -1}
			if b := fetched.GetBlock(topic, id); b != nil {
				st.Offset, st.Metadata = b.Offset, b.Metadata
			}
			st = latest(st, p.committed[st.TP])
			if st.Offset < 0 {
				fresh = append(fresh, id)
				continue
			}
			starts = append(starts, st)
		}
		if len(fresh) == 0 {
			continue
		}
		// One ListOffsets per leader, not one per partition: 512 fresh
		// partitions took 1.6 s of the first session's start one by one.
		oldest, err := topicread.Offsets(p.deps.Client, topic, fresh, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("earliest offsets of %s: %w", topic, err)
		}
		for _, id := range fresh {
			starts = append(starts, align.Start{TP: align.TP{Topic: topic, Partition: id}, Offset: oldest[id]})
		}
	}
	return starts, nil
}

// latest is where a partition starts: the group's commit, or what this
// process committed last (mem, zero when it committed nothing) when that
// is newer (align.Start.Newer). The group's offset fetch can be older than
// this process's last commit (sarama never sets RequireStable), and mem
// can be older than the group's: when the task moved away and came back,
// its other owner may have sealed more phases from the same offset.
func latest(group, mem align.Start) align.Start {
	if mem.Topic != "" && mem.Newer(group) {
		return mem
	}
	return group
}

// markEvery bounds how long a writer goes without marking the sealed
// global watermark (watermarks.Config.MarkEvery): F7 names the phases with
// data elsewhere at once; this is what a reader waits at most when it did
// not (a report lost, compacted away, or past fleet.MaxOpen).
const markEvery = time.Second

func (p *Pipeline) alignConfig() align.Config {
	w := p.cfg.Watermarks
	w.MarkEvery = markEvery
	return align.Config{
		InputTopics: p.cfg.InputTopics, OutputPartitions: p.outParts, QuarantinePartitions: p.quarParts,
		Emitter: p.cfg.TransactionalID, Routing: p.cfg.Routing, Watermarks: w,
		Dedupe: p.cfg.Dedupe, QuarantineDelay: p.cfg.QuarantineDelay, BatchBytes: batchBytes,
		StreamFor: p.streamFor,
	}
}

// streamFor is how long the oldest open phase may stream into the open
// transaction before it falls back (align Config.StreamFor): a quarter of
// the transaction timeout, which leaves the rest for its commit (a first
// commit on fresh partitions took up to 19.7 s: README, "Performance");
// 0, never stream, when a live phase would not seal within it (its length
// and the out-of-orderness bound), so that it does not fall back every
// time.
func streamFor(transactionTimeout time.Duration, w watermarks.Config) time.Duration {
	d := transactionTimeout / 4
	if w.PhaseLength+w.MaxOutOfOrderness >= d {
		return 0
	}
	return d
}

// end drops the generation of a session that ended.
func (p *Pipeline) end(r endReq) {
	if p.gen != nil && p.gen.id == r.gen {
		p.log.Info("partitions revoked; open phases will be read again by their next owner", "generation", r.gen)
		p.dropGeneration()
	}
	close(r.reply)
}

// handle hands one record to the session and turns its outcome into
// metrics and logs.
func (p *Pipeline) handle(d delivery) {
	d.gate.taken()
	g := p.gen
	if g == nil || d.gen != g.id {
		return // a record of a session that has ended
	}
	p.unstepped += d.size + align.RecordOverhead
	msg := d.msg
	r := &align.Record[*sarama.ConsumerMessage]{
		Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset, TimestampMs: msg.Timestamp.UnixMilli(),
		Key: msg.Key, Value: msg.Value, Size: int(d.size), Msg: msg,
	}
	for _, h := range msg.Headers {
		if r.MetaErr == nil {
			r.MetaErr = r.Meta.Observe(h.Key, h.Value)
		}
	}
	if r.MetaErr == nil {
		r.MetaErr = r.Meta.Check()
	}
	out := g.s.Handle(r)
	if out.Passed {
		d.gate.setHot(false) // its next records wait their turn (lanes)
	}
	if out.Kind == align.Ignored {
		return
	}
	if !out.Replay {
		p.metrics.recordIn(msg.Topic)
	}
	if out.DedupeFull {
		p.metrics.dedupeFull.Inc()
		if p.limiter.allow("dedupe-full", p.now()) {
			p.log.Warn("dedupe cache over PHASEGATE_DEDUPE_IDS with only open phases left: partitions ahead of the global watermark are paused until phases seal; raise PHASEGATE_DEDUPE_IDS or lower PHASEGATE_MAX_BUFFER_BYTES")
		}
	}
	if out.Kind == align.Quarantined && p.limiter.allow(string(out.Reason)+"/"+msg.Topic, p.now()) {
		p.log.Warn("record quarantined", "reason", out.Reason, "topic", msg.Topic, "partition", msg.Partition,
			"offset", msg.Offset, "why", out.Why, "todo", reasonAdvice[out.Reason])
	}
}

// reasonAdvice tells the operator what to do about each quarantine reason.
var reasonAdvice = map[markers.Reason]string{
	markers.ReasonLate:          "records arrive after their phase was sealed: raise PHASEGATE_MAX_OUT_OF_ORDERNESS or PHASEGATE_IDLE_TIMEOUT, or check the producer's clock",
	markers.ReasonMalformed:     "fix the producer: phase headers are 1-20 decimal digits, markers need a JSON value with v, phase and partition",
	markers.ReasonStaleMarker:   "the producer sent a marker for a phase below one it already marked on this partition",
	markers.ReasonCountMismatch: "the producer's marker count differs from the records read: records were lost or duplicated upstream",
}
