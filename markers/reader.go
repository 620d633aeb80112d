package markers

import (
	"fmt"
	"strconv"
)

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
	ID           uint64
	Records      []Record
	Marker       Marker
	MarkerOffset int64
}

// Reader checks one output partition against MARKERS.md section 3.2 and
// hands back whole phases. Create it with NewReader, call Feed for every
// record of the partition in offset order (read with
// isolation.level=read_committed), then End. Not safe for concurrent use;
// use one Reader per partition.
//
// The Reader keeps the Records it is fed, and the slices in them, until it
// returns them in a Phase or discards them: do not reuse their buffers.
//
// Recovery after a violation, so that one fault is reported once and the
// reader goes on checking what follows:
//   - A record the reader cannot place is dropped as if it were not there:
//     one whose phasegate headers fail Inspect, a data record without
//     phasegate.phase, a marker whose value fails DecodeOutputMarker or
//     whose JSON phase differs from its phasegate.phase header (Malformed),
//     a marker not above the previous marker (PhaseBackwards), a data record
//     of an already marked phase (DataAfterMarker), and a data record below
//     the pending data's phase (PhaseBackwards).
//   - A data record without phasegate.id or phasegate.source or with a bad
//     phasegate.source, or a marker with a non-null key or another
//     partition in its JSON, is reported (Malformed) and then used as usual.
//   - A repeated phasegate.id is reported (DuplicateID) and the record is
//     kept in the phase, as it is on the partition.
//   - Data of phase N without its marker (MissingMarker) is discarded,
//     never returned; reading goes on with the record that revealed it.
//   - A marker below the pending data's phase (PhaseBackwards) still closes
//     its own phase; the pending data stays pending.
//   - A marker whose count is wrong (CountMismatch) still closes its phase,
//     and Feed returns that phase with the violation.
type Reader struct {
	partition int32
	lastOK    bool   // a marker has been accepted
	last      uint64 // phase of the last accepted marker
	pending   bool   // data of phase cur has been read since the last marker
	cur       uint64
	records   []Record
	ids       map[string]struct{} // phasegate.id values of the pending phase
	vs        []*Violation        // violations of the current Feed
}

// NewReader returns a Reader for output partition partition; markers must
// name that partition in their JSON.
func NewReader(partition int32) *Reader {
	return &Reader{partition: partition, ids: make(map[string]struct{})}
}

// Feed takes the partition's next record in offset order. It returns the
// phase that rec closes when rec is an accepted marker (every accepted
// marker closes one phase; a phase with no data on this partition comes
// back with no Records), else nil. Broken rules come back as one *Violation
// or, when one record breaks several, as an errors.Join of them; find them
// with errors.As or Violations. Feed may return a phase and a violation.
func (r *Reader) Feed(rec Record) (*Phase, error) {
	meta, err := Inspect(rec.Headers)
	var p *Phase
	switch {
	case err != nil:
		r.report(Malformed, rec.Offset, meta.Phase, "headers", err)
	case meta.Marker:
		p = r.marker(rec, meta.Phase)
	default:
		r.data(rec, &meta)
	}
	vs := r.vs
	r.vs = nil // the returned violations belong to the caller
	return p, joinViolations(vs)
}

// End is called after the partition's last record. Data of a phase whose
// marker never came is a MissingMarker violation and is discarded, as if
// it had never been read; a second End returns nil. Feed may be called
// again after End.
func (r *Reader) End() error {
	if !r.pending {
		return nil
	}
	n := len(r.records)
	v := &Violation{Kind: MissingMarker, Partition: r.partition, Offset: r.records[n-1].Offset,
		Phase: r.cur, Got: int64(n), Detail: "no marker before the end"}
	r.drop()
	return v
}

func (r *Reader) data(rec Record, meta *Meta) {
	if !meta.HasPhase {
		r.report(Malformed, rec.Offset, 0, "data record without "+HeaderPhase, nil)
		return
	}
	ph := meta.Phase
	switch {
	case r.lastOK && ph <= r.last:
		r.reportPrior(DataAfterMarker, rec.Offset, ph, r.last, "after the marker for phase "+strconv.FormatUint(r.last, 10))
		return
	case r.pending && ph < r.cur:
		r.reportPrior(PhaseBackwards, rec.Offset, ph, r.cur, "data after data of phase "+strconv.FormatUint(r.cur, 10))
		return
	case r.pending && ph > r.cur:
		r.missing(rec.Offset, "data of phase "+strconv.FormatUint(ph, 10)+" came first")
	}
	r.checkOutputData(rec.Offset, ph, meta)
	if meta.ID != nil {
		if _, dup := r.ids[string(meta.ID)]; dup {
			r.report(DuplicateID, rec.Offset, ph, fmt.Sprintf("%s %q seen twice", HeaderID, meta.ID), nil)
		} else {
			r.ids[string(meta.ID)] = struct{}{}
		}
	}
	r.pending, r.cur = true, ph
	r.records = append(r.records, rec)
}

// checkOutputData applies MARKERS.md section 2: output data records carry
// phasegate.phase, phasegate.id and phasegate.source.
func (r *Reader) checkOutputData(off int64, ph uint64, meta *Meta) {
	switch {
	case meta.ID == nil && meta.Source == nil:
		r.report(Malformed, off, ph, "data record without "+HeaderID+" and "+HeaderSource, nil)
	case meta.ID == nil:
		r.report(Malformed, off, ph, "data record without "+HeaderID, nil)
	case meta.Source == nil:
		r.report(Malformed, off, ph, "data record without "+HeaderSource, nil)
	}
	if meta.Source != nil {
		if _, _, _, err := parseSource(meta.Source); err != nil {
			r.report(Malformed, off, ph, "", err)
		}
	}
}

func (r *Reader) marker(rec Record, hdrPhase uint64) *Phase {
	m, err := DecodeOutputMarker(rec.Value)
	if err != nil {
		r.report(Malformed, rec.Offset, hdrPhase, "marker value", err)
		return nil
	}
	if m.Phase != hdrPhase {
		r.report(Malformed, rec.Offset, hdrPhase, fmt.Sprintf("marker JSON phase %d differs from %s", m.Phase, HeaderPhase), nil)
		return nil
	}
	ph := m.Phase
	if r.lastOK && ph <= r.last {
		r.reportPrior(PhaseBackwards, rec.Offset, ph, r.last, "marker after the marker for phase "+strconv.FormatUint(r.last, 10))
		return nil
	}
	if rec.Key != nil {
		r.report(Malformed, rec.Offset, ph, "marker with a non-null key", nil)
	}
	if m.Partition != r.partition {
		r.report(Malformed, rec.Offset, ph, fmt.Sprintf("marker names partition %d", m.Partition), nil)
	}
	p := &Phase{ID: ph, Marker: m, MarkerOffset: rec.Offset}
	switch {
	case r.pending && ph < r.cur:
		r.reportPrior(PhaseBackwards, rec.Offset, ph, r.cur, "marker after data of phase "+strconv.FormatUint(r.cur, 10))
	case r.pending && ph > r.cur:
		r.missing(rec.Offset, "marker for phase "+strconv.FormatUint(ph, 10)+" came first")
	case r.pending: // ph == r.cur: the marker closes the pending data
		p.Records = r.records
		r.records = nil
		r.pending = false
		clear(r.ids)
	}
	if got := int64(len(p.Records)); m.Count != got {
		r.vs = append(r.vs, &Violation{Kind: CountMismatch, Partition: r.partition, Offset: rec.Offset,
			Phase: ph, Want: m.Count, Got: got})
	}
	r.lastOK, r.last = true, ph
	return p
}

// missing reports and discards the pending phase.
func (r *Reader) missing(off int64, detail string) {
	r.vs = append(r.vs, &Violation{Kind: MissingMarker, Partition: r.partition, Offset: off,
		Phase: r.cur, Got: int64(len(r.records)), Detail: detail})
	r.drop()
}

func (r *Reader) drop() {
	clear(r.records) // let the discarded records' buffers go
	r.records = r.records[:0]
	r.pending = false
	clear(r.ids)
}

func (r *Reader) report(k ViolationKind, off int64, ph uint64, detail string, err error) {
	r.vs = append(r.vs, &Violation{Kind: k, Partition: r.partition, Offset: off, Phase: ph, Detail: detail, Err: err})
}

func (r *Reader) reportPrior(k ViolationKind, off int64, ph, prior uint64, detail string) {
	r.vs = append(r.vs, &Violation{Kind: k, Partition: r.partition, Offset: off, Phase: ph, Prior: prior, Detail: detail})
}
