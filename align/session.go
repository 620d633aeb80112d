package align

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/watermarks"
)

// Config is what a Session needs. proxy fills it from its own Config and
// the topics' partition counts.
type Config struct {
	InputTopics []string
	// OutputPartitions and QuarantinePartitions are the partition counts of
	// the output and quarantine topics; both > 0.
	OutputPartitions     int32
	QuarantinePartitions int32
	// Outputs are the lanes this session writes (MARKERS.md 3.3): for each
	// sealed phase, each entry writes one marker on its Partition, with the
	// marker's Task and Writers fields (tasks.Layout.MarkerFields; 0 and 0
	// on a partition with one writer), counting that lane's records only.
	// Several entries may share a partition, one per task (key routing).
	// Nil means every output partition, with one writer each.
	Outputs []Output
	// Emitter is written into every output marker (the transactional ID).
	Emitter    string
	Routing    Routing
	Watermarks watermarks.Config // its Now is the Session's clock too
	Dedupe     dedupe.Config
	// QuarantineDelay bounds how long a quarantined record waits for a
	// seal before Step commits it in a transaction of its own.
	QuarantineDelay time.Duration
	// BatchBytes bounds the bytes of the sealed phases one Batch takes (0:
	// no bound): the oldest phases up to it, at least one, so that a
	// transaction stays short however much sealed while the last one was
	// in flight; the rest wait for the next Batch.
	BatchBytes int64
	// StreamFor is how long the oldest open phase may stream into an open
	// transaction before its seal (0: never stream; stream.go). Its
	// records go to the transaction as they arrive (StreamBatch), so the
	// seal only adds its last records, the markers, the quarantine and
	// the offsets; a phase not sealed within StreamFor falls back (an
	// AbortBatch) and waits for its seal like the later phases.
	StreamFor time.Duration
}

// Validate checks what the watermarks and dedupe configurations do not.
func (c Config) Validate() error {
	switch {
	case len(c.InputTopics) == 0:
		return errors.New("align: no input topics")
	case c.OutputPartitions <= 0 || c.QuarantinePartitions <= 0:
		return fmt.Errorf("align: output and quarantine topics need partitions (have %d and %d)", c.OutputPartitions, c.QuarantinePartitions)
	case c.QuarantineDelay <= 0:
		return errors.New("align: QuarantineDelay must be positive")
	case c.BatchBytes < 0:
		return errors.New("align: BatchBytes must not be negative")
	case c.StreamFor < 0:
		return errors.New("align: StreamFor must not be negative")
	case c.Watermarks.Now == nil:
		return errors.New("align: Watermarks.Now (the clock) is required")
	}
	for _, o := range c.Outputs {
		if o.Partition < 0 || o.Partition >= c.OutputPartitions {
			return fmt.Errorf("align: output partition %d out of [0, %d)", o.Partition, c.OutputPartitions)
		}
	}
	if err := c.Watermarks.Validate(); err != nil {
		return err
	}
	return c.Dedupe.Validate()
}

// Output is an output partition a session writes markers on.
type Output struct {
	Partition, Task, Writers int32
	// Inputs are the input partitions of the task that writes Partition:
	// the entry is that task's lane there, holding the records of these
	// inputs routed to Partition. Their committed metadata says up to which
	// phase the task has marked it already, so the session writes the
	// lane's markers only from that phase on, and records of those
	// partitions in earlier phases are late. A session owning several
	// tasks starts each at its own point. Nil: the session's partitions
	// are one task.
	Inputs []TP
}

// TP names an input partition.
type TP struct {
	Topic     string
	Partition int32
}

func (k TP) String() string { return fmt.Sprintf("%s/%d", k.Topic, k.Partition) }

// Start is where a partition starts in a new session: the committed offset
// (or the earliest, when nothing was committed) and its metadata.
type Start struct {
	TP
	Offset   int64
	Metadata string
}

// ReasonDedupe is the pause reason while the dedupe cache is over its
// identity bound with only open phases left.
const ReasonDedupe = "dedupe"

// Session is the alignment state of one consumer group session. It is not
// safe for concurrent use: one goroutine makes every call.
type Session[M any] struct {
	cfg     Config
	now     func() time.Time
	tracker *watermarks.Tracker
	dedupe  *dedupe.Cache
	markers *dedupe.Markers
	parts   map[TP]*part
	byP     []*part // by tracker handle
	phases  map[uint64]*phase[M]
	quar    []quarantined[M]
	// quarSince is when the oldest queued quarantine record was queued.
	quarSince time.Time
	dups      Duplicates // proven since the last Batch was built
	// sealed are phases Advance sealed that no Batch has taken yet.
	sealed   []watermarks.Seal
	inflight *Batch[M]
	// stream is the oldest open phase streaming into the open transaction.
	stream stream
	// fleetMarked is the last FleetMarked.
	fleetMarked uint64
	// sealedBytes weighs the records of the sealed phases no Batch has
	// taken yet.
	sealedBytes int64
	// dedupeFull is true while the "dedupe" pause is requested.
	dedupeFull   bool
	timeoutsSeen int64
	// replaying counts the partitions not yet read again up to the consumed
	// position of the last committed transaction. No Batch is built while
	// any is: its metadata would move that position back, and the records
	// between would be resolved a second time after the next restart.
	replaying int
	foreign   []TP
	idbuf     []byte
	// lanes are the session's writers, one per Output entry (MARKERS.md
	// 3.3): each counts, marks and tags its own records.
	lanes lanes
	// marked is the lowest global watermark its partitions' committed
	// metadata holds (Marked).
	marked uint64
}

// New starts a session over the partitions in starts. A partition whose
// metadata was not written by phasegate starts without replay protection;
// Foreign lists them.
func New[M any](cfg Config, starts []Start) (*Session[M], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	starts = slices.Clone(starts)
	slices.SortFunc(starts, func(a, b Start) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	metas := make([]commitMeta, len(starts))
	byTP := make(map[TP]uint64, len(starts))
	global := uint64(math.MaxUint64)
	var foreign []TP
	for i, st := range starts {
		cm, err := parseCommitMeta(st.Metadata)
		if err != nil {
			if st.Metadata != "" {
				foreign = append(foreign, st.TP)
			}
			cm = commitMeta{consumed: st.Offset}
		}
		metas[i] = cm
		byTP[st.TP] = cm.global
		global = min(global, cm.global)
	}
	if len(starts) == 0 {
		global = 0
	}
	tracker, err := watermarks.New(cfg.Watermarks, global)
	if err != nil {
		return nil, err
	}
	cache, err := dedupe.New(cfg.Dedupe)
	if err != nil {
		return nil, err
	}
	if cfg.Outputs == nil {
		for o := range cfg.OutputPartitions {
			cfg.Outputs = append(cfg.Outputs, Output{Partition: o})
		}
	}
	all := make([]TP, len(starts))
	for i, st := range starts {
		all[i] = st.TP
	}
	ls, err := newLanes(cfg.Outputs, cfg.OutputPartitions, all, byTP)
	if err != nil {
		return nil, err
	}
	s := &Session[M]{
		cfg: cfg, now: cfg.Watermarks.Now, tracker: tracker, dedupe: cache, markers: dedupe.NewMarkers(),
		parts: make(map[TP]*part, len(starts)), phases: map[uint64]*phase[M]{}, foreign: foreign, lanes: ls,
		marked: global,
	}
	topicIdx := make(map[string]int, len(cfg.InputTopics))
	for i, t := range cfg.InputTopics {
		topicIdx[t] = i
	}
	for i, st := range starts {
		cm := metas[i]
		ps := &part{
			TP: st.TP, key: dedupe.PartitionKey{Topic: st.Topic, Partition: st.Partition},
			p: tracker.Add(st.Topic, st.Partition), next: st.Offset,
			replayBelow: cm.consumed, resolvedBelow: cm.global, sealedBelow: max(cm.global, ls.sealedBelow[st.TP]),
			counts: map[uint64]int64{}, topic: topicIdx[st.Topic], lanes: ls.ofInput[st.TP],
			replaying: st.Offset < cm.consumed,
		}
		if ps.replaying {
			s.replaying++
		} else if cm.idle && cm.consumed == st.Offset {
			tracker.WasIdle(ps.p)
			ps.idleLSO = cm.idleLSO
		}
		if cm.hasMarker {
			s.markers.Restore(ps.key, cm.marker)
			ps.marker, ps.hasMarker = cm.marker, true
			if !ps.replaying {
				tracker.Marker(ps.p, cm.marker)
			}
		}
		s.parts[st.TP] = ps
		s.byP = append(s.byP, ps)
	}
	return s, nil
}

// Global returns the first unsealed phase.
func (s *Session[M]) Global() uint64 { return s.tracker.Global() }

// Marked returns the lowest global watermark the session's partitions
// have committed: every phase below it is marked in committed output, and
// the next owner of any of its partitions resumes at or above it (the
// watermark report's marked, docs/FLEET.md rule F8).
func (s *Session[M]) Marked() uint64 { return s.marked }

// BufferedBytes returns the bytes of records held in memory: in open
// phases (what the tracker's pause decisions count), in sealed phases
// waiting for a Batch (Waiting) and in the Batch in flight.
func (s *Session[M]) BufferedBytes() int64 { return s.tracker.BufferedBytes() + s.tracker.Held() }

// Waiting returns the bytes of records in sealed phases that no Batch has
// taken yet: while a Batch is in flight, what the next one will write.
func (s *Session[M]) Waiting() int64 { return s.sealedBytes }

// Partitions returns the session's partitions, sorted by topic and number.
func (s *Session[M]) Partitions() []TP {
	out := make([]TP, len(s.byP))
	for i, ps := range s.byP {
		out[i] = ps.TP
	}
	return out
}

// Floor caps the session's global watermark with the lowest watermark of
// the other tasks sharing it (watermarks.Tracker.Floor); set false lifts it.
func (s *Session[M]) Floor(m watermarks.Mark, set bool) { s.tracker.Floor(m, set) }

// Local is the session's own watermark as of the last Step, before the
// Floor: what it reports to the other tasks.
func (s *Session[M]) Local() watermarks.Mark { return s.tracker.Local() }

// FleetMarked tells the session that every writer of its output
// partitions has committed its markers of every phase below m (the lowest
// marked of the fleet's reports, fleet.View.Marked): a session sharing a
// partition with other writers streams phase m at the earliest (stream.go).
func (s *Session[M]) FleetMarked(m uint64) { s.fleetMarked = m }

// Expect tells the session the phases other tasks hold data of
// (fleet.View.DataPhases): it seals each of them too, with no records, so
// that it writes their markers on its outputs and every output partition
// carries a marker for every phase with data anywhere (MARKERS.md 3.2).
func (s *Session[M]) Expect(phases []uint64) {
	for _, ph := range phases {
		s.tracker.Expect(ph)
	}
}

// DataPhases appends to dst, ascending, the session's open phases that hold
// records, at most max: what it reports to the other tasks.
func (s *Session[M]) DataPhases(dst []uint64, max int) []uint64 {
	return s.tracker.DataPhases(dst, max)
}

// Foreign lists the partitions whose committed metadata was not
// phasegate's: they start without replay protection.
func (s *Session[M]) Foreign() []TP { return s.foreign }
