package align

import (
	"fmt"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/watermarks"
)

// RecordOverhead is what a buffered record costs beyond its key, value and
// headers (the client's message, its header structs, its place in the
// buffer), counted against PHASEGATE_MAX_BUFFER_BYTES so the bound reflects
// memory rather than payload.
const RecordOverhead = 256

// Record is one input record as align needs it: plain values, plus the
// caller's own message (Msg), carried untouched into the Batch.
type Record[M any] struct {
	Topic       string
	Partition   int32
	Offset      int64
	TimestampMs int64
	Key, Value  []byte
	// Size is the bytes of key, value and headers.
	Size int
	// Meta is what markers.Meta.Observe and Check read from the headers;
	// MetaErr is their error (the record is malformed and quarantined).
	Meta    markers.Meta
	MetaErr error
	Msg     M
}

// Kind is what Handle did with a record.
type Kind int

const (
	// Ignored: the record is not of this session's partitions.
	Ignored Kind = iota
	// Buffered: a data record, held in its open phase until it is sealed.
	Buffered
	// Duplicate: a proven retry (same identity in the same phase), or a
	// repeated input marker; dropped, counted in the next Batch.
	Duplicate
	// Quarantined: queued for the quarantine topic with Outcome.Reason.
	Quarantined
	// Marker: an input marker, honoured (MARKERS.md 3.1).
	Marker
	// Resolved: read again after a restart, already resolved by a committed
	// transaction before this session; nothing to do.
	Resolved
)

var kindNames = [...]string{"ignored", "buffered", "duplicate", "quarantined", "marker", "resolved"}

func (k Kind) String() string { return kindNames[k] }

// Outcome is Handle's answer for one record.
type Outcome struct {
	Kind  Kind
	Phase uint64
	// Replay is true for a record below the consumed position of the last
	// committed transaction: read again, not new input.
	Replay bool
	// Reason and Why say why a record is quarantined.
	Reason markers.Reason
	Why    string
	// DedupeFull is true when the record took the dedupe cache over its
	// identity bound (the identity is still recorded).
	DedupeFull bool
	// Passed is true when the record took its partition past the
	// session's watermark phase: the partition no longer holds it (the
	// HoldChange the next Step would report; it does not report it again),
	// so the caller can stop taking its records first at once rather than
	// at the next Step.
	Passed bool
}

// Handle is the per-record path: classify, deduplicate, track, buffer.
// Records of a partition must come in offset order. Handle keeps r.Msg, not
// r: the caller may reuse r for the next record.
func (s *Session[M]) Handle(r *Record[M]) Outcome {
	ps := s.parts[TP{r.Topic, r.Partition}]
	if ps == nil {
		return Outcome{Kind: Ignored}
	}
	out := s.handle(ps, r)
	if ps.holds && s.tracker.Low(ps.p) != s.tracker.Local().Phase {
		ps.holds, out.Passed = false, true
	}
	return out
}

// handle is Handle for a partition of the session.
func (s *Session[M]) handle(ps *part, r *Record[M]) Outcome {
	ps.next = r.Offset + 1
	replay := r.Offset < ps.replayBelow
	if ps.replaying && ps.next >= ps.replayBelow {
		s.replayed(ps)
	}
	if r.MetaErr != nil {
		return s.malformed(ps, r, replay, r.MetaErr)
	}
	if r.Meta.Marker {
		return s.marker(ps, r, replay)
	}
	id, timed := r.Meta.Phase, !r.Meta.HasPhase
	if timed {
		var err error
		if id, err = markers.PhaseOf(r.TimestampMs, s.cfg.Watermarks.PhaseLength); err != nil {
			return s.malformed(ps, r, replay, err)
		}
	}
	if replay && id < ps.resolvedBelow {
		return Outcome{Kind: Resolved, Phase: id, Replay: true}
	}
	out := Outcome{Kind: Buffered, Phase: id, Replay: replay}
	s.idbuf = markers.AppendIdentity(s.idbuf[:0], r.Meta.ID, r.Topic, r.Partition, r.Offset)
	dup, err := s.dedupe.Add(id, s.idbuf)
	if err != nil {
		out.DedupeFull = true
		s.pauseForDedupe()
	}
	if dup {
		if !replay {
			s.dups.Records++
		}
		out.Kind = Duplicate
		return out
	}
	ps.count(id)
	rec := watermarks.Rec{Phase: id, EventMs: r.TimestampMs, Timed: timed, Bytes: RecordOverhead + r.Size}
	if id < ps.sealedBelow || s.tracker.Record(ps.p, rec) == watermarks.Late {
		// A phase whose dedupe set was evicted is open again in the cache
		// after Add: seal it again, or it would stay there for good.
		s.dedupe.Seal(id)
		out := s.quarantine(ps, r, markers.ReasonLate, fmt.Sprintf("phase %d is sealed (global watermark %d)", id, max(s.tracker.Global(), ps.sealedBelow)))
		s.quar[len(s.quar)-1].latePhase = id + 1
		return out
	}
	s.buffer(id, ps, r.Msg, r.Offset, s.cfg.Routing.route(r.Key, r.Partition, s.cfg.OutputPartitions), int64(rec.Bytes))
	return out
}

// marker handles an input marker (MARKERS.md 3.1).
func (s *Session[M]) marker(ps *part, r *Record[M], replay bool) Outcome {
	mk, err := markers.DecodeMarker(r.Value)
	switch {
	case err != nil:
	case mk.Phase != r.Meta.Phase:
		err = fmt.Errorf("marker value phase %d differs from its %s header %d", mk.Phase, markers.HeaderPhase, r.Meta.Phase)
	case mk.Partition != r.Partition:
		err = fmt.Errorf("marker names partition %d but was read from partition %d", mk.Partition, r.Partition)
	}
	if err != nil {
		return s.malformed(ps, r, replay, err)
	}
	if replay {
		// Resolved before; its effect on the watermark is idempotent.
		s.tracker.Marker(ps.p, mk.Phase)
		return Outcome{Kind: Resolved, Phase: mk.Phase, Replay: true}
	}
	switch s.markers.See(ps.key, mk.Phase) {
	case dedupe.MarkerRepeat:
		s.dups.Markers++
		return Outcome{Kind: Duplicate, Phase: mk.Phase}
	case dedupe.MarkerStale:
		last, _ := s.markers.Last(ps.key)
		return s.quarantine(ps, r, markers.ReasonStaleMarker, fmt.Sprintf("marker for phase %d after a marker for phase %d", mk.Phase, last))
	}
	s.tracker.Marker(ps.p, mk.Phase)
	got := ps.counts[mk.Phase]
	ps.settle(mk.Phase)
	if mk.HasCount && mk.Count != got && mk.Phase >= ps.resolvedBelow {
		// Honoured all the same; the marker record itself is quarantined.
		return s.quarantine(ps, r, markers.ReasonCountMismatch, fmt.Sprintf("marker for phase %d counts %d records, %d were read", mk.Phase, mk.Count, got))
	}
	return Outcome{Kind: Marker, Phase: mk.Phase}
}

func (s *Session[M]) malformed(ps *part, r *Record[M], replay bool, err error) Outcome {
	if replay {
		return Outcome{Kind: Resolved, Replay: true} // quarantined by a committed transaction
	}
	return s.quarantine(ps, r, markers.ReasonMalformed, err.Error())
}

// replayed ends ps's replay: it was read again up to the position of the
// last committed transaction, or its log ends before.
func (s *Session[M]) replayed(ps *part) {
	ps.replaying = false
	s.replaying--
	if ps.hasMarker {
		s.tracker.Marker(ps.p, ps.marker)
	}
}

// quarantined is a record on its way to the quarantine topic. latePhase
// is, for a late record, its phase + 1 (0 for any other): a Batch that
// takes it takes every sealed phase up to that one (build).
type quarantined[M any] struct {
	msg       M
	partition int32
	reason    markers.Reason
	latePhase uint64
}

// quarantine queues r for the quarantine topic; it is written by the next
// Batch, which commits its input offset.
func (s *Session[M]) quarantine(ps *part, r *Record[M], reason markers.Reason, why string) Outcome {
	if len(s.quar) == 0 {
		s.quarSince = s.now()
	}
	s.quar = append(s.quar, quarantined[M]{msg: r.Msg, partition: ps.Partition % s.cfg.QuarantinePartitions, reason: reason})
	return Outcome{Kind: Quarantined, Reason: reason, Why: why}
}

// pauseForDedupe asks every partition to pause while the dedupe cache is
// full (the one holding the global watermark keeps running, so phases seal
// and free the cache); Step withdraws it once the cache fits again.
func (s *Session[M]) pauseForDedupe() {
	if s.dedupeFull {
		return
	}
	s.dedupeFull = true
	for _, ps := range s.byP {
		s.tracker.Pause(ps.p, ReasonDedupe)
	}
}
