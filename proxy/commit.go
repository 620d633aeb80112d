package proxy

import (
	"bytes"
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
// (within the memory bound) until the result comes back.
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
// transactional producer. It writes each Batch in one transaction and
// answers on p.done; it returns when p.commits is closed.
func (p *Pipeline) runCommits() {
	for r := range p.commits {
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		err := p.deps.Producer.Commit(ctx, p.txnBatch(r.g, r.b))
		cancel()
		p.done <- commitDone{commitReq: r, err: err}
	}
}

// startCommit hands the session's Batch to the committer. At most one is
// in flight (align builds none until Committed).
func (p *Pipeline) startCommit(g *generation, b *align.Batch[*sarama.ConsumerMessage]) {
	p.inflight = true
	p.commits <- commitReq{g: g, b: b}
}

// finishCommit takes the committer's result on the loop. When the
// transaction committed, the session is told and the metrics count it;
// when it failed and the producer could be repaired (a *txn.Failure), the
// generation is dropped and the next session starts from the committed
// offsets (rewind); any other error (fenced, a record too large) is
// returned and stops the instance. Then the session ends and starts that
// waited for the transaction are served: a task moves only between
// transactions.
func (p *Pipeline) finishCommit(d commitDone) error {
	p.inflight = false
	var failure *txn.Failure
	switch {
	case d.err == nil:
		d.g.s.Committed(d.b)
		p.committedBatch(d.b)
	case !errors.As(d.err, &failure):
		return d.err
	default:
		p.metrics.rewinds.Inc()
		p.log.Warn("transaction not committed; rewinding to the committed offsets and rebuilding the open phases", "err", d.err)
		if p.gen == d.g {
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

// awaitCommit waits for the transaction in flight, if any, and takes its
// result: the shutdown lets it finish rather than abandon it.
func (p *Pipeline) awaitCommit() error {
	if !p.inflight {
		return nil
	}
	return p.finishCommit(<-p.done)
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
	tb := txn.Batch{Records: make([]*sarama.ProducerMessage, len(b.Writes)),
		Offsets: map[string][]*sarama.PartitionOffsetMetadata{}, Group: g.groupMeta}
	for i, w := range b.Writes {
		tb.Records[i] = p.message(b, w)
	}
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
			Value: sarama.ByteEncoder(w.Value()),
			Headers: []sarama.RecordHeader{
				{Key: []byte(markers.HeaderMarker), Value: []byte("1")},
				{Key: []byte(markers.HeaderPhase), Value: w.Phase()},
			},
		}
	case align.Quarantine:
		return p.quarantineMessage(w)
	}
	return p.dataMessage(w, b.Task(w))
}

// dataMessage is the input record as published (MARKERS.md 2): key, value,
// timestamp and headers unchanged, with phasegate.phase and phasegate.id
// added when absent and phasegate.source added.
func (p *Pipeline) dataMessage(w align.Write[*sarama.ConsumerMessage], task []byte) *sarama.ProducerMessage {
	msg := w.Msg
	source := markers.AppendSource(nil, msg.Topic, msg.Partition, msg.Offset)
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers)+4)
	var hasPhase, hasID bool
	for _, h := range msg.Headers {
		if bytes.Equal(h.Key, []byte(markers.HeaderSource)) || bytes.Equal(h.Key, []byte(markers.HeaderTask)) {
			continue // an upstream phasegate's source and task are replaced by ours (MARKERS.md 2)
		}
		hasPhase = hasPhase || bytes.Equal(h.Key, []byte(markers.HeaderPhase))
		hasID = hasID || bytes.Equal(h.Key, []byte(markers.HeaderID))
		headers = append(headers, *h)
	}
	if !hasPhase {
		headers = append(headers, sarama.RecordHeader{Key: []byte(markers.HeaderPhase), Value: w.Phase()})
	}
	if !hasID {
		headers = append(headers, sarama.RecordHeader{Key: []byte(markers.HeaderID), Value: source})
	}
	headers = append(headers, sarama.RecordHeader{Key: []byte(markers.HeaderSource), Value: source})
	if task != nil {
		headers = append(headers, sarama.RecordHeader{Key: []byte(markers.HeaderTask), Value: task})
	}
	return &sarama.ProducerMessage{
		Topic: p.cfg.OutputTopic, Partition: w.Partition, Timestamp: msg.Timestamp,
		Key: encoder(msg.Key), Value: encoder(msg.Value), Headers: headers,
	}
}

// quarantineMessage is the record unchanged, with phasegate.reason and
// phasegate.source added (MARKERS.md 5).
func (p *Pipeline) quarantineMessage(w align.Write[*sarama.ConsumerMessage]) *sarama.ProducerMessage {
	msg := w.Msg
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers)+2)
	for _, h := range msg.Headers {
		headers = append(headers, *h)
	}
	headers = append(headers,
		sarama.RecordHeader{Key: []byte(markers.HeaderReason), Value: []byte(w.Reason)},
		sarama.RecordHeader{Key: []byte(markers.HeaderSource), Value: markers.AppendSource(nil, msg.Topic, msg.Partition, msg.Offset)},
	)
	return &sarama.ProducerMessage{
		Topic: p.cfg.QuarantineTopic, Partition: w.Partition, Timestamp: msg.Timestamp,
		Key: encoder(msg.Key), Value: encoder(msg.Value), Headers: headers,
	}
}

// encoder keeps a null key or value null.
func encoder(b []byte) sarama.Encoder {
	if b == nil {
		return nil
	}
	return sarama.ByteEncoder(b)
}
