package markers

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// fixWriters records W from the partition's first "v":2 marker (MARKERS.md
// section 3.3, M1) and drops the lanes opened by data records of a task
// not below W (M2): their records are reported once per lane and
// discarded.
func (r *Reader) fixWriters(off int64, w int32) {
	r.writers = w
	for _, task := range slices.Sorted(maps.Keys(r.lanes)) {
		if task < w {
			continue
		}
		l := r.lanes[task]
		r.report(nil, Malformed, off, l.cur, fmt.Sprintf("%d records of %s %d, not below writers %d, discarded",
			len(l.records), HeaderTask, task, w), nil)
		delete(r.lanes, task)
	}
}

// complete queues, in increasing order, every phase that rule M8 makes
// complete: every writer 0..W-1 has marked a phase at or above it.
func (r *Reader) complete() {
	if r.writers == 0 {
		return
	}
	var frontier uint64
	for task := range r.writers {
		l := r.lanes[task]
		if l == nil || !l.lastOK {
			return
		}
		if task == 0 || l.last < frontier {
			frontier = l.last
		}
	}
	parts := map[uint64][]*Phase{} // each writer's part of a complete phase, in task order
	for task := range r.writers {
		l := r.lanes[task]
		n := 0
		for n < len(l.done) && l.done[n].ID <= frontier {
			parts[l.done[n].ID] = append(parts[l.done[n].ID], l.done[n])
			l.done[n] = nil
			n++
		}
		l.done = l.done[n:]
	}
	for _, id := range slices.Sorted(maps.Keys(parts)) {
		r.crossDuplicates(parts[id])
		r.deliver(r.summary(id, parts[id]))
	}
}

// crossDuplicates reports a phasegate.id that two writers both wrote in
// one phase (M7), on the record of the higher task; duplicates within a
// writer were reported as they arrived.
func (r *Reader) crossDuplicates(parts []*Phase) {
	for i, p := range parts[1:] {
		for _, rec := range p.Records {
			meta, _ := Inspect(rec.Headers) // placed records passed Inspect
			if meta.ID == nil {
				continue
			}
			for _, q := range parts[:i+1] {
				if _, dup := q.ids[string(meta.ID)]; dup {
					r.vs = append(r.vs, &Violation{Kind: DuplicateID, Partition: r.partition, Offset: rec.Offset, Phase: p.ID,
						Task: p.Marker.Task, HasTask: true, Detail: fmt.Sprintf("%s %q also written by task %d", HeaderID, meta.ID, q.Marker.Task)})
					break
				}
			}
		}
	}
}

// summary builds the Phase of a complete phase with several writers from
// each writer's part.
func (r *Reader) summary(id uint64, parts []*Phase) *Phase {
	first := parts[0].Marker
	sum := Marker{Phase: id, Partition: r.partition, HasCount: true, Sources: map[string]int64{},
		Writers: r.writers, Task: -1, Emitter: first.Emitter, WatermarkMs: first.WatermarkMs}
	p := &Phase{ID: id, Markers: make([]TaskMarker, len(parts))}
	n := 0
	for _, part := range parts {
		n += len(part.Records)
	}
	p.Records = make([]Record, 0, n)
	for i, part := range parts {
		p.Records = append(p.Records, part.Records...)
		p.Markers[i] = TaskMarker{Marker: part.Marker, Offset: part.MarkerOffset}
		m := part.Marker
		sum.Count += m.Count
		for topic, n := range m.Sources {
			sum.Sources[topic] += n
		}
		sum.WatermarkMs = max(sum.WatermarkMs, m.WatermarkMs)
		if weakness(m.SealedBy) > weakness(sum.SealedBy) {
			sum.SealedBy = m.SealedBy
		}
		p.MarkerOffset = max(p.MarkerOffset, part.MarkerOffset)
	}
	slices.SortFunc(p.Records, func(a, b Record) int { return cmp.Compare(a.Offset, b.Offset) })
	p.Marker = sum
	return p
}

// weakness orders sealed_by from the strongest guarantee to the weakest.
func weakness(s SealedBy) int {
	switch s {
	case SealedByMarkers:
		return 1
	case SealedByWatermark:
		return 2
	case SealedByIdle:
		return 3
	case SealedByTimeout:
		return 4
	}
	return 0
}

// endSeveral applies End to a partition with several writers: a lane's
// data without its marker, and every marked phase some writer never
// reached, are MissingMarker and discarded (M5, M8), except that a reader
// proving phases (C4) skips the phases it could not prove whole.
func (r *Reader) endSeveral() {
	tasks := slices.Sorted(maps.Keys(r.lanes))
	for _, task := range tasks {
		l := r.lanes[task]
		if l.pending {
			n := len(l.records)
			r.report(l, MissingMarker, l.records[n-1].Offset, l.cur, "no marker before the end", nil)
			r.vs[len(r.vs)-1].Got = int64(n)
			l.drop()
		}
	}
	type open struct {
		got    int64
		offset int64
		marked []int32
	}
	incomplete := map[uint64]*open{}
	for _, task := range tasks {
		l := r.lanes[task]
		for _, p := range l.done {
			o := incomplete[p.ID]
			if o == nil {
				o = &open{}
				incomplete[p.ID] = o
			}
			o.got += int64(len(p.Records))
			o.offset = max(o.offset, p.MarkerOffset)
			o.marked = append(o.marked, task)
		}
		clear(l.done)
		l.done = l.done[:0]
	}
	wholeFrom := r.wholeFrom()
	for _, id := range slices.Sorted(maps.Keys(incomplete)) {
		o := incomplete[id]
		if r.proving && id < wholeFrom {
			// C4: a phase this reader could never prove whole (a writer
			// has no marker since the start, or its first one is later):
			// skipped, not missing.
			r.done, r.hasDone = id, true
			r.skips = append(r.skips, Skip{Phase: id, Records: int(o.got)})
			continue
		}
		var missing []int32
		for task := range r.writers {
			if l := r.lanes[task]; (l == nil || !l.lastOK || l.last < id) && !slices.Contains(o.marked, task) {
				missing = append(missing, task)
			}
		}
		r.vs = append(r.vs, &Violation{Kind: MissingMarker, Partition: r.partition, Offset: o.offset, Phase: id, Got: o.got,
			Detail: "phase not complete at the end: no marker for phase >= " + strconv.FormatUint(id, 10) + " from tasks " + fmt.Sprint(missing)})
	}
}
