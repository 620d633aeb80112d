package markers

import (
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// fuzzStream turns bytes into a sequence of records for FuzzReader: each
// opcode byte, followed by its argument bytes, makes one record, well
// formed or broken in ways the flags choose. Phases stay in a small range
// (or near math.MaxUint64) so that orderings collide often.
func fuzzStream(b []byte) []Record {
	i := 0
	arg := func() byte {
		if i < len(b) {
			i++
			return b[i-1]
		}
		return 0
	}
	var recs []Record
	for i < len(b) {
		op := arg() % 8
		switch op {
		case 0, 1, 2, 7: // data record
			ph := uint64(arg() % 6)
			if op == 7 {
				ph = math.MaxUint64 - ph%3
			}
			id, flags := "id"+strconv.Itoa(int(arg()%8)), arg()
			var hs []Header
			if flags&1 == 0 {
				hs = append(hs, h(HeaderPhase, strconv.FormatUint(ph, 10)))
			}
			if flags&2 == 0 {
				hs = append(hs, h(HeaderID, id))
			}
			switch {
			case flags&4 != 0:
			case flags&8 != 0:
				hs = append(hs, h(HeaderSource, "in/x/1"))
			default:
				hs = append(hs, h(HeaderSource, "in/0/1"))
			}
			if flags&16 != 0 { // a writer of a partition with several (section 3.3)
				hs = append(hs, h(HeaderTask, strconv.Itoa(int(flags>>5)%3)))
			}
			recs = append(recs, Record{Key: []byte(id), Headers: hs})
		case 3, 4: // marker record
			ph, count, flags := uint64(arg()%6), int64(arg()%4), arg()
			if op == 4 && flags&64 != 0 {
				ph = math.MaxUint64 - ph%3
			}
			recs = append(recs, mkWith(ph, count, func(r *Record, m *Marker) {
				if flags&1 != 0 {
					r.Key = []byte{}
				}
				if flags&2 != 0 {
					m.Partition++
				}
				if flags&4 != 0 {
					r.Headers[1].Value = AppendPhase(nil, ph+1)
				}
				if flags&8 != 0 {
					r.Value = m.AppendInput(nil)
				}
				if flags&16 != 0 {
					r.Headers = r.Headers[:1]
				}
				if flags&32 != 0 {
					r.Headers[0].Value = []byte("2")
				}
				if flags&128 != 0 { // a "v":2 marker (section 3.3)
					a := arg()
					m.Task, m.Writers = int32(a%3), 2+int32(a>>2)%2
					if flags&8 == 0 {
						r.Value = nil
					}
				}
			}))
		case 5: // arbitrary headers
			n := int(arg() % 32)
			end := min(i+n, len(b))
			recs = append(recs, Record{Headers: fuzzHeaders(b[i:end])})
			i = end
		case 6: // marker headers with an arbitrary value
			ph, n := uint64(arg()%6), int(arg()%64)
			end := min(i+n, len(b))
			recs = append(recs, Record{Headers: AppendMarkerHeaders[Header](nil, AppendPhase(nil, ph)), Value: b[i:end]})
			i = end
		}
	}
	for j := range recs {
		recs[j].Offset = int64(j)
	}
	return recs
}

// validStream writes, from b, what phasegate writes on one output
// partition: phases in increasing order, some skipped, some empty with
// count 0, each one's records (unique ids) and then its marker. It returns
// the records and, per marker, the phase and its record offsets.
func validStream(b []byte) ([]Record, []got) {
	var recs []Record
	var want []got
	ph := uint64(0)
	for _, c := range b {
		ph += uint64(c%3) + 1
		n := int(c/3) % 6
		g := got{ID: ph}
		for j := 0; j < n; j++ {
			g.Offsets = append(g.Offsets, int64(len(recs)))
			recs = append(recs, d(ph, "id"+strconv.Itoa(j)))
			recs[len(recs)-1].Offset = int64(len(recs) - 1)
		}
		m := mk(ph, int64(n))
		m.Offset = int64(len(recs))
		recs = append(recs, m)
		want = append(want, g)
	}
	return recs, want
}

func FuzzReader(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{0, 3, 14, 200, 7, 0, 1, 2})
	f.Add([]byte{1, 0, 5, 1, 0, 0, 5, 2, 0, 3, 5, 2, 0})      // data, data, marker
	f.Add([]byte{1, 0, 5, 1, 0, 3, 6, 0, 0})                  // missing marker
	f.Add([]byte{1, 3, 5, 0, 0, 3, 5, 0, 0, 3, 4, 0, 0})      // repeated and backwards markers
	f.Add([]byte{1, 0, 2, 1, 0, 3, 2, 1, 0, 0, 2, 1, 0})      // data after marker
	f.Add([]byte{1, 3, 2, 1, 63, 5, 4, 1, 'x', 6, 2, 3, '{'}) // broken markers and headers
	f.Add([]byte{1, 7, 0, 1, 0, 4, 0, 1, 64, 7, 1, 1, 0})     // phases near MaxUint64
	f.Add([]byte{2, 2, 7, 1, 9, 0, 3, 200, 17, 250})          // several writers, valid
	f.Add([]byte{2, 3, 0, 0, 255, 255, 1, 2, 3, 4, 5, 6})     // several writers, valid
	f.Add([]byte{1, 0, 2, 1, 16, 3, 2, 1, 128, 0, 0, 2, 1, 48, 3, 2, 1, 128, 1, 3, 3, 0, 128, 4})
	f.Add([]byte{1, 0, 1, 1, 16, 3, 1, 0, 128, 0, 0, 2, 2, 80, 3, 2, 0, 128, 4, 3, 2, 0, 0}) // several writers mixed with one
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		switch {
		case b[0]&3 == 0:
			checkValid(t, b[1:])
			return
		case b[0]&3 == 2:
			checkValidSeveral(t, b[1:])
			return
		}
		checkAny(t, fuzzStream(b[1:]))
	})
}

// checkValid: a stream as phasegate writes it gives every phase back and
// no violation.
func checkValid(t *testing.T, b []byte) {
	recs, want := validStream(b)
	r := NewReader(testPartition)
	var phases []got
	for _, rec := range recs {
		p, err := r.Feed(rec)
		if err != nil {
			t.Fatalf("valid stream, offset %d: %v", rec.Offset, err)
		}
		if p != nil {
			phases = append(phases, summarize(t, p))
		}
	}
	if err := r.End(); err != nil {
		t.Fatalf("valid stream: End: %v", err)
	}
	if !reflect.DeepEqual(phases, want) {
		t.Fatalf("phases = %+v\nwant %+v", phases, want)
	}
}

// checkAny: whatever the stream, the Reader never panics, returns phases
// in increasing order holding only their own records, never returns a
// record twice, and explains with a violation every record it did not
// return.
func checkAny(t *testing.T, recs []Record) {
	r := NewReader(testPartition)
	var last uint64
	var any, violated bool
	returned := map[int64]bool{}
	mismatched := map[uint64]bool{} // phases with a CountMismatch so far
	check := func(err error) {
		if err == nil {
			return
		}
		violated = true
		vs := Violations(err)
		if len(vs) == 0 {
			t.Fatalf("error %v holds no *Violation", err)
		}
		for _, v := range vs {
			if v.Kind < CountMismatch || v.Kind > DuplicateID || v.Partition != testPartition {
				t.Fatalf("bad violation %+v", v)
			}
			if v.Kind == CountMismatch {
				mismatched[v.Phase] = true
			}
			_ = v.Error()
		}
	}
	for _, rec := range recs {
		p, err := r.Feed(rec)
		check(err)
		for ; p != nil; p = r.Next() {
			checkPhase(t, p, rec, returned, mismatched)
			if any && p.ID <= last {
				t.Fatalf("phase %d returned after phase %d", p.ID, last)
			}
			any, last = true, p.ID
		}
	}
	check(r.End())
	if p := r.Next(); p != nil {
		t.Fatalf("End completed phase %d", p.ID)
	}
	if !violated && len(returned) != len(recs) {
		t.Fatalf("no violation, but %d of %d records were not returned", len(recs)-len(returned), len(recs))
	}
}

// checkPhase checks one phase that the Feed of rec returned: its markers
// are its own and read by now, its records are its own, each returned
// once and before the phase completed, and a wrong count was reported.
func checkPhase(t *testing.T, p *Phase, rec Record, returned map[int64]bool, mismatched map[uint64]bool) {
	t.Helper()
	if p.Marker.Phase != p.ID || p.Markers == nil && p.MarkerOffset != rec.Offset || p.MarkerOffset > rec.Offset {
		t.Fatalf("phase %d with marker %+v at %d", p.ID, p.Marker, p.MarkerOffset)
	}
	if p.Markers == nil {
		returned[p.MarkerOffset] = true
	}
	for _, tm := range p.Markers {
		if tm.Marker.Phase != p.ID || tm.Offset > rec.Offset || returned[tm.Offset] {
			t.Fatalf("phase %d with writer marker %+v at %d", p.ID, tm.Marker, tm.Offset)
		}
		returned[tm.Offset] = true
	}
	if int64(len(p.Records)) != p.Marker.Count && !mismatched[p.ID] {
		t.Fatalf("phase %d has %d records, marker count %d, no CountMismatch", p.ID, len(p.Records), p.Marker.Count)
	}
	for _, pr := range p.Records {
		m, _ := Inspect(pr.Headers)
		if !m.HasPhase || m.Phase != p.ID || m.Marker {
			t.Fatalf("phase %d holds record %+v", p.ID, pr)
		}
		if returned[pr.Offset] || pr.Offset > rec.Offset {
			t.Fatalf("record at %d returned twice or after its marker", pr.Offset)
		}
		returned[pr.Offset] = true
	}
}

func hasKind(err error, k ViolationKind) bool {
	for _, v := range Violations(err) {
		if v.Kind == k {
			return true
		}
	}
	return false
}

// validSeveral writes, from b, what W tasks write on one output partition
// with several writers (MARKERS.md section 3.3): each writer's records
// follow section 3.2 on their own, the writers' records interleave as b
// says, and at the end every writer marks one common last phase. It
// returns the records and every phase as the Reader must return it.
func validSeveral(b []byte) ([]Record, []got) {
	w := 2 + int32(b[0]%3)
	b = b[1:]
	type lane struct {
		ph   uint64
		left []Record // records of the lane's current phase, then its marker
	}
	lanes := make([]lane, w)
	want := map[uint64][]int64{}
	var recs []Record
	var top uint64
	emit := func(rec Record, ph uint64, data bool) {
		rec.Offset = int64(len(recs))
		recs = append(recs, rec)
		if _, ok := want[ph]; !ok {
			want[ph] = nil
		}
		if data {
			want[ph] = append(want[ph], rec.Offset)
		}
	}
	for i, c := range b {
		task := int32(c) % w
		l := &lanes[task]
		if len(l.left) == 0 { // open the lane's next phase
			l.ph += uint64(c/8%3) + 1
			top = max(top, l.ph)
			n := int(c/32) % 4
			for j := range n {
				l.left = append(l.left, dt(l.ph, "t"+strconv.Itoa(int(task))+"-"+strconv.Itoa(i)+"-"+strconv.Itoa(j), task))
			}
			l.left = append(l.left, mt(l.ph, int64(n), task, w))
		}
		rec := l.left[0]
		l.left = l.left[1:]
		emit(rec, l.ph, len(l.left) > 0)
	}
	top++
	for task := range w { // finish every lane, then a common last phase
		l := &lanes[task]
		for i, rec := range l.left {
			emit(rec, l.ph, i < len(l.left)-1)
		}
		emit(mt(top, 0, task, w), top, false)
	}
	var phases []got
	for _, ph := range slices.Sorted(maps.Keys(want)) {
		phases = append(phases, got{ID: ph, Offsets: want[ph]})
	}
	return recs, phases
}

// checkValidSeveral: a partition with several writers as phasegate writes
// it gives every phase back, whole, and no violation.
func checkValidSeveral(t *testing.T, b []byte) {
	if len(b) == 0 {
		return
	}
	recs, want := validSeveral(b)
	r := NewReader(testPartition)
	var phases []got
	for _, rec := range recs {
		p, err := r.Feed(rec)
		if err != nil {
			t.Fatalf("valid stream, offset %d: %v", rec.Offset, err)
		}
		for ; p != nil; p = r.Next() {
			g := got{ID: p.ID}
			for _, pr := range p.Records {
				g.Offsets = append(g.Offsets, pr.Offset)
			}
			phases = append(phases, g)
		}
	}
	if err := r.End(); err != nil {
		t.Fatalf("valid stream: End: %v", err)
	}
	if !reflect.DeepEqual(phases, want) {
		t.Fatalf("phases = %+v\nwant %+v", phases, want)
	}
}
