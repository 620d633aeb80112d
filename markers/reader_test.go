package markers

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const testPartition = 2

// d is an output data record of phase ph with phasegate.id id.
func d(ph uint64, id string) Record {
	return Record{Key: []byte("k-" + id), Value: []byte("v"), Headers: []Header{
		h(HeaderPhase, strconv.FormatUint(ph, 10)), h(HeaderID, id), h(HeaderSource, "in/0/"+strconv.Itoa(len(id))),
	}}
}

// dh is a data record with exactly the headers hs.
func dh(hs ...Header) Record { return Record{Value: []byte("v"), Headers: hs} }

// mk is a valid output marker for phase ph with count on testPartition.
func mk(ph uint64, count int64) Record {
	return mkWith(ph, count, func(*Record, *Marker) {})
}

// mkWith is mk with the record and the marker changed by fn before the
// value is encoded.
func mkWith(ph uint64, count int64, fn func(*Record, *Marker)) Record {
	m := Marker{Phase: ph, Partition: testPartition, Count: count, HasCount: true,
		Sources: map[string]int64{"in": count}, WatermarkMs: 1000, SealedBy: SealedByWatermark, Emitter: "pg-0"}
	rec := Record{Headers: AppendMarkerHeaders[Header](nil, AppendPhase(nil, ph))}
	fn(&rec, &m)
	if rec.Value == nil {
		rec.Value = m.AppendOutput(nil)
	}
	return rec
}

// got is what a test expects of one returned phase: its ID and the
// offsets of its records.
type got struct {
	ID      uint64
	Offsets []int64
}

// viol is what a test expects of one violation.
type viol struct {
	Kind         ViolationKind
	Offset       int64
	Phase, Prior uint64
	Want, Got    int64
}

// readerCase is a row of readerCases: records fed from offset 0, then End.
type readerCase struct {
	name    string
	recs    []Record
	phases  []got
	violate []viol
}

// readerCases are the rules of MARKERS.md sections 1 to 3.2 on a one-writer
// partition; TestVectors hands them to the Python and Java readers too.
func readerCases() []readerCase {
	return []readerCase{
		{"3.2/data of a phase, then its marker", []Record{d(5, "a"), d(5, "b"), mk(5, 2)},
			[]got{{5, []int64{0, 1}}}, nil},
		{"3.2/marker with count 0 where the partition got no data", []Record{mk(5, 0)},
			[]got{{5, nil}}, nil},
		{"3.2/empty phases may be skipped", []Record{mk(5, 0), mk(9, 0), d(10, "a"), mk(10, 1)},
			[]got{{5, nil}, {9, nil}, {10, []int64{2}}}, nil},
		{"3.2/count counts data since the previous marker", []Record{d(5, "a"), mk(5, 1), d(6, "b"), d(6, "c"), mk(6, 2)},
			[]got{{5, []int64{0}}, {6, []int64{2, 3}}}, nil},
		{"3.2/unknown headers and phasegate.reason are no concern", []Record{
			dh(h(HeaderPhase, "5"), h(HeaderID, "a"), h(HeaderSource, "t/1/2"), h("traceparent", "x"), h("phasegate.extra", "y")), mk(5, 1)},
			[]got{{5, []int64{0}}}, nil},

		{"3.2/marker phase IDs strictly increase: repeated marker", []Record{mk(5, 0), mk(5, 0), mk(6, 0)},
			[]got{{5, nil}, {6, nil}}, []viol{{Kind: PhaseBackwards, Offset: 1, Phase: 5, Prior: 5}}},
		{"3.2/marker phase IDs strictly increase: lower marker", []Record{mk(6, 0), mk(5, 0)},
			[]got{{6, nil}}, []viol{{Kind: PhaseBackwards, Offset: 1, Phase: 5, Prior: 6}}},
		{"3.2/no data of phase N after the marker for N", []Record{d(5, "a"), mk(5, 1), d(5, "b"), mk(6, 0)},
			[]got{{5, []int64{0}}, {6, nil}}, []viol{{Kind: DataAfterMarker, Offset: 2, Phase: 5, Prior: 5}}},
		{"3.2/no data of phase N after a marker above N (empty phases are never reordered)", []Record{mk(7, 0), d(5, "a"), d(8, "b"), mk(8, 1)},
			[]got{{7, nil}, {8, []int64{2}}}, []viol{{Kind: DataAfterMarker, Offset: 1, Phase: 5, Prior: 7}}},
		{"3.2/no data of phase > N before the marker for N", []Record{d(5, "a"), d(6, "b"), mk(6, 1)},
			[]got{{6, []int64{1}}}, []viol{{Kind: MissingMarker, Offset: 1, Phase: 5, Got: 1}}},
		{"3.2/no marker of phase > N before the marker for N", []Record{d(5, "a"), d(5, "b"), mk(6, 0), mk(7, 0)},
			[]got{{6, nil}, {7, nil}}, []viol{{Kind: MissingMarker, Offset: 2, Phase: 5, Got: 2}}},
		{"3.2/data of a lower phase after pending data", []Record{d(6, "a"), d(5, "b"), mk(6, 1)},
			[]got{{6, []int64{0}}}, []viol{{Kind: PhaseBackwards, Offset: 1, Phase: 5, Prior: 6}}},
		{"3.2/marker of a lower phase after pending data", []Record{d(6, "a"), mk(5, 0), mk(6, 1)},
			[]got{{5, nil}, {6, []int64{0}}}, []viol{{Kind: PhaseBackwards, Offset: 1, Phase: 5, Prior: 6}}},
		{"3.2/count equals data records: more records", []Record{d(5, "a"), d(5, "b"), d(5, "c"), mk(5, 2)},
			[]got{{5, []int64{0, 1, 2}}}, []viol{{Kind: CountMismatch, Offset: 3, Phase: 5, Want: 2, Got: 3}}},
		{"3.2/count equals data records: fewer records", []Record{d(5, "a"), mk(5, 2)},
			[]got{{5, []int64{0}}}, []viol{{Kind: CountMismatch, Offset: 1, Phase: 5, Want: 2, Got: 1}}},
		{"3.2/count equals data records: empty phase with count > 0", []Record{mk(5, 3)},
			[]got{{5, nil}}, []viol{{Kind: CountMismatch, Offset: 0, Phase: 5, Want: 3, Got: 0}}},
		{"3.2/count: records of a discarded phase do not count for the next", []Record{d(5, "a"), mk(6, 1)},
			[]got{{6, nil}}, []viol{{Kind: MissingMarker, Offset: 1, Phase: 5, Got: 1}, {Kind: CountMismatch, Offset: 1, Phase: 6, Want: 1, Got: 0}}},
		{"3.2/each phasegate.id at most once per phase", []Record{d(5, "a"), d(5, "a"), mk(5, 2)},
			[]got{{5, []int64{0, 1}}}, []viol{{Kind: DuplicateID, Offset: 1, Phase: 5}}},
		{"3.2/the same id in two phases is fine", []Record{d(5, "a"), mk(5, 1), d(6, "a"), mk(6, 1)},
			[]got{{5, []int64{0}}, {6, []int64{2}}}, nil},
		{"3.2/ids of a discarded phase are forgotten", []Record{d(5, "a"), d(6, "a"), mk(6, 1)},
			[]got{{6, []int64{1}}}, []viol{{Kind: MissingMarker, Offset: 1, Phase: 5, Got: 1}}},
		{"3.2/data without its marker at the end", []Record{mk(4, 0), d(5, "a"), d(5, "b")},
			[]got{{4, nil}}, []viol{{Kind: MissingMarker, Offset: 2, Phase: 5, Got: 2}}},

		{"2/output data records carry phasegate.phase", []Record{dh(h(HeaderID, "a"), h(HeaderSource, "t/0/1")), mk(5, 0)},
			[]got{{5, nil}}, []viol{{Kind: Malformed, Offset: 0}}},
		{"2/output data records carry phasegate.id", []Record{dh(h(HeaderPhase, "5"), h(HeaderSource, "t/0/1")), mk(5, 1)},
			[]got{{5, []int64{0}}}, []viol{{Kind: Malformed, Offset: 0, Phase: 5}}},
		{"2/output data records carry phasegate.source", []Record{dh(h(HeaderPhase, "5"), h(HeaderID, "a")), mk(5, 1)},
			[]got{{5, []int64{0}}}, []viol{{Kind: Malformed, Offset: 0, Phase: 5}}},
		{"2/output data records carry phasegate.id and phasegate.source", []Record{dh(h(HeaderPhase, "5")), mk(5, 1)},
			[]got{{5, []int64{0}}}, []viol{{Kind: Malformed, Offset: 0, Phase: 5}}},
		{"2/phasegate.source is topic/partition/offset", []Record{dh(h(HeaderPhase, "5"), h(HeaderID, "a"), h(HeaderSource, "t/0")), mk(5, 1)},
			[]got{{5, []int64{0}}}, []viol{{Kind: Malformed, Offset: 0, Phase: 5}}},
		{"1/malformed phase header is never guessed at", []Record{dh(h(HeaderPhase, "+5"), h(HeaderID, "a"), h(HeaderSource, "t/0/1")), mk(5, 0)},
			[]got{{5, nil}}, []viol{{Kind: Malformed, Offset: 0}}},
		{"2/phasegate.id at most 256 bytes", []Record{d(5, strings.Repeat("x", 257)), mk(5, 0)},
			[]got{{5, nil}}, []viol{{Kind: Malformed, Offset: 0, Phase: 5}}},
		{"3/marker record has a null key", []Record{mkWith(5, 0, func(r *Record, _ *Marker) { r.Key = []byte{} })},
			[]got{{5, nil}}, []viol{{Kind: Malformed, Offset: 0, Phase: 5}}},
		{"3/marker partition is the partition it is written to", []Record{mkWith(5, 0, func(_ *Record, m *Marker) { m.Partition = testPartition + 1 })},
			[]got{{5, nil}}, []viol{{Kind: Malformed, Offset: 0, Phase: 5}}},
		{"3/marker phase equals the phasegate.phase header", []Record{d(5, "a"), mkWith(5, 1, func(_ *Record, m *Marker) { m.Phase = 6 })},
			nil, []viol{{Kind: Malformed, Offset: 1, Phase: 5}, {Kind: MissingMarker, Offset: 0, Phase: 5, Got: 1}}},
		{"3/marker value is valid JSON", []Record{mkWith(5, 0, func(r *Record, _ *Marker) { r.Value = []byte(`{"v":1,`) })},
			nil, []viol{{Kind: Malformed, Offset: 0, Phase: 5}}},
		{"3/output marker has every output field", []Record{mkWith(5, 0, func(r *Record, m *Marker) { r.Value = m.AppendInput(nil) })},
			nil, []viol{{Kind: Malformed, Offset: 0, Phase: 5}}},
		{"3/marker record has phasegate.phase", []Record{{Headers: []Header{h(HeaderMarker, "1")}, Value: Marker{Phase: 5}.AppendOutput(nil)}},
			nil, []viol{{Kind: Malformed, Offset: 0}}},
		{"2/phasegate.marker is 1", []Record{mkWith(5, 0, func(r *Record, _ *Marker) { r.Headers[0].Value = []byte("true") })},
			nil, []viol{{Kind: Malformed, Offset: 0}}},
		{"3/markers are recognised by the header, not the value", []Record{dh(h(HeaderPhase, "5"), h(HeaderID, "a"), h(HeaderSource, "t/0/1")), mk(5, 1)},
			[]got{{5, []int64{0}}}, nil},
	}
}

func TestReader(t *testing.T) {
	for _, tt := range readerCases() {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(testPartition)
			var phases []got
			var vs []viol
			for i, rec := range tt.recs {
				rec.Offset = int64(i)
				p, err := r.Feed(rec)
				if p != nil {
					phases = append(phases, summarize(t, p))
				}
				vs = append(vs, summarizeAll(t, err)...)
			}
			vs = append(vs, summarizeAll(t, r.End())...)
			if !reflect.DeepEqual(phases, tt.phases) {
				t.Errorf("phases = %+v\nwant %+v", phases, tt.phases)
			}
			if !reflect.DeepEqual(vs, tt.violate) {
				t.Errorf("violations = %+v\nwant %+v", vs, tt.violate)
			}
		})
	}
}

func summarize(t *testing.T, p *Phase) got {
	t.Helper()
	g := got{ID: p.ID}
	for _, rec := range p.Records {
		g.Offsets = append(g.Offsets, rec.Offset)
		if m, err := Inspect(rec.Headers); err == nil && m.Phase != p.ID {
			t.Errorf("phase %d holds a record of phase %d", p.ID, m.Phase)
		}
	}
	if p.Marker.Phase != p.ID {
		t.Errorf("phase %d carries the marker of phase %d", p.ID, p.Marker.Phase)
	}
	return g
}

func summarizeAll(t *testing.T, err error) []viol {
	t.Helper()
	var out []viol
	for _, v := range Violations(err) {
		if v.Partition != testPartition {
			t.Errorf("violation on partition %d, want %d", v.Partition, testPartition)
		}
		out = append(out, viol{Kind: v.Kind, Offset: v.Offset, Phase: v.Phase, Prior: v.Prior, Want: v.Want, Got: v.Got})
	}
	if err != nil && len(out) == 0 {
		t.Errorf("error %v holds no *Violation", err)
	}
	return out
}

// TestReaderPhaseAndViolation: a count mismatch comes back with the phase
// it concerns, in one Feed, and errors.As finds it.
func TestReaderPhaseAndViolation(t *testing.T) {
	r := NewReader(testPartition)
	if _, err := r.Feed(d(5, "a")); err != nil {
		t.Fatal(err)
	}
	p, err := r.Feed(mk(5, 2))
	var v *Violation
	if p == nil || !errors.As(err, &v) || v.Kind != CountMismatch {
		t.Fatalf("Feed = %v, %v; want the phase and a CountMismatch", p, err)
	}
	if p.Marker.Count != 2 || len(p.Records) != 1 || string(p.Records[0].Key) != "k-a" {
		t.Fatalf("phase = %+v", p)
	}
}

// TestReaderJoinedViolations: one record breaking two rules gives both, in
// order, through Violations, and errors.As finds the first.
func TestReaderJoinedViolations(t *testing.T) {
	r := NewReader(testPartition)
	if _, err := r.Feed(d(5, "a")); err != nil {
		t.Fatal(err)
	}
	_, err := r.Feed(mkWith(6, 3, func(r *Record, _ *Marker) { r.Key = []byte("k") }))
	vs := Violations(err)
	kinds := make([]ViolationKind, len(vs))
	for i, v := range vs {
		kinds[i] = v.Kind
	}
	if want := []ViolationKind{Malformed, MissingMarker, CountMismatch}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("kinds = %v, want %v (err %v)", kinds, want, err)
	}
	var v *Violation
	if !errors.As(err, &v) || v != vs[0] {
		t.Fatalf("errors.As found %v, want the first violation", v)
	}
}

// TestReaderMalformedUnwraps: the cause of a Malformed violation is
// reachable with errors.As and errors.Is.
func TestReaderMalformedUnwraps(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		is   error
	}{
		{"3/marker value is valid JSON", mkWith(5, 0, func(r *Record, _ *Marker) { r.Value = []byte("x") }), ErrMalformed},
		{"1/phase header is decimal", dh(h(HeaderPhase, "x")), ErrPhaseSyntax},
		{"2/phasegate.source syntax", dh(h(HeaderPhase, "1"), h(HeaderID, "a"), h(HeaderSource, "x")), ErrSource},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(testPartition).Feed(tt.rec)
			if !errors.Is(err, tt.is) {
				t.Fatalf("Feed error %v is not %v", err, tt.is)
			}
			if tt.is == ErrMalformed {
				var me *MalformedError
				if !errors.As(err, &me) || me.Field != "" {
					t.Fatalf("errors.As(*MalformedError) = %v", me)
				}
			}
		})
	}
}

func TestReaderEndTwice(t *testing.T) {
	r := NewReader(0)
	rec := d(5, "a")
	rec.Offset = 41
	if _, err := r.Feed(rec); err != nil {
		t.Fatal(err)
	}
	err := r.End()
	var v *Violation
	if !errors.As(err, &v) || v.Kind != MissingMarker || v.Offset != 41 || v.Partition != 0 {
		t.Fatalf("End = %v", err)
	}
	if err := r.End(); err != nil {
		t.Fatalf("second End = %v, want nil", err)
	}
}

func TestViolationError(t *testing.T) {
	tests := []struct {
		name string
		v    Violation
		want string
	}{
		{"count mismatch", Violation{Kind: CountMismatch, Partition: 2, Offset: 17, Phase: 42, Want: 3, Got: 2},
			"markers: partition 2 offset 17 phase 42: count-mismatch: marker count 3, read 2"},
		{"missing marker", Violation{Kind: MissingMarker, Partition: 0, Offset: 9, Phase: 7, Got: 4, Detail: "no marker before the end"},
			"markers: partition 0 offset 9 phase 7: missing-marker: 4 records discarded: no marker before the end"},
		{"malformed with cause", Violation{Kind: Malformed, Offset: 1, Detail: "headers", Err: ErrMarkerValue},
			"markers: partition 0 offset 1 phase 0: malformed: headers: markers: phasegate.marker is not 1"},
		{"unknown kind", Violation{Kind: 99}, "markers: partition 0 offset 0 phase 0: ViolationKind(99)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.Error(); got != tt.want {
				t.Fatalf("Error() = %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestViolationKindString(t *testing.T) {
	tests := []struct {
		k    ViolationKind
		want string
	}{
		{CountMismatch, "count-mismatch"}, {PhaseBackwards, "phase-backwards"}, {DataAfterMarker, "data-after-marker"},
		{MissingMarker, "missing-marker"}, {Malformed, "malformed"}, {DuplicateID, "duplicate-id"}, {0, "ViolationKind(0)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.k.String(); got != tt.want {
				t.Fatalf("String() = %q", got)
			}
		})
	}
}
