package markers

import (
	"fmt"
	"math"
	"strconv"
)

// lane is the state of one writer's records on a partition: the rules of
// MARKERS.md section 3.2, which section 3.3 applies per writer (M3 to M6).
type lane struct {
	task    int32  // the writer's task; -1 for the lane of a one-writer partition
	lastOK  bool   // a marker has been accepted
	last    uint64 // phase of the last accepted marker
	pending bool   // data of phase cur has been read since the last marker
	cur     uint64
	records []Record
	ids     map[string]struct{} // phasegate.id values of the pending phase
	// done holds, on a partition with several writers, the lane's marked
	// phases that are not complete yet (M8), in increasing phase order.
	done []*Phase
	// A reader that started without a checkpoint (MARKERS.md section 6,
	// rule C4) knows the lane's parts of phases >= whole are whole once
	// anchored: the lane's first marker read was for whole, with its count
	// read, or for whole-1.
	anchored bool
	whole    uint64
}

func (l *lane) data(r *Reader, rec Record, meta *Meta) {
	ph := meta.Phase
	switch {
	case l.lastOK && ph <= l.last:
		r.reportPrior(l, DataAfterMarker, rec.Offset, ph, l.last, "after the marker for phase "+strconv.FormatUint(l.last, 10))
		return
	case l.pending && ph < l.cur:
		r.reportPrior(l, PhaseBackwards, rec.Offset, ph, l.cur, "data after data of phase "+strconv.FormatUint(l.cur, 10))
		return
	case l.pending && ph > l.cur:
		l.missing(r, rec.Offset, "data of phase "+strconv.FormatUint(ph, 10)+" came first")
	}
	l.checkOutputData(r, rec.Offset, ph, meta)
	if meta.ID != nil {
		if _, dup := l.ids[string(meta.ID)]; dup {
			r.report(l, DuplicateID, rec.Offset, ph, fmt.Sprintf("%s %q seen twice", HeaderID, meta.ID), nil)
		} else {
			l.ids[string(meta.ID)] = struct{}{}
		}
	}
	l.pending, l.cur = true, ph
	l.records = append(l.records, rec)
}

// checkOutputData applies MARKERS.md section 2: output data records carry
// phasegate.phase, phasegate.id and phasegate.source.
func (l *lane) checkOutputData(r *Reader, off int64, ph uint64, meta *Meta) {
	switch {
	case meta.ID == nil && meta.Source == nil:
		r.report(l, Malformed, off, ph, "data record without "+HeaderID+" and "+HeaderSource, nil)
	case meta.ID == nil:
		r.report(l, Malformed, off, ph, "data record without "+HeaderID, nil)
	case meta.Source == nil:
		r.report(l, Malformed, off, ph, "data record without "+HeaderSource, nil)
	}
	if meta.Source != nil {
		if _, _, _, err := parseSource(meta.Source); err != nil {
			r.report(l, Malformed, off, ph, "", err)
		}
	}
}

// marker applies an accepted marker to the lane and returns the lane's
// phase it closes, or nil when the marker is dropped.
func (l *lane) marker(r *Reader, rec Record, m Marker) *Phase {
	ph := m.Phase
	if l.lastOK && ph <= l.last {
		r.reportPrior(l, PhaseBackwards, rec.Offset, ph, l.last, "marker after the marker for phase "+strconv.FormatUint(l.last, 10))
		return nil
	}
	if rec.Key != nil {
		r.report(l, Malformed, rec.Offset, ph, "marker with a non-null key", nil)
	}
	if m.Partition != r.partition {
		r.report(l, Malformed, rec.Offset, ph, fmt.Sprintf("marker names partition %d", m.Partition), nil)
	}
	p := &Phase{ID: ph, Marker: m, MarkerOffset: rec.Offset}
	switch {
	case l.pending && ph < l.cur:
		r.reportPrior(l, PhaseBackwards, rec.Offset, ph, l.cur, "marker after data of phase "+strconv.FormatUint(l.cur, 10))
	case l.pending && ph > l.cur:
		l.missing(r, rec.Offset, "marker for phase "+strconv.FormatUint(ph, 10)+" came first")
	case l.pending: // ph == l.cur: the marker closes the pending data
		p.Records = l.records
		l.records = nil
		l.pending = false
		if l.task >= 0 && len(l.ids) > 0 { // kept for the check across writers (M7)
			p.ids, l.ids = l.ids, make(map[string]struct{})
		} else {
			clear(l.ids)
		}
	}
	got := int64(len(p.Records))
	if r.proving && !l.anchored { // C4: the lane's first marker read
		l.anchored, l.whole = true, ph
		if got != m.Count && ph < math.MaxUint64 {
			l.whole = ph + 1
		}
	}
	if m.Count != got && (m.Count < got || !r.proving || l.lastOK) {
		r.report(l, CountMismatch, rec.Offset, ph, "", nil)
		v := r.vs[len(r.vs)-1]
		v.Want, v.Got = m.Count, got
	}
	l.lastOK, l.last = true, ph
	return p
}

// markerBelowFloor applies a marker of a phase a reader started at a
// checkpoint handed over before (MARKERS.md section 6, rule C3): it
// closes nothing and counts nothing, but is the lane's last marker for
// M3 and M4.
func (l *lane) markerBelowFloor(r *Reader, off int64, ph uint64) {
	switch {
	case l.lastOK && ph <= l.last:
		r.reportPrior(l, PhaseBackwards, off, ph, l.last, "marker after the marker for phase "+strconv.FormatUint(l.last, 10))
	case l.pending: // its data is above the floor, so above ph
		r.reportPrior(l, PhaseBackwards, off, ph, l.cur, "marker after data of phase "+strconv.FormatUint(l.cur, 10))
	default:
		l.lastOK, l.last = true, ph
	}
}

// missing reports and discards the pending phase.
func (l *lane) missing(r *Reader, off int64, detail string) {
	r.report(l, MissingMarker, off, l.cur, detail, nil)
	r.vs[len(r.vs)-1].Got = int64(len(l.records))
	l.drop()
}

func (l *lane) drop() {
	clear(l.records) // let the discarded records' buffers go
	l.records = l.records[:0]
	l.pending = false
	clear(l.ids)
}
