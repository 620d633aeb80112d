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

// commit writes the session's Batch in one transaction. When it commits,
// the session is told and the metrics count it; when it fails and the
// producer could be repaired (a *txn.Failure), the generation is dropped
// and the next session starts from the committed offsets (rewind); any
// other error (fenced, a record too large) stops the instance.
func (p *Pipeline) commit(g *generation, b *align.Batch[*sarama.ConsumerMessage]) error {
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
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if err := p.deps.Producer.Commit(ctx, tb); err != nil {
		var failure *txn.Failure
		if !errors.As(err, &failure) {
			return err
		}
		p.metrics.rewinds.Inc()
		p.log.Warn("transaction not committed; rewinding to the committed offsets and rebuilding the open phases", "err", err)
		p.dropGeneration()
		return nil
	}
	g.s.Committed(b)
	p.committedBatch(b)
	return nil
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
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers)+3)
	var hasPhase, hasID bool
	for _, h := range msg.Headers {
		if bytes.Equal(h.Key, []byte(markers.HeaderSource)) {
			continue // an upstream phasegate's source is replaced by ours
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
