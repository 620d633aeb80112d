package proxy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/watermarks"
)

// generation is the pipeline state of one consumer group session. It is
// built from the committed offsets at the session's start and dropped whole
// at its end or on a rewind.
type generation struct {
	id        int64
	ctx       context.Context
	cancel    context.CancelFunc
	groupMeta *sarama.ConsumerGroupMetadata
	tracker   *watermarks.Tracker
	dedupe    *dedupe.Cache
	markers   *dedupe.Markers
	buf       *buffer
	parts     map[tp]*partState
	byP       []*partState // by tracker handle
	gates     map[tp]*gate
	quar      []quarantined
	quarSince time.Time // when the oldest queued quarantine record was queued
	dups      [2]int    // proven duplicates found since the last commit: records, markers
	idbuf     []byte
	// timeoutsSeen is the tracker's timeout count already added to the metric.
	timeoutsSeen int64
}

// setupReq asks the loop to build a generation for a new session.
type setupReq struct {
	session sarama.ConsumerGroupSession
	reply   chan setupReply
}

type setupReply struct {
	gen *genHandle
	err error
}

// endReq tells the loop that a session ended (after all its claims returned).
type endReq struct {
	gen   int64
	reply chan struct{}
}

// genHandle is what the consumer group's goroutines know of a generation.
type genHandle struct {
	id    int64
	ctx   context.Context
	gates map[tp]*gate // read-only after setup
}

// gate holds a paused partition's records in its claim goroutine, so they
// wait there rather than in the phase buffer.
type gate struct {
	closed atomic.Bool
	wake   chan struct{} // capacity 1
}

func newGate() *gate { return &gate{wake: make(chan struct{}, 1)} }

// set opens or closes the gate; the loop calls it.
func (g *gate) set(closed bool) {
	g.closed.Store(closed)
	if !closed {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

var errStopping = errors.New("proxy: shutting down")

// handler adapts sarama's ConsumerGroupHandler to the loop. Its methods run
// on sarama's goroutines and only talk to the loop over channels.
type handler struct {
	p   *Pipeline
	gen atomic.Pointer[genHandle]
}

func (h *handler) Setup(s sarama.ConsumerGroupSession) error {
	reply := make(chan setupReply, 1)
	h.p.events <- setupReq{session: s, reply: reply}
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
	h.p.events <- endReq{gen: g.id, reply: reply}
	<-reply
	return nil
}

// ConsumeClaim forwards the claim's records to the loop until the claim or
// the generation ends. While the partition's gate is closed (paused), it
// keeps draining the claim into held, so sarama's fetcher, which waits for
// every partition of a fetch response to be taken, never stalls the other
// partitions; held is bounded by what was fetched before the pause took
// effect, and goes to the loop, in order, once the gate opens.
func (h *handler) ConsumeClaim(_ sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	g := h.gen.Load()
	gate := g.gates[tp{claim.Topic(), claim.Partition()}]
	if gate == nil {
		gate = newGate() // a claim outside the generation's partitions: never closed
	}
	var held []*sarama.ConsumerMessage
	for {
		closed := gate.closed.Load()
		var out chan<- delivery // nil (never ready) unless held records may go
		var next delivery
		if !closed && len(held) > 0 {
			out, next = h.p.in, delivery{gen: g.id, msg: held[0]}
		}
		var wake <-chan struct{}
		if closed {
			wake = gate.wake
		}
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil // held records are read again by the next session
			}
			if closed || len(held) > 0 {
				held = append(held, msg)
				continue
			}
			select {
			case h.p.in <- delivery{gen: g.id, msg: msg}:
			case <-g.ctx.Done():
				return nil
			}
		case out <- next:
			held[0] = nil
			held = held[1:]
		case <-wake:
		case <-g.ctx.Done():
			return nil
		}
	}
}

// event handles a session request or a lag report on the loop.
func (p *Pipeline) event(ev any) {
	switch ev := ev.(type) {
	case setupReq:
		if p.stopping.Load() {
			ev.reply <- setupReply{err: errStopping}
			return
		}
		g, err := p.setup(ev.session)
		if err != nil {
			p.log.Warn("cannot start the consumer session; retrying", "err", err)
			ev.reply <- setupReply{err: err}
			return
		}
		ev.reply <- setupReply{gen: &genHandle{id: g.id, ctx: g.ctx, gates: g.gates}}
	case endReq:
		if p.gen != nil && p.gen.id == ev.gen {
			p.log.Info("partitions revoked; open phases will be read again by their next owner", "generation", ev.gen)
			p.gen.cancel()
			p.gen = nil
		}
		close(ev.reply)
	case lagReport:
		p.lag(ev)
	}
}

// setup builds the generation of a new session from the committed offsets
// (and their metadata) of its claims.
func (p *Pipeline) setup(s sarama.ConsumerGroupSession) (*generation, error) {
	claims := s.Claims()
	if err := p.checkClaims(claims); err != nil {
		return nil, err
	}
	fetched, err := p.deps.Admin.ListConsumerGroupOffsets(p.cfg.GroupID, claims)
	if err != nil {
		return nil, fmt.Errorf("fetch committed offsets: %w", err)
	}
	var parts []*partState
	var global uint64
	metas := map[tp]commitMeta{}
	for topic, ids := range claims {
		for _, id := range ids {
			k := tp{topic, id}
			off, meta := int64(-1), ""
			if b := fetched.GetBlock(topic, id); b != nil {
				off, meta = b.Offset, b.Metadata
			}
			if mem, ok := p.committed[k]; ok && mem.offset >= off {
				off, meta = mem.offset, mem.meta
			}
			if off < 0 {
				if off, err = p.deps.Client.GetOffset(topic, id, sarama.OffsetOldest); err != nil {
					return nil, fmt.Errorf("earliest offset of %s/%d: %w", topic, id, err)
				}
				meta = ""
			}
			cm, err := parseCommitMeta(meta)
			if err != nil {
				if meta != "" {
					p.log.Warn("committed offset carries no phasegate metadata; this partition starts without replay protection",
						"topic", topic, "partition", id, "offset", off, "err", err)
				}
				cm = commitMeta{consumed: off}
			}
			global = max(global, cm.global)
			metas[k] = cm
			s.MarkOffset(topic, id, off, meta)
			parts = append(parts, &partState{
				tp: k, key: dedupe.PartitionKey{Topic: topic, Partition: id},
				next: off, replayBelow: cm.consumed, resolvedBelow: cm.global,
				counts: map[uint64]int64{},
			})
		}
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].topic != parts[j].topic {
			return parts[i].topic < parts[j].topic
		}
		return parts[i].partition < parts[j].partition
	})

	tracker, err := watermarks.New(p.cfg.Watermarks, global)
	if err != nil {
		return nil, err
	}
	cache, err := dedupe.New(p.cfg.Dedupe)
	if err != nil {
		return nil, err
	}
	p.genSeq++
	ctx, cancel := context.WithCancel(s.Context())
	g := &generation{
		id: p.genSeq, ctx: ctx, cancel: cancel,
		groupMeta: sarama.NewConsumerGroupMetadataFromSession(s, p.cfg.GroupID, nil),
		tracker:   tracker, dedupe: cache, markers: dedupe.NewMarkers(),
		buf: newBuffer(), parts: map[tp]*partState{}, gates: map[tp]*gate{},
	}
	assigned := make([]tp, 0, len(parts))
	for _, ps := range parts {
		ps.p = tracker.Add(ps.topic, ps.partition)
		if cm := metas[ps.tp]; cm.hasMarker {
			g.markers.Restore(ps.key, cm.marker)
			tracker.Marker(ps.p, cm.marker)
		}
		g.parts[ps.tp] = ps
		g.gates[ps.tp] = newGate()
		g.byP = append(g.byP, ps)
		assigned = append(assigned, ps.tp)
		p.initPartitionMetrics(ps)
	}
	p.deps.Group.ResumeAll()
	p.assigned.Store(&assigned)
	p.gen = g
	p.metrics.rebalances.Inc()
	p.log.Info("partitions assigned", "generation", s.GenerationID(), "member", s.MemberID(),
		"partitions", len(parts), "global_watermark", global)
	return g, nil
}

func (p *Pipeline) initPartitionMetrics(ps *partState) {
	part := strconv.Itoa(int(ps.partition))
	ps.recordsIn = p.metrics.recordsIn.WithLabelValues(ps.topic)
	p.metrics.watermarkLag.WithLabelValues(ps.topic, part)
	p.metrics.consumerLag.WithLabelValues(ps.topic, part)
	p.metrics.idle.WithLabelValues(ps.topic, part)
	p.metrics.pausedSeconds.WithLabelValues(ps.topic, part)
	p.metrics.paused.WithLabelValues(ps.topic, part, pauseReasonBuffer)
}

// rewind drops the generation after a failed transaction: the session ends,
// and the next one starts from the committed offsets.
func (p *Pipeline) rewind(err error) {
	p.metrics.rewinds.Inc()
	p.log.Warn("transaction not committed; rewinding to the committed offsets and rebuilding the open phases", "err", err)
	p.gen.cancel()
	p.gen = nil
}

// checkClaims accepts all partitions of every input topic (the owner) or none
// (a standby): the single-owner assignment gives nothing else.
func (p *Pipeline) checkClaims(claims map[string][]int32) error {
	n := 0
	for _, ids := range claims {
		n += len(ids)
	}
	if n == 0 {
		p.log.Info("standby: another phasegate instance in the group owns the input partitions", "group", p.cfg.GroupID)
		return nil
	}
	for _, topic := range p.cfg.InputTopics {
		all, err := p.deps.Client.Partitions(topic)
		if err != nil {
			return fmt.Errorf("partitions of %s: %w", topic, err)
		}
		if len(claims[topic]) != len(all) {
			return fmt.Errorf("assigned %d of the %d partitions of %s: every member of group %s must run phasegate's %s assignment, and one instance owns all partitions",
				len(claims[topic]), len(all), topic, p.cfg.GroupID, singleOwnerName)
		}
	}
	return nil
}
