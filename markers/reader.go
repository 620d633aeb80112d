package markers

// Record is one record of an output partition, as a join consumer reads it.
// A nil Key is a null key; an empty non-nil Key is an empty one, which a
// marker may not have (MARKERS.md section 3): map the client's null key to
// nil.
type Record struct {
	Key, Value []byte
	Headers    []Header
	Offset     int64
}

// Phase is one whole phase of one output partition: its data records in
// offset order, then the marker that closed it.
type Phase struct {
	ID      uint64
	Records []Record
	// Marker is, on a one-writer partition, the marker that closed the
	// phase. On a partition with several writers (MARKERS.md section 3.3)
	// it is a summary, not a record any writer wrote: Count and Sources
	// add up the writers' markers of this phase, WatermarkMs is the
	// highest of them, SealedBy the weakest (timeout, then idle, then
	// watermark, then markers), Emitter that of the lowest task, Writers
	// the partition's writer count and Task -1. Each writer's own marker
	// is in Markers.
	Marker Marker
	// MarkerOffset is the offset of the marker that closed the phase; with
	// several writers, of the last (highest offset) of its markers.
	MarkerOffset int64
	// Markers holds, on a partition with several writers, the marker of
	// each writer that marked this phase, in task order; a writer whose
	// marker skipped the phase (it had no data of it) has none. Nil on a
	// one-writer partition.
	Markers []TaskMarker

	ids map[string]struct{} // a writer's phasegate.id values of the phase, until it is complete
}

// TaskMarker is one writer's marker of a phase and its offset.
type TaskMarker struct {
	Marker Marker
	Offset int64
}

// Reader checks one output partition against MARKERS.md sections 3.2 and
// 3.3 and hands back whole phases. Create it with NewReader, call Feed for
// every record of the partition in offset order (read with
// isolation.level=read_committed), then End. Not safe for concurrent use;
// use one Reader per partition.
//
// On a partition with several writers one record can complete several
// phases (MARKERS.md section 3.3, rule M8): Feed returns the first and Next
// the others, so call Next until it returns nil after every Feed and after
// End. On a one-writer partition Feed returns every phase and Next always
// returns nil. A phase never collected stays queued: the next Feed returns
// it before later ones, so none is lost, only late.
//
// The Reader keeps the Records it is fed, and the slices in them, until it
// returns them in a Phase or discards them: do not reuse their buffers.
//
// Recovery after a violation, so that one fault is reported once and the
// reader goes on checking what follows. "Lane" is one writer's records
// (section 3.3); a one-writer partition has one lane, and every rule below
// that names the lane is, there, the rule of section 3.2.
//   - A record the reader cannot place is dropped as if it were not there:
//     one whose phasegate headers fail Inspect, a data record without
//     phasegate.phase, a marker whose value fails DecodeOutputMarker or
//     whose JSON phase differs from its phasegate.phase header (Malformed),
//     a record of the other kind of partition (a phasegate.task header or
//     a "v":2 marker on a one-writer partition, or their absence on a
//     partition with several writers), a bad phasegate.task, a task not
//     below the writer count, a "v":2 marker whose writers differs from
//     the partition's (Malformed, M1 and M2), a marker not above its
//     lane's previous marker (PhaseBackwards), a data record of a phase
//     its lane already marked (DataAfterMarker), and a data record below
//     its lane's pending data's phase (PhaseBackwards).
//   - A data record without phasegate.id or phasegate.source or with a bad
//     phasegate.source, or a marker with a non-null key or another
//     partition in its JSON, is reported (Malformed) and then used as usual.
//   - A repeated phasegate.id in one phase, within a lane or across lanes,
//     is reported (DuplicateID) and the record is kept in the phase, as it
//     is on the partition.
//   - A lane's data of phase N without its marker (MissingMarker) is
//     discarded, never returned; reading goes on with the record that
//     revealed it.
//   - A marker below its lane's pending data's phase (PhaseBackwards) still
//     closes its own phase; the pending data stays pending.
//   - A marker whose count is wrong (CountMismatch) still closes its phase
//     for its lane; on a one-writer partition Feed returns that phase with
//     the violation.
//   - At End, a phase that some writer never marked is discarded
//     (MissingMarker), never returned.
//
// Where it starts and commits (MARKERS.md section 6): NewReader reads a
// partition from offset 0; NewReaderAt starts at a Checkpoint, with or
// without metadata. Checkpoint says what to commit after the phases
// returned so far were processed; Skipped reports the phases a reader that
// started without a checkpoint could not prove whole (rule C4).
type Reader struct {
	partition int32
	kind      writerKind
	writers   int32           // W, once a "v":2 marker fixed it; 0 before
	solo      lane            // the lane of a one-writer partition
	lanes     map[int32]*lane // the lanes of a partition with several writers
	ready     []*Phase        // complete phases not yet returned
	vs        []*Violation    // violations of the current Feed or End

	// Section 6. done is the highest phase handed over (taken from Feed
	// or Next, or skipped), when hasDone; a reader started at a checkpoint with
	// metadata starts with its "done" and drops every record of a phase
	// at or below floor. proving is set for a start without metadata away
	// from offset 0 (rule C4). next is the offset after the last record
	// fed, or the start offset.
	done, floor       uint64
	hasDone, hasFloor bool
	proving           bool
	next              int64
	skips             []Skip
}

// writerKind is what the first placeable record said about the partition.
type writerKind uint8

const (
	kindUnknown writerKind = iota
	kindOne                // one writer: version 1, section 3.2
	kindSeveral            // several writers: section 3.3
)

// NewReader returns a Reader for output partition partition; markers must
// name that partition in their JSON.
func NewReader(partition int32) *Reader {
	return &Reader{partition: partition, solo: lane{task: -1, ids: make(map[string]struct{})}}
}

// NewReaderAt returns a Reader for output partition partition that starts
// at from (MARKERS.md section 6): from.Offset is the first offset it will
// be fed from, from.Metadata the metadata committed with it ("" when there
// is none). With checkpoint metadata it drops the records of the phases
// handed over before (rule C3); without, at offset 0 it is NewReader, and
// anywhere else it returns only the phases it can prove whole (rule C4).
func NewReaderAt(partition int32, from Checkpoint) *Reader {
	r := NewReader(partition)
	r.next = from.Offset
	if done, hasDone, ok := ParseCheckpointMetadata(from.Metadata); ok {
		r.floor, r.hasFloor = done, hasDone
		r.done, r.hasDone = done, hasDone
	} else {
		r.proving = from.Offset != 0
	}
	return r
}

// Feed takes the partition's next record in offset order. It returns the
// first phase that rec completes (on a one-writer partition: rec is an
// accepted marker and the phase is its own; a phase with no data on this
// partition comes back with no Records), else nil; Next returns the others.
// Broken rules come back as one *Violation or, when one record breaks
// several, as an errors.Join of them; find them with errors.As or
// Violations. Feed may return a phase and a violation.
func (r *Reader) Feed(rec Record) (*Phase, error) {
	r.next = max(r.next, rec.Offset+1)
	meta, err := Inspect(rec.Headers)
	switch {
	case err != nil:
		r.report(nil, Malformed, rec.Offset, meta.Phase, "headers", err)
	case meta.Marker:
		r.marker(rec, meta.Phase)
	default:
		r.data(rec, &meta)
	}
	vs := r.vs
	r.vs = nil // the returned violations belong to the caller
	return r.Next(), joinViolations(vs)
}

// Next returns the next complete phase that Feed did not return, or nil.
func (r *Reader) Next() *Phase {
	if len(r.ready) == 0 {
		return nil
	}
	p := r.ready[0]
	r.ready[0] = nil
	r.ready = r.ready[1:]
	r.done, r.hasDone = p.ID, true // handed over (MARKERS.md section 6)
	return p
}

// End is called after the partition's last record. Data of a phase whose
// marker never came, and on a partition with several writers every phase
// not complete, is a MissingMarker violation and is discarded, as if it had
// never been read; but a reader that started without a checkpoint
// (NewReaderAt, rule C4) reports a phase it could never prove whole as
// skipped (Skipped) instead. A second End returns nil. Feed may be called
// again after End.
func (r *Reader) End() error {
	if r.kind == kindSeveral {
		r.endSeveral()
	} else if r.solo.pending {
		n := len(r.solo.records)
		r.vs = append(r.vs, &Violation{Kind: MissingMarker, Partition: r.partition, Offset: r.solo.records[n-1].Offset,
			Phase: r.solo.cur, Got: int64(n), Detail: "no marker before the end"})
		r.solo.drop()
	}
	vs := r.vs
	r.vs = nil
	return joinViolations(vs)
}

func (r *Reader) data(rec Record, meta *Meta) {
	if !meta.HasPhase {
		r.report(nil, Malformed, rec.Offset, 0, "data record without "+HeaderPhase, nil)
		return
	}
	l := r.dataLane(rec.Offset, meta)
	if l == nil || r.hasFloor && meta.Phase <= r.floor { // C3: handed over before
		return
	}
	l.data(r, rec, meta)
}

func (r *Reader) marker(rec Record, hdrPhase uint64) {
	m, err := DecodeOutputMarker(rec.Value)
	if err != nil {
		r.report(nil, Malformed, rec.Offset, hdrPhase, "marker value", err)
		return
	}
	if m.Phase != hdrPhase {
		r.report(nil, Malformed, rec.Offset, hdrPhase, "marker JSON phase "+itoa(int64(m.Phase))+" differs from "+HeaderPhase, nil)
		return
	}
	l := r.markerLane(rec.Offset, &m)
	if l == nil {
		return
	}
	if r.hasFloor && m.Phase <= r.floor { // C3: handed over before
		l.markerBelowFloor(r, rec.Offset, m.Phase)
		return
	}
	p := l.marker(r, rec, m)
	switch {
	case p == nil:
	case r.kind == kindOne:
		r.deliver(p)
	default:
		l.done = append(l.done, p)
		r.complete()
	}
}

// dataLane places a data record in its lane (MARKERS.md section 3.3, M2),
// or reports why it cannot and returns nil.
func (r *Reader) dataLane(off int64, meta *Meta) *lane {
	if meta.Task == nil {
		if r.kind == kindSeveral {
			r.report(nil, Malformed, off, meta.Phase, "data record without "+HeaderTask+" on a partition with several writers", nil)
			return nil
		}
		r.kind = kindOne
		return &r.solo
	}
	task, err := ParseTask(meta.Task)
	switch {
	case err != nil:
		r.report(nil, Malformed, off, meta.Phase, "", err)
		return nil
	case r.kind == kindOne:
		r.report(nil, Malformed, off, meta.Phase, HeaderTask+" on a one-writer partition", nil)
		return nil
	case r.writers > 0 && task >= r.writers:
		r.report(nil, Malformed, off, meta.Phase, HeaderTask+" "+itoa(int64(task))+" is not below writers "+itoa(int64(r.writers)), nil)
		return nil
	}
	r.kind = kindSeveral
	return r.lane(task)
}

// markerLane places a decoded marker in its lane (M1, M2), or reports why
// it cannot and returns nil.
func (r *Reader) markerLane(off int64, m *Marker) *lane {
	if m.Writers == 0 {
		if r.kind == kindSeveral {
			r.report(nil, Malformed, off, m.Phase, `"v":1 marker on a partition with several writers`, nil)
			return nil
		}
		r.kind = kindOne
		return &r.solo
	}
	switch {
	case r.kind == kindOne:
		r.report(nil, Malformed, off, m.Phase, `"v":2 marker on a one-writer partition`, nil)
		return nil
	case r.writers > 0 && m.Writers != r.writers:
		r.report(nil, Malformed, off, m.Phase, "marker says writers "+itoa(int64(m.Writers))+", the partition has "+itoa(int64(r.writers)), nil)
		return nil
	case r.writers == 0:
		r.fixWriters(off, m.Writers)
	}
	r.kind = kindSeveral
	return r.lane(m.Task)
}

func (r *Reader) lane(task int32) *lane {
	if r.lanes == nil {
		r.lanes = make(map[int32]*lane)
	}
	l := r.lanes[task]
	if l == nil {
		l = &lane{task: task, ids: make(map[string]struct{})}
		r.lanes[task] = l
	}
	return l
}

func (r *Reader) report(l *lane, k ViolationKind, off int64, ph uint64, detail string, err error) {
	v := &Violation{Kind: k, Partition: r.partition, Offset: off, Phase: ph, Detail: detail, Err: err}
	if l != nil && l.task >= 0 {
		v.Task, v.HasTask = l.task, true
	}
	r.vs = append(r.vs, v)
}

func (r *Reader) reportPrior(l *lane, k ViolationKind, off int64, ph, prior uint64, detail string) {
	r.report(l, k, off, ph, detail, nil)
	r.vs[len(r.vs)-1].Prior = prior
}
