package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/txn"
)

// commitTimeout bounds one transaction, below the shutdown deadline.
const commitTimeout = 20 * time.Second

// commitReq is a Batch on its way to the broker: the loop hands it to the
// committer goroutine and goes on reading, deduping and buffering records
// (within the memory bound) until the result comes back. A nil b aborts
// the open transaction of a generation that ended (abortOpen).
type commitReq struct {
	g *generation
	b *align.Batch[*sarama.ConsumerMessage]
}

// commitDone is a commitReq's result.
type commitDone struct {
	commitReq
	err error
}

// runCommits is the committer goroutine: the only user of the
// transactional producer. It carries out each request and answers on
// p.done; it returns when p.commits is closed.
func (p *Pipeline) runCommits() {
	for r := range p.commits {
		p.done <- commitDone{commitReq: r, err: p.write(r)}
	}
}

// write carries out one request on the producer: a StreamBatch into the
// open transaction, a CommitBatch committing it, an AbortBatch (or nil)
// aborting it.
func (p *Pipeline) write(r commitReq) error {
	if r.b == nil || r.b.Kind == align.AbortBatch {
		return p.deps.Producer.Abort()
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	tb := p.txnBatch(r.g, r.b)
	if r.b.Kind == align.StreamBatch {
		return p.deps.Producer.Stream(ctx, tb.Records)
	}
	return p.deps.Producer.Commit(ctx, tb)
}

// startCommit hands the session's Batch to the committer. At most one is
// in flight (align builds none until Committed).
func (p *Pipeline) startCommit(g *generation, b *align.Batch[*sarama.ConsumerMessage]) {
	p.inflight = true
	p.commits <- commitReq{g: g, b: b}
}

// abortOpen aborts the open transaction, if any, of a generation that
// ended: left open, it would hold the output's last stable offset back,
// and every read_committed reader with it, until the transaction timeout.
// The next generation's setup waits for it (whenIdle).
func (p *Pipeline) abortOpen() {
	if p.open && !p.inflight {
		p.inflight = true
		p.commits <- commitReq{}
	}
}

// finishCommit takes the committer's result on the loop. When the step
// succeeded, the session is told and the metrics count a commit; when it
// failed and the producer could be repaired (a *txn.Failure), the
// generation is dropped and the next session starts from the committed
// offsets (rewind); any other error (fenced, a record too large) is
// returned and stops the instance. Then the session ends and starts that
// waited for the transaction are served: a task moves only between
// transactions.
func (p *Pipeline) finishCommit(d commitDone) error {
	p.inflight = false
	// After a StreamBatch the transaction stays open; after anything else,
	// or any error, none is.
	p.open = d.err == nil && d.b != nil && d.b.Kind == align.StreamBatch
	var failure *txn.Failure
	switch {
	case d.err == nil:
		if d.b != nil {
			d.g.s.Committed(d.b)
			switch d.b.Kind {
			case align.CommitBatch:
				p.committedBatch(d.b)
			case align.StreamBatch:
				p.metrics.streamed.Add(float64(len(d.b.Writes)))
			}
		}
	case !errors.As(d.err, &failure):
		return d.err
	default:
		p.metrics.rewinds.Inc()
		p.log.Warn("transaction not committed; rewinding to the committed offsets and rebuilding the open phases", "err", d.err)
		if d.g != nil && p.gen == d.g {
			p.dropGeneration()
		}
	}
	for len(p.waiting) > 0 && !p.inflight {
		w := p.waiting[0]
		p.waiting = p.waiting[1:]
		w()
	}
	return nil
}

// awaitCommit waits for the transaction step in flight, if any, and takes
// its result; then it aborts the transaction left open, if any: the
// shutdown lets the step finish rather than abandon it, and leaves no
// transaction holding the output back.
func (p *Pipeline) awaitCommit() error {
	for p.inflight || p.open {
		if !p.inflight {
			p.abortOpen()
		}
		if err := p.finishCommit(<-p.done); err != nil {
			return err
		}
	}
	return nil
}

// whenIdle runs f now, or once the transaction in flight has finished.
func (p *Pipeline) whenIdle(f func()) {
	if !p.inflight {
		f()
		return
	}
	p.waiting = append(p.waiting, f)
}

// txnBatch is b as the producer writes it. It runs on the committer: the
// Batch is not changed while it is in flight.
func (p *Pipeline) txnBatch(g *generation, b *align.Batch[*sarama.ConsumerMessage]) txn.Batch {
	tb := txn.Batch{Records: txn.Records{Len: len(b.Writes), At: func(i int) *sarama.ProducerMessage { return p.message(b, b.Writes[i]) }},
		Offsets: map[string][]*sarama.PartitionOffsetMetadata{}, Group: g.groupMeta}
	for _, o := range b.Offsets {
		tb.Offsets[o.Topic] = append(tb.Offsets[o.Topic], &sarama.PartitionOffsetMetadata{
			Partition: o.Partition, Offset: o.Offset, Metadata: &o.Metadata,
		})
	}
	return tb
}

// committedBatch remembers the committed positions and counts what the
// transaction published.
func (p *Pipeline) committedBatch(b *align.Batch[*sarama.ConsumerMessage]) {
	now := p.now()
	for _, o := range b.Offsets {
		p.committed[o.TP] = align.Start{TP: o.TP, Offset: o.Offset, Metadata: o.Metadata}
	}
	for reason, n := range b.Quarantined {
		p.metrics.quarantined.WithLabelValues(string(reason)).Add(float64(n))
	}
	p.metrics.duplicates.WithLabelValues("record").Add(float64(b.Duplicates.Records))
	p.metrics.duplicates.WithLabelValues("marker").Add(float64(b.Duplicates.Markers))
	p.metrics.recordsOut.Add(float64(b.Records))
	p.metrics.markersOut.Add(float64(b.Markers))
	for _, s := range b.Seals {
		p.metrics.phasesSealed.WithLabelValues(s.By.String()).Inc()
		p.metrics.sealToCommit.Observe(now.Sub(s.Sealed).Seconds())
		for topic, d := range s.Stats.PerTopic {
			p.metrics.phaseDuration.WithLabelValues(topic).Observe(d.Seconds())
		}
		p.metrics.stragglerCV.Set(s.Stats.CV)
		slow, _ := s.Stats.SlowestPartition()
		if s.Stats.Straggling() && p.limiter.allow("straggler", now) {
			p.log.Warn("one branch straggles: phase durations vary across input topics (coefficient of variation above 0.6); the join waits for the slowest",
				"phase", s.Phase, "cv", s.Stats.CV, "slowest_topic", slow.Topic, "slowest_partition", slow.Partition, "slowest_duration", slow.Duration)
		}
		p.record(s, slow)
		p.log.Debug("phase sealed", "phase", s.Phase, "sealed_by", s.By.String(), "records", s.Records,
			"duration", s.Sealed.Sub(s.Opened), "cv", s.Stats.CV)
	}
	if len(b.Seals) > 0 {
		p.lastSeal = now
	}
}

// message is one Write as sarama sends it.
func (p *Pipeline) message(b *align.Batch[*sarama.ConsumerMessage], w align.Write[*sarama.ConsumerMessage]) *sarama.ProducerMessage {
	switch w.Kind {
	case align.MarkerWrite:
		return &sarama.ProducerMessage{
			Topic: p.cfg.OutputTopic, Partition: w.Partition, Timestamp: w.Seal.Sealed,
			Value:   sarama.ByteEncoder(w.Value()),
			Headers: markers.AppendMarkerHeaders(make([]sarama.RecordHeader, 0, 2), w.Phase()),
		}
	case align.Quarantine:
		return p.quarantineMessage(w)
	}
	return p.dataMessage(w, b.Task(w))
}

// dataMessage is the input record as published (MARKERS.md 2): key, value,
// timestamp and headers unchanged but for the headers markers.DataHeaders
// drops, then the ones markers.AppendDataHeaders adds. The message, its
// key and value encoders, its headers and its phasegate.source bytes share
// one allocation (outRecord) unless the input has more than
// outHeaders-markers.MaxAddedHeaders headers or a topic name longer than
// outSource leaves room for.
func (p *Pipeline) dataMessage(w align.Write[*sarama.ConsumerMessage], task []byte) *sarama.ProducerMessage {
	msg := w.Msg
	r := new(outRecord)
	source := markers.AppendSource(r.source[:0], msg.Topic, msg.Partition, msg.Offset)
	headers := r.headers[:0]
	if n := len(msg.Headers) + markers.MaxAddedHeaders; n > len(r.headers) {
		headers = make([]sarama.RecordHeader, 0, n)
	}
	var kept markers.DataHeaders
	for _, h := range msg.Headers {
		if kept.Keep(h.Key) {
			headers = append(headers, *h)
		}
	}
	r.msg = sarama.ProducerMessage{
		Topic: p.cfg.OutputTopic, Partition: w.Partition, Timestamp: msg.Timestamp,
		Key: encoder(&r.key, msg.Key), Value: encoder(&r.value, msg.Value),
		Headers: markers.AppendDataHeaders(headers, kept, w.Phase(), source, task),
	}
	return &r.msg
}

// outRecord is an output data record's parts in one allocation: sarama
// keeps every one of them until the record is acknowledged, and separate
// allocations (9 per record) were a tenth of the sidecar's CPU at 5
// partitions with the collector's share of them (bench partitions,
// BENCH_PROFILE=1).
type outRecord struct {
	msg        sarama.ProducerMessage
	key, value sarama.ByteEncoder
	headers    [outHeaders]sarama.RecordHeader
	source     [outSource]byte
}

const (
	// outHeaders holds an input record's headers and the ones phasegate
	// adds, when the input has at most 2 (576 bytes in all, the size of
	// the 9 allocations it replaces; with 8, 704).
	outHeaders = 6
	// outSource holds topic/partition/offset for a topic name of up to
	// 32 bytes.
	outSource = 32 + 1 + 10 + 1 + 19
)

// encoder returns b as the Encoder sarama sends, held at at (outRecord's,
// so that the interface points into the record's allocation instead of
// boxing a copy); null stays null (a nil Encoder).
func encoder(at *sarama.ByteEncoder, b []byte) sarama.Encoder {
	if b == nil {
		return nil
	}
	*at = b
	return at
}

// quarantineMessage is the record unchanged, with phasegate.reason and
// phasegate.source added (MARKERS.md 5).
func (p *Pipeline) quarantineMessage(w align.Write[*sarama.ConsumerMessage]) *sarama.ProducerMessage {
	msg := w.Msg
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers)+2)
	for _, h := range msg.Headers {
		headers = append(headers, *h)
	}
	headers = markers.AppendQuarantineHeaders(headers, w.Reason, markers.AppendSource(nil, msg.Topic, msg.Partition, msg.Offset))
	return &sarama.ProducerMessage{
		Topic: p.cfg.QuarantineTopic, Partition: w.Partition, Timestamp: msg.Timestamp,
		Key: encoder(new(sarama.ByteEncoder), msg.Key), Value: encoder(new(sarama.ByteEncoder), msg.Value), Headers: headers,
	}
}
