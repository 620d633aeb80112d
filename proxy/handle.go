package proxy

import (
	"fmt"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/watermarks"
)

// recordOverhead is what a buffered record costs beyond its key, value and
// headers (the consumer message, its header structs, its place in the
// buffer), counted against PHASEGATE_MAX_BUFFER_BYTES so the bound reflects
// memory rather than payload.
const recordOverhead = 256

// quarantined is a record on its way to the quarantine topic.
type quarantined struct {
	msg    *sarama.ConsumerMessage
	reason markers.Reason
}

// handle is the per-record path: classify, deduplicate, track, buffer.
func (p *Pipeline) handle(d delivery) {
	g := p.gen
	if g == nil || d.gen != g.id {
		return // a record of a session that has ended
	}
	msg := d.msg
	ps := g.parts[tp{msg.Topic, msg.Partition}]
	if ps == nil {
		return
	}
	ps.next = msg.Offset + 1
	replay := msg.Offset < ps.replayBelow
	if !replay {
		ps.recordsIn.Inc()
	}

	var meta markers.Meta
	var err error
	for _, h := range msg.Headers {
		if err = meta.Observe(h.Key, h.Value); err != nil {
			break
		}
	}
	if err == nil {
		err = meta.Check()
	}
	if err != nil {
		p.malformed(g, ps, msg, replay, err)
		return
	}
	if meta.Marker {
		p.marker(g, ps, msg, meta, replay)
		return
	}

	phase, timed := meta.Phase, !meta.HasPhase
	if timed {
		if phase, err = markers.PhaseOf(msg.Timestamp.UnixMilli(), p.cfg.Watermarks.PhaseLength); err != nil {
			p.malformed(g, ps, msg, replay, err)
			return
		}
	}
	if replay && phase < ps.resolvedBelow {
		return // resolved by a committed transaction before this session
	}
	g.idbuf = markers.AppendIdentity(g.idbuf[:0], meta.ID, msg.Topic, msg.Partition, msg.Offset)
	dup, err := g.dedupe.Add(phase, g.idbuf)
	if err != nil {
		p.metrics.dedupeFull.Inc()
		if p.limiter.allow("dedupe-full", p.now()) {
			p.log.Warn("dedupe cache over its identity bound with only open phases left; raise PHASEGATE_DEDUPE_IDS or lower PHASEGATE_MAX_BUFFER_BYTES", "err", err)
		}
	}
	if dup {
		if !replay {
			g.dups[0]++
		}
		return
	}
	ps.count(phase)
	size := recordOverhead + len(msg.Key) + len(msg.Value)
	for _, h := range msg.Headers {
		size += len(h.Key) + len(h.Value)
	}
	rec := watermarks.Rec{Phase: phase, EventMs: msg.Timestamp.UnixMilli(), Timed: timed, Bytes: size}
	if g.tracker.Record(ps.p, rec) == watermarks.Late {
		p.quarantine(g, ps, msg, markers.ReasonLate, fmt.Sprintf("phase %d is sealed (global watermark %d)", phase, g.tracker.Global()))
		return
	}
	g.buf.add(phase, ps, msg, len(g.byP))
}

// marker handles an input marker (MARKERS.md 3.1).
func (p *Pipeline) marker(g *generation, ps *partState, msg *sarama.ConsumerMessage, meta markers.Meta, replay bool) {
	mk, err := markers.DecodeMarker(msg.Value)
	switch {
	case err != nil:
	case mk.Phase != meta.Phase:
		err = fmt.Errorf("marker value phase %d differs from its %s header %d", mk.Phase, markers.HeaderPhase, meta.Phase)
	case mk.Partition != msg.Partition:
		err = fmt.Errorf("marker names partition %d but was read from partition %d", mk.Partition, msg.Partition)
	}
	if err != nil {
		p.malformed(g, ps, msg, replay, err)
		return
	}
	if replay {
		// Resolved before; its effect on the watermark is idempotent.
		g.tracker.Marker(ps.p, mk.Phase)
		return
	}
	switch g.markers.See(ps.key, mk.Phase) {
	case dedupe.MarkerRepeat:
		g.dups[1]++
	case dedupe.MarkerStale:
		last, _ := g.markers.Last(ps.key)
		p.quarantine(g, ps, msg, markers.ReasonStaleMarker, fmt.Sprintf("marker for phase %d after a marker for phase %d", mk.Phase, last))
	default:
		g.tracker.Marker(ps.p, mk.Phase)
		got := ps.counts[mk.Phase]
		ps.settle(mk.Phase)
		if mk.HasCount && mk.Count != got && mk.Phase >= ps.resolvedBelow {
			p.quarantine(g, ps, msg, markers.ReasonCountMismatch, fmt.Sprintf("marker for phase %d counts %d records, %d were read", mk.Phase, mk.Count, got))
		}
	}
}

func (p *Pipeline) malformed(g *generation, ps *partState, msg *sarama.ConsumerMessage, replay bool, err error) {
	if replay {
		return // quarantined by a committed transaction before this session
	}
	p.quarantine(g, ps, msg, markers.ReasonMalformed, err.Error())
}

// quarantine queues msg for the quarantine topic; it is committed with the
// next transaction, together with its input offset.
func (p *Pipeline) quarantine(g *generation, ps *partState, msg *sarama.ConsumerMessage, reason markers.Reason, why string) {
	if len(g.quar) == 0 {
		g.quarSince = p.now()
	}
	g.quar = append(g.quar, quarantined{msg: msg, reason: reason})
	if p.limiter.allow(string(reason)+"/"+ps.topic, p.now()) {
		p.log.Warn("record quarantined", "reason", reason, "topic", ps.topic, "partition", ps.partition,
			"offset", msg.Offset, "why", why, "todo", reasonAdvice[reason])
	}
}

// reasonAdvice tells the operator what to do about each quarantine reason.
var reasonAdvice = map[markers.Reason]string{
	markers.ReasonLate:          "records arrive after their phase was sealed: raise PHASEGATE_MAX_OUT_OF_ORDERNESS or PHASEGATE_IDLE_TIMEOUT, or check the producer's clock",
	markers.ReasonMalformed:     "fix the producer: phase headers are 1-20 decimal digits, markers need a JSON value with v, phase and partition",
	markers.ReasonStaleMarker:   "the producer sent a marker for a phase below one it already marked on this partition",
	markers.ReasonCountMismatch: "the producer's marker count differs from the records read: records were lost or duplicated upstream",
}
