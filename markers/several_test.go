package markers

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Tests of MARKERS.md section 3.3: partitions with several writers.

// specExampleWriters is the "v":2 marker value printed in MARKERS.md
// section 3.3.
const specExampleWriters = `{"v":2,"phase":42,"partition":5,"task":3,"writers":8,"count":4,"sources":{"orders":4},"watermark_ms":1733140800000,"sealed_by":"watermark","emitter":"phasegate-1"}`

func TestMarkerWriters(t *testing.T) {
	spec := Marker{Phase: 42, Partition: 5, Task: 3, Writers: 8, Count: 4, HasCount: true,
		Sources: map[string]int64{"orders": 4}, WatermarkMs: 1733140800000, SealedBy: SealedByWatermark, Emitter: "phasegate-1"}
	if got := string(spec.AppendOutput(nil)); got != specExampleWriters {
		t.Fatalf("AppendOutput = %s\nwant %s", got, specExampleWriters)
	}
	v1 := strings.Replace(specExample, `"emitter"`, `"task":"x","writers":1,"writers":[],"emitter"`, 1)
	v2 := func(old, new string) string { return strings.Replace(specExampleWriters, old, new, 1) }
	tests := []struct {
		name  string
		value string
		want  Marker // zero when malformed
		field string // the *MalformedError's field when malformed
	}{
		{"3.3/the spec example", specExampleWriters, spec, ""},
		{"3.3/field order does not matter", v2(`"v":2,"phase":42,"partition":5,"task":3,"writers":8,`, `"writers":8,"task":3,"phase":42,"partition":5,"v":2,`), spec, ""},
		{"3/in a v1 marker task and writers are unknown fields", v1, specMarker(), ""},
		{"3.3/task is required in v2", v2(`"task":3,`, ""), Marker{}, "task"},
		{"3.3/writers is required in v2", v2(`"writers":8,`, ""), Marker{}, "writers"},
		{"3.3/writers is at least 2", v2(`"task":3,"writers":8`, `"task":0,"writers":1`), Marker{}, "writers"},
		{"3.3/task is below writers", v2(`"task":3`, `"task":8`), Marker{}, "task"},
		{"3.3/task is not negative", v2(`"task":3`, `"task":-1`), Marker{}, "task"},
		{"3.3/task is an integer", v2(`"task":3`, `"task":"3"`), Marker{}, "task"},
		{"3.3/task given twice", v2(`"task":3`, `"task":3,"task":3`), Marker{}, "task"},
		{"3.3/writers given twice", v2(`"writers":8`, `"writers":8,"writers":8`), Marker{}, "writers"},
		{"3/v is 1 or 2", v2(`"v":2`, `"v":3`), Marker{}, "v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeOutputMarker([]byte(tt.value))
			if tt.field != "" {
				var me *MalformedError
				if !errors.As(err, &me) || me.Field != tt.field {
					t.Fatalf("DecodeOutputMarker(%s) = %+v, %v; want malformed %q", tt.value, m, err, tt.field)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(m, tt.want) {
				t.Fatalf("DecodeOutputMarker(%s) = %+v, %v\nwant %+v", tt.value, m, err, tt.want)
			}
		})
	}
	t.Run("3.1/v2 is output only", func(t *testing.T) {
		var me *MalformedError
		if _, err := DecodeMarker([]byte(specExampleWriters)); !errors.As(err, &me) || me.Field != "v" {
			t.Fatalf("DecodeMarker(v2) = %v, want malformed v", err)
		}
	})
}

// dt is an output data record of phase ph written by task.
func dt(ph uint64, id string, task int32) Record {
	rec := d(ph, id)
	rec.Headers = append(rec.Headers, h(HeaderTask, strconv.Itoa(int(task))))
	return rec
}

// mt is writer task's marker of W for phase ph with count on testPartition.
func mt(ph uint64, count int64, task, w int32) Record {
	return mkWith(ph, count, func(_ *Record, m *Marker) { m.Task, m.Writers, m.Emitter = task, w, "pg-"+strconv.Itoa(int(task)) })
}

// gotW is a returned phase: ID, record offsets, and the tasks whose
// markers it carries.
type gotW struct {
	ID      uint64
	Offsets []int64
	Tasks   []int32
	Count   int64
}

type violW struct {
	Kind   ViolationKind
	Offset int64
	Phase  uint64
	Task   int32 // -1 when the violation names no task
	Got    int64
}

// severalCase is a row of severalCases: records fed from offset 0, then End.
type severalCase struct {
	name    string
	recs    []Record
	phases  []gotW
	violate []violW
}

// severalCases are the rules M1 to M8 of MARKERS.md section 3.3;
// TestVectors hands them to the Python and Java readers too.
func severalCases() []severalCase {
	return []severalCase{
		{"3.3/M8 a phase is complete when every writer marked it",
			[]Record{dt(5, "a", 0), mt(5, 1, 0, 2), dt(5, "b", 1), mt(5, 1, 1, 2)},
			[]gotW{{5, []int64{0, 2}, []int32{0, 1}, 2}}, nil},
		{"3.3/M8 writer A's phase 6 data before writer B's phase 5 marker",
			[]Record{dt(5, "a", 0), mt(5, 1, 0, 2), dt(6, "c", 0), dt(5, "b", 1), dt(6, "d", 0), mt(5, 1, 1, 2), mt(6, 2, 0, 2), mt(6, 0, 1, 2)},
			[]gotW{{5, []int64{0, 3}, []int32{0, 1}, 2}, {6, []int64{2, 4}, []int32{0, 1}, 2}}, nil},
		{"3.3/M8 empty phases may be skipped per writer",
			[]Record{dt(5, "a", 0), mt(5, 1, 0, 2), mt(6, 0, 1, 2), mt(6, 0, 0, 2)},
			[]gotW{{5, []int64{0}, []int32{0}, 1}, {6, nil, []int32{0, 1}, 0}}, nil},
		{"3.3/M8 one record completes several phases, in order",
			[]Record{mt(5, 0, 0, 3), mt(7, 0, 0, 3), mt(7, 0, 1, 3), dt(9, "a", 0), mt(9, 1, 0, 3), mt(9, 0, 1, 3), mt(9, 0, 2, 3)},
			[]gotW{{5, nil, []int32{0}, 0}, {7, nil, []int32{0, 1}, 0}, {9, []int64{3}, []int32{0, 1, 2}, 1}}, nil},
		{"3.3/M8 the frontier is the slowest writer",
			[]Record{mt(5, 0, 0, 2), mt(6, 0, 0, 2), mt(5, 0, 1, 2), mt(8, 0, 1, 2), mt(8, 0, 0, 2)},
			[]gotW{{5, nil, []int32{0, 1}, 0}, {6, nil, []int32{0}, 0}, {8, nil, []int32{0, 1}, 0}}, nil},
		{"3.3/M8 at the end a phase some writer never marked is discarded",
			[]Record{dt(5, "a", 0), mt(5, 1, 0, 2)},
			nil, []violW{{MissingMarker, 1, 5, -1, 1}}},

		{"3.3/M1 every marker has the same writers",
			[]Record{mt(5, 0, 0, 2), mt(5, 0, 1, 3), mt(5, 0, 1, 2)},
			[]gotW{{5, nil, []int32{0, 1}, 0}}, []violW{{Malformed, 1, 5, -1, 0}}},
		{"3.3/M1 task below writers",
			[]Record{mkWith(5, 0, func(_ *Record, m *Marker) { m.Task, m.Writers = 2, 2 })},
			nil, []violW{{Malformed, 0, 5, -1, 0}}},
		{"3.3/M2 data without phasegate.task on a partition with several writers",
			[]Record{mt(4, 0, 0, 2), d(5, "a"), mt(5, 0, 0, 2), mt(5, 0, 1, 2)},
			[]gotW{{4, nil, []int32{0}, 0}, {5, nil, []int32{0, 1}, 0}}, []violW{{Malformed, 1, 5, -1, 0}}},
		{"3.3/M2 phasegate.task on a one-writer partition",
			[]Record{mk(4, 0), dt(5, "a", 0), mk(5, 0)},
			[]gotW{{4, nil, nil, 0}, {5, nil, nil, 0}}, []violW{{Malformed, 1, 5, -1, 0}}},
		{"3.3/M2 a v2 marker on a one-writer partition",
			[]Record{d(5, "a"), mt(5, 1, 0, 2), mk(5, 1)},
			[]gotW{{5, []int64{0}, nil, 1}}, []violW{{Malformed, 1, 5, -1, 0}}},
		{"3.3/M2 a v1 marker on a partition with several writers",
			[]Record{dt(5, "a", 1), mk(5, 1), mt(5, 0, 0, 2), mt(5, 1, 1, 2)},
			[]gotW{{5, []int64{0}, []int32{0, 1}, 1}}, []violW{{Malformed, 1, 5, -1, 0}}},
		{"3.3/M2 phasegate.task is a canonical decimal",
			[]Record{mt(4, 0, 0, 2), dh(h(HeaderPhase, "5"), h(HeaderID, "a"), h(HeaderSource, "t/0/1"), h(HeaderTask, "01"))},
			nil, []violW{{Malformed, 1, 5, -1, 0}, {MissingMarker, 0, 4, -1, 0}}},
		{"3.3/M2 phasegate.task below writers",
			[]Record{mt(4, 0, 0, 2), dt(5, "a", 2)},
			nil, []violW{{Malformed, 1, 5, -1, 0}, {MissingMarker, 0, 4, -1, 0}}},
		{"3.3/M2 data of a task not below writers, read before the first marker, is discarded",
			[]Record{dt(5, "a", 2), dt(5, "b", 0), mt(5, 1, 0, 2), mt(5, 0, 1, 2)},
			[]gotW{{5, []int64{1}, []int32{0, 1}, 1}}, []violW{{Malformed, 2, 5, -1, 0}}},

		{"3.3/M3 per writer, marker phases strictly increase",
			[]Record{mt(6, 0, 0, 2), mt(5, 0, 1, 2), mt(5, 0, 0, 2), mt(6, 0, 1, 2)},
			[]gotW{{5, nil, []int32{1}, 0}, {6, nil, []int32{0, 1}, 0}}, []violW{{PhaseBackwards, 2, 5, 0, 0}}},
		{"3.3/M4 per writer, no data after its marker; another writer's data is fine",
			[]Record{mt(5, 0, 0, 2), dt(5, "a", 1), dt(5, "b", 0), mt(5, 1, 1, 2)},
			[]gotW{{5, []int64{1}, []int32{0, 1}, 1}}, []violW{{DataAfterMarker, 2, 5, 0, 0}}},
		{"3.3/M5 per writer, data of a higher phase before its marker",
			[]Record{dt(5, "a", 0), dt(6, "b", 0), mt(6, 1, 0, 2), mt(6, 0, 1, 2)},
			[]gotW{{6, []int64{1}, []int32{0, 1}, 1}}, []violW{{MissingMarker, 1, 5, 0, 1}}},
		{"3.3/M5 per writer, data without its marker at the end",
			[]Record{mt(4, 0, 0, 2), mt(4, 0, 1, 2), dt(5, "a", 1)},
			[]gotW{{4, nil, []int32{0, 1}, 0}}, []violW{{MissingMarker, 2, 5, 1, 1}}},
		{"3.3/M6 per writer, count is the writer's own records",
			[]Record{dt(5, "a", 0), dt(5, "b", 1), mt(5, 2, 0, 2), mt(5, 1, 1, 2)},
			[]gotW{{5, []int64{0, 1}, []int32{0, 1}, 3}}, []violW{{CountMismatch, 2, 5, 0, 1}}},
		{"3.3/M7 one id in one phase across writers",
			[]Record{dt(5, "a", 0), dt(5, "a", 1), mt(5, 1, 0, 2), mt(5, 1, 1, 2)},
			[]gotW{{5, []int64{0, 1}, []int32{0, 1}, 2}}, []violW{{DuplicateID, 1, 5, 1, 0}}},
		{"3.3/M7 the same id in two phases is fine",
			[]Record{dt(5, "a", 0), mt(5, 1, 0, 2), dt(6, "a", 1), mt(6, 1, 1, 2), mt(6, 0, 0, 2)},
			[]gotW{{5, []int64{0}, []int32{0}, 1}, {6, []int64{2}, []int32{0, 1}, 1}}, nil},
	}
}

func TestReaderSeveral(t *testing.T) {
	for _, tt := range severalCases() {
		t.Run(tt.name, func(t *testing.T) {
			phases, vs := readSeveral(t, tt.recs)
			if !reflect.DeepEqual(phases, tt.phases) {
				t.Errorf("phases = %+v\nwant %+v", phases, tt.phases)
			}
			if !reflect.DeepEqual(vs, tt.violate) {
				t.Errorf("violations = %+v\nwant %+v", vs, tt.violate)
			}
		})
	}
}

// readSeveral feeds recs (offsets = indexes) to a Reader, collecting
// every phase with Feed and Next, and every violation.
func readSeveral(t *testing.T, recs []Record) ([]gotW, []violW) {
	t.Helper()
	r := NewReader(testPartition)
	var phases []gotW
	var vs []violW
	collect := func(p *Phase, err error) {
		for ; p != nil; p = r.Next() {
			g := gotW{ID: p.ID, Count: p.Marker.Count}
			for _, rec := range p.Records {
				g.Offsets = append(g.Offsets, rec.Offset)
			}
			for _, tm := range p.Markers {
				g.Tasks = append(g.Tasks, tm.Marker.Task)
				if tm.Marker.Phase != p.ID || tm.Offset > p.MarkerOffset {
					t.Errorf("phase %d carries marker %+v at %d, MarkerOffset %d", p.ID, tm.Marker, tm.Offset, p.MarkerOffset)
				}
			}
			phases = append(phases, g)
		}
		for _, v := range Violations(err) {
			w := violW{Kind: v.Kind, Offset: v.Offset, Phase: v.Phase, Task: -1, Got: v.Got}
			if v.HasTask {
				w.Task = v.Task
			}
			vs = append(vs, w)
		}
	}
	for i, rec := range recs {
		rec.Offset = int64(i)
		collect(r.Feed(rec))
	}
	collect(nil, r.End())
	collect(r.Next(), nil)
	return phases, vs
}

// TestReaderSeveralSummary: the summary marker of a phase with several
// writers adds up counts and sources and keeps the weakest sealed_by.
func TestReaderSeveralSummary(t *testing.T) {
	r := NewReader(testPartition)
	recs := []Record{dt(5, "a", 0), mt(5, 1, 0, 2), dt(5, "b", 1), dt(5, "c", 1),
		mkWith(5, 2, func(_ *Record, m *Marker) { m.Task, m.Writers, m.SealedBy, m.WatermarkMs = 1, 2, SealedByIdle, 2000 })}
	var p *Phase
	for i, rec := range recs {
		rec.Offset = int64(i)
		var err error
		if p, err = r.Feed(rec); err != nil {
			t.Fatal(err)
		}
	}
	want := Marker{Phase: 5, Partition: testPartition, Count: 3, HasCount: true, Sources: map[string]int64{"in": 3},
		WatermarkMs: 2000, SealedBy: SealedByIdle, Emitter: "pg-0", Writers: 2, Task: -1}
	if p == nil || !reflect.DeepEqual(p.Marker, want) || p.MarkerOffset != 4 || len(p.Markers) != 2 {
		t.Fatalf("phase = %+v\nwant marker %+v at 4", p, want)
	}
}
