package proxy

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/txn"
	"github.com/phasegate/phasegate/watermarks"
)

// commitTimeout bounds one transaction, below the shutdown deadline.
const commitTimeout = 20 * time.Second

// commit writes the sealed phases (data, then a marker on every output
// partition, phase by phase), the quarantined records and the input offsets
// in one transaction. On success the sealed phases leave the buffer; on a
// failure other than fencing the generation is dropped (rewind).
func (p *Pipeline) commit(g *generation, seals []watermarks.Seal) error {
	sealed := make(map[uint64]bool, len(seals))
	var records []*sarama.ProducerMessage
	for _, s := range seals {
		sealed[s.Phase] = true
		records = p.appendPhase(records, g, s)
	}
	for _, q := range g.quar {
		records = append(records, p.quarantineMessage(q))
	}
	batch := txn.Batch{Records: records, Offsets: map[string][]*sarama.PartitionOffsetMetadata{}, Group: g.groupMeta}
	positions := make(map[tp]committedPos, len(g.byP))
	global := g.tracker.Global()
	for _, ps := range g.byP {
		cm := commitMeta{global: global, consumed: ps.next}
		cm.marker, cm.hasMarker = g.markers.Last(ps.key)
		pos := committedPos{offset: g.buf.commitOffset(ps, sealed), meta: cm.String()}
		positions[ps.tp] = pos
		batch.Offsets[ps.topic] = append(batch.Offsets[ps.topic], &sarama.PartitionOffsetMetadata{
			Partition: ps.partition, Offset: pos.offset, Metadata: &pos.meta,
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if err := p.deps.Producer.Commit(ctx, batch); err != nil {
		if errors.Is(err, txn.ErrFenced) || errors.Is(err, txn.ErrTooLarge) {
			return err
		}
		p.rewind(err)
		return nil
	}
	p.committedBatch(g, seals, positions)
	return nil
}

// committedBatch updates state and metrics after a commit.
func (p *Pipeline) committedBatch(g *generation, seals []watermarks.Seal, positions map[tp]committedPos) {
	now := p.now()
	for k, pos := range positions {
		p.committed[k] = pos
	}
	for _, q := range g.quar {
		p.metrics.quarantined.WithLabelValues(string(q.reason)).Inc()
	}
	g.quar = g.quar[:0]
	p.metrics.duplicates.WithLabelValues("record").Add(float64(g.dups[0]))
	p.metrics.duplicates.WithLabelValues("marker").Add(float64(g.dups[1]))
	g.dups = [2]int{}
	for _, s := range seals {
		ph := g.buf.phases[s.Phase]
		delete(g.buf.phases, s.Phase)
		p.metrics.recordsOut.Add(float64(len(ph.records)))
		p.metrics.markersOut.Add(float64(p.outParts))
		p.metrics.phasesSealed.WithLabelValues(s.By.String()).Inc()
		p.metrics.sealToCommit.Observe(now.Sub(s.Sealed).Seconds())
		for topic, d := range s.Stats.PerTopic {
			p.metrics.phaseDuration.WithLabelValues(topic).Observe(d.Seconds())
		}
		p.metrics.stragglerCV.Set(s.Stats.CV)
		if s.Stats.Straggling() && p.limiter.allow("straggler", now) {
			slow := s.Stats.PerPartition[0]
			for _, d := range s.Stats.PerPartition {
				if d.P == s.Stats.Slowest {
					slow = d
				}
			}
			p.log.Warn("one branch straggles: phase durations vary across input topics (coefficient of variation above 0.6); the join waits for the slowest",
				"phase", s.Phase, "cv", s.Stats.CV, "slowest_topic", slow.Topic, "slowest_partition", slow.Partition, "slowest_duration", slow.Duration)
		}
		p.record(s, ph)
		p.log.Debug("phase sealed", "phase", s.Phase, "sealed_by", s.By.String(), "records", s.Records,
			"duration", s.Sealed.Sub(s.Opened), "cv", s.Stats.CV)
	}
	if len(seals) > 0 {
		p.lastSeal = now
	}
}

// appendPhase appends a sealed phase's data records, routed per MARKERS.md
// section 4, then one marker on every output partition.
func (p *Pipeline) appendPhase(out []*sarama.ProducerMessage, g *generation, s watermarks.Seal) []*sarama.ProducerMessage {
	ph := g.buf.phases[s.Phase]
	counts := make([]int64, p.outParts)
	sources := make([]map[string]int64, p.outParts)
	for q := range sources {
		sources[q] = make(map[string]int64, len(p.cfg.InputTopics))
		for _, t := range p.cfg.InputTopics {
			sources[q][t] = 0
		}
	}
	phaseHdr := markers.AppendPhase(nil, s.Phase)
	for _, msg := range ph.records {
		q := p.cfg.Routing.route(msg.Key, msg.Partition, p.outParts)
		counts[q]++
		sources[q][msg.Topic]++
		out = append(out, p.dataMessage(msg, q, phaseHdr))
	}
	for q := range p.outParts {
		m := markers.Marker{
			Phase: s.Phase, Partition: q, Count: counts[q], HasCount: true, Sources: sources[q],
			WatermarkMs: s.WatermarkMs, SealedBy: markers.SealedBy(s.By.String()), Emitter: p.cfg.TransactionalID,
		}
		out = append(out, &sarama.ProducerMessage{
			Topic: p.cfg.OutputTopic, Partition: q, Timestamp: s.Sealed,
			Value: sarama.ByteEncoder(m.AppendOutput(nil)),
			Headers: []sarama.RecordHeader{
				{Key: []byte(markers.HeaderMarker), Value: []byte("1")},
				{Key: []byte(markers.HeaderPhase), Value: phaseHdr},
			},
		})
	}
	return out
}

// dataMessage is msg as published: key, value, timestamp and headers
// unchanged, with phasegate.phase and phasegate.id added when absent and
// phasegate.source added.
func (p *Pipeline) dataMessage(msg *sarama.ConsumerMessage, q int32, phaseHdr []byte) *sarama.ProducerMessage {
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
		headers = append(headers, sarama.RecordHeader{Key: []byte(markers.HeaderPhase), Value: phaseHdr})
	}
	if !hasID {
		headers = append(headers, sarama.RecordHeader{Key: []byte(markers.HeaderID), Value: source})
	}
	headers = append(headers, sarama.RecordHeader{Key: []byte(markers.HeaderSource), Value: source})
	return &sarama.ProducerMessage{
		Topic: p.cfg.OutputTopic, Partition: q, Timestamp: msg.Timestamp,
		Key: encoder(msg.Key), Value: encoder(msg.Value), Headers: headers,
	}
}

// quarantineMessage is the record unchanged, with phasegate.reason and
// phasegate.source added.
func (p *Pipeline) quarantineMessage(q quarantined) *sarama.ProducerMessage {
	msg := q.msg
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers)+2)
	for _, h := range msg.Headers {
		headers = append(headers, *h)
	}
	headers = append(headers,
		sarama.RecordHeader{Key: []byte(markers.HeaderReason), Value: []byte(q.reason)},
		sarama.RecordHeader{Key: []byte(markers.HeaderSource), Value: markers.AppendSource(nil, msg.Topic, msg.Partition, msg.Offset)},
	)
	return &sarama.ProducerMessage{
		Topic: p.cfg.QuarantineTopic, Partition: msg.Partition % p.quarParts, Timestamp: msg.Timestamp,
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
