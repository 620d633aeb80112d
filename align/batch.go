package align

import (
	"github.com/phasegate/phasegate/markers"
)

// Batch is what the next transaction step writes. A CommitBatch is
// Writes in order, then Offsets committed with the consumer group's
// metadata: the caller writes it, after what StreamBatches wrote into the
// same transaction, whole or not at all. A StreamBatch's Writes go into
// the open transaction (begun if none is), which stays open; an
// AbortBatch aborts it.
type Batch[M any] struct {
	Kind BatchKind
	// Seals are the phases the Batch writes, ascending.
	Seals []Sealed
	// Writes are the records, in the order they must be written: per phase
	// its data, then one marker per output partition; then the quarantined
	// records.
	Writes []Write[M]
	// Offsets are every partition's next offset to consume after the
	// transaction, with the metadata a restart resumes from.
	Offsets []Offset
	// Counts of what the Batch holds, for metrics.
	Records, Markers int
	Quarantined      map[markers.Reason]int
	// Duplicates are the proven duplicates found since the last Batch;
	// they count once this Batch commits their offsets.
	Duplicates Duplicates
	// quarantined is how many queued quarantine records the Batch took.
	quarantined int
	// bytes weighs its phases' records against the memory bound.
	bytes int64
	// global is the lowest global watermark its Offsets' metadata commits.
	global uint64
	lanes  *lanes // the session's
}

// BatchKind says what a Batch asks of the transaction.
type BatchKind uint8

const (
	// CommitBatch writes the Batch into the open transaction, or a new
	// one, and commits it with its Offsets.
	CommitBatch BatchKind = iota
	// StreamBatch writes data records of the oldest open phase into the
	// open transaction, or a new one, and leaves it open: the phase's
	// CommitBatch commits them with the rest of the phase.
	StreamBatch
	// AbortBatch aborts the open transaction: what the StreamBatches wrote
	// is dropped, and the phase is written whole at its seal.
	AbortBatch
)

// Duplicates counts proven duplicates: retried records and repeated input
// markers.
type Duplicates struct{ Records, Markers int }

// WriteKind says what a Write is.
type WriteKind uint8

const (
	// Data is an input record republished on the output topic.
	Data WriteKind = iota
	// MarkerWrite is an output marker.
	MarkerWrite
	// Quarantine is an input record written to the quarantine topic.
	Quarantine
)

// Write is one record of a Batch. It is small (40 bytes with a pointer
// M, TestWriteSize): one is built per record committed.
type Write[M any] struct {
	// Msg is the input record (Data, Quarantine).
	Msg M
	// Seal is the phase of a Data or MarkerWrite write.
	Seal *Sealed
	// Reason is the quarantine reason (Quarantine).
	Reason markers.Reason
	// Partition is the output partition (Data, MarkerWrite) or the
	// quarantine partition (Quarantine).
	Partition int32
	Kind      WriteKind
	// slot is the writer's lane on Partition (lane.slot): it sits in the
	// padding after Kind, so several writers cost Write no byte.
	slot uint16
}

// Phase is the phasegate.phase header value of a Data or MarkerWrite
// write, shared by every write of the phase.
func (w Write[M]) Phase() []byte {
	if w.Seal == nil {
		return nil
	}
	return w.Seal.header
}

// Value is the JSON value of a MarkerWrite; its timestamp is Seal.Sealed.
func (w Write[M]) Value() []byte {
	return w.Seal.markers[w.Seal.lanes.bySlot[w.Partition][w.slot]]
}

// Task is the phasegate.task header value of a Data write on a partition
// with several writers (MARKERS.md 3.3); nil otherwise.
func (b *Batch[M]) Task(w Write[M]) []byte {
	if w.Kind != Data {
		return nil
	}
	return b.lanes.hdr[w.slot]
}

// Offset is a partition's offset to commit and its metadata.
type Offset struct {
	TP
	Offset   int64
	Metadata string
}

// build takes the oldest sealed phases (batchPhases) and the queued
// quarantine records into a Batch. When sealed phases are left for the
// next Batch, the committed global watermark is the oldest of them: after
// a restart their records are read again and sealed again, not taken for
// resolved.
func (s *Session[M]) build() *Batch[M] {
	take, bytes := s.batchPhases()
	b := &Batch[M]{Seals: make([]Sealed, take), Quarantined: map[markers.Reason]int{},
		Duplicates: s.dups, quarantined: len(s.quar), lanes: &s.lanes, bytes: bytes}
	s.dups = Duplicates{}
	s.sealedBytes -= bytes
	n := len(s.quar) + take*len(s.lanes.all)
	for _, seal := range s.sealed[:take] {
		if ph := s.phases[seal.Phase]; ph != nil {
			n += len(ph.items)
		}
	}
	b.Writes = make([]Write[M], 0, n)
	skip := make(map[uint64]bool, take)
	var streamed int // records of the first phase a StreamBatch wrote
	if take > 0 {
		streamed = s.stream.sealing(s.sealed[0].Phase)
	}
	for i, seal := range s.sealed[:take] {
		skip[seal.Phase] = true
		b.Seals[i] = Sealed{Seal: seal, PerTopic: make(map[string]int, len(s.cfg.InputTopics))}
		s.appendPhase(b, &b.Seals[i], streamed)
		streamed = 0
	}
	for _, q := range s.quar {
		b.Writes = append(b.Writes, Write[M]{Kind: Quarantine, Partition: q.partition, Msg: q.msg, Reason: q.reason})
		b.Quarantined[q.reason]++
	}
	global := s.tracker.Global()
	if take < len(s.sealed) {
		global = s.sealed[take].Phase
	}
	b.global = global
	b.Offsets = make([]Offset, len(s.byP))
	for i, ps := range s.byP {
		cm := commitMeta{global: max(global, ps.sealedBelow), consumed: ps.next}
		if s.tracker.Idle(ps.p) {
			cm.idle, cm.idleLSO = true, ps.lag.lso
		}
		cm.marker, cm.hasMarker = s.markers.Last(ps.key)
		b.Offsets[i] = Offset{TP: ps.TP, Offset: s.commitOffset(ps, skip), Metadata: cm.String()}
	}
	return b
}

// batchPhases returns how many of the oldest sealed phases the next Batch
// takes, and their bytes: up to Config.BatchBytes, at least one, and at
// least every phase up to that of a queued late record. A Batch cuts only
// above every late record it commits, so that the committed global
// watermark (the first phase left) stays above them: read again after a
// restart, a late record is resolved, not buffered a second time.
func (s *Session[M]) batchPhases() (int, int64) {
	var late uint64 // highest late phase + 1
	for _, q := range s.quar {
		late = max(late, q.latePhase)
	}
	var bytes int64
	for i, seal := range s.sealed {
		var n int64
		if ph := s.phases[seal.Phase]; ph != nil {
			n = ph.bytes
		}
		if i > 0 && s.cfg.BatchBytes > 0 && bytes+n > s.cfg.BatchBytes && seal.Phase >= late {
			return i, bytes
		}
		bytes += n
	}
	return len(s.sealed), bytes
}

// appendPhase appends a sealed phase's data records from its from-th on
// (those before were streamed), then one marker per lane (MARKERS.md 3.2,
// 3.3): a lane's marker counts the lane's records of the phase only, so
// each writer's stream on a shared partition checks on its own. Counts go
// to one flat table of lanes x topics, and one sources map serves every
// marker in turn (AppendOutput copies it into the value).
func (s *Session[M]) appendPhase(b *Batch[M], sl *Sealed, from int) {
	ph := s.phases[sl.Phase]
	topics := len(s.cfg.InputTopics)
	counts := make([]int64, len(s.lanes.all)*topics)
	sl.header = markers.AppendPhase(nil, sl.Phase)
	sl.markers, sl.lanes = make([][]byte, len(s.lanes.all)), &s.lanes
	if ph != nil {
		for i, it := range ph.items {
			ps := s.byP[it.p]
			l := s.lanes.of(ps, it.out)
			if l >= 0 {
				counts[int(l)*topics+ps.topic]++
			}
			sl.PerTopic[ps.Topic]++
			if i >= from {
				b.Writes = append(b.Writes, s.dataWrite(it, l, sl))
			}
		}
		b.Records += len(ph.items)
	}
	sources := make(map[string]int64, topics)
	for i, l := range s.lanes.all {
		if sl.Phase < l.from {
			continue // marked by the task's earlier owner
		}
		var count int64
		for j, t := range s.cfg.InputTopics {
			sources[t] = counts[i*topics+j]
			count += sources[t]
		}
		m := markers.Marker{
			Phase: sl.Phase, Partition: l.Partition, Count: count, HasCount: true, Sources: sources,
			WatermarkMs: sl.WatermarkMs, SealedBy: markers.SealedBy(sl.By.String()), Emitter: s.cfg.Emitter,
			Task: l.Task, Writers: l.Writers,
		}
		sl.markers[i] = m.AppendOutput(nil)
		b.Writes = append(b.Writes, Write[M]{Kind: MarkerWrite, Partition: l.Partition, Seal: sl, slot: l.slot})
		b.Markers++
	}
}

// dataWrite is the Write of a buffered record of lane l (-1: none) in the
// phase sl.
func (s *Session[M]) dataWrite(it item[M], l int32, sl *Sealed) Write[M] {
	w := Write[M]{Kind: Data, Partition: it.out, Msg: it.msg, Seal: sl}
	if l >= 0 {
		w.slot = s.lanes.all[l].slot
	}
	return w
}
