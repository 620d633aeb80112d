package markers

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// Tests of MARKERS.md section 6: checkpoints.

// checkpointCase is a row of checkpointCases: recs are fed from
// start.Offset on (offsets start.Offset, start.Offset+1, ...).
type checkpointCase struct {
	name    string
	start   Checkpoint
	recs    []Record
	end     bool
	phases  []vectorPhase
	skipped []Skip
	violate []vectorViol
	// checkpoint is Checkpoint after the last record; nil: none (C5).
	checkpoint *Checkpoint
	stoppedAt  *int64
}

// meta is checkpoint metadata with done.
func meta(done uint64) string { return string(AppendCheckpointMetadata(nil, done, true)) }

// metaNone is checkpoint metadata before any phase was handed over.
var metaNone = string(AppendCheckpointMetadata(nil, 0, false))

func ph(id uint64, offsets ...int64) vectorPhase { return vectorPhase{Phase: id, Offsets: offsets} }

// lanes is a partition of two writers where writer 0 runs a phase ahead of
// writer 1: writer 0's data and marker of phase 6 (offsets 2, 3) lie
// before writer 1's marker that completes phase 5 (offset 5), as the
// issue that introduced section 6 saw.
func lanes() []Record {
	return []Record{
		dt(5, "a", 0), mt(5, 1, 0, 2), // 0, 1
		dt(6, "c", 0), mt(6, 1, 0, 2), // 2, 3
		dt(5, "b", 1), mt(5, 1, 1, 2), // 4, 5: completes 5
		dt(6, "d", 1), mt(6, 1, 1, 2), // 6, 7: completes 6
		mt(7, 0, 0, 2), mt(7, 0, 1, 2), // 8, 9: completes 7
	}
}

func checkpointCases() []checkpointCase {
	newer := mkWith(5, 0, func(r *Record, m *Marker) {
		r.Value = []byte(`{"v":3,"phase":5,"partition":2,"count":0,"sources":{},"watermark_ms":1,"sealed_by":"watermark","emitter":"x"}`)
	})
	return []checkpointCase{
		{name: "C1 one writer: the offset after the marker of the last phase",
			recs:   []Record{d(5, "a"), mk(5, 1), d(6, "b")},
			phases: []vectorPhase{ph(5, 0)}, checkpoint: &Checkpoint{2, meta(5)}},
		{name: "C1 several writers: behind a later phase's data that precedes the completing marker",
			recs:   lanes()[:6],
			phases: []vectorPhase{ph(5, 0, 4)}, checkpoint: &Checkpoint{2, meta(5)}},
		{name: "C1 a writer's marked phase waiting for the other writer is kept",
			recs:       []Record{dt(5, "a", 0), mt(5, 1, 0, 2)},
			checkpoint: &Checkpoint{0, metaNone}},
		{name: "C1 nothing read: the start offset and its metadata",
			start:      Checkpoint{7, meta(4)},
			checkpoint: &Checkpoint{7, meta(4)}},
		{name: "C1 records dropped as violations are not kept",
			recs:   []Record{d(5, "a"), mk(5, 1), d(5, "b")},
			phases: []vectorPhase{ph(5, 0)}, violate: []vectorViol{{"data-after-marker", 2}}, checkpoint: &Checkpoint{3, meta(5)}},

		{name: "C3 resumed at C1's checkpoint, every later phase is whole",
			start: Checkpoint{2, meta(5)}, recs: lanes()[2:],
			phases: []vectorPhase{ph(6, 2, 6), ph(7)}, checkpoint: &Checkpoint{10, meta(7)}},
		{name: "C3 a marker at or below done is its lane's last marker",
			start: Checkpoint{1, meta(5)}, recs: []Record{mk(4, 0), mk(3, 0), d(5, "x"), mk(6, 0)},
			phases: []vectorPhase{ph(6)}, violate: []vectorViol{{"phase-backwards", 2}}, checkpoint: &Checkpoint{5, meta(6)}},
		{name: "C3 metadata without done: every phase is whole",
			start: Checkpoint{50, metaNone}, recs: []Record{mt(7, 0, 1, 2), dt(5, "a", 0), mt(5, 1, 0, 2)},
			phases: []vectorPhase{ph(5, 51)}, checkpoint: &Checkpoint{50, meta(5)}},

		{name: "C4 resumed after the completing marker without metadata: the phase whose writer-0 part lies behind is skipped",
			start: Checkpoint{6, ""}, recs: lanes()[6:],
			skipped: []Skip{{6, 1}}, phases: []vectorPhase{ph(7)}, checkpoint: &Checkpoint{10, meta(7)}},
		{name: "C4 resumed inside a phase's span without metadata: only what is proven",
			start: Checkpoint{2, ""}, recs: lanes()[2:],
			skipped: []Skip{{5, 1}}, phases: []vectorPhase{ph(6, 2, 6), ph(7)}, checkpoint: &Checkpoint{10, meta(7)}},
		{name: "C4 at offset 0 without metadata every phase is whole",
			recs:   []Record{mt(7, 0, 1, 2), dt(5, "a", 0), mt(5, 1, 0, 2), mt(7, 0, 0, 2)},
			phases: []vectorPhase{ph(5, 1), ph(7)}, checkpoint: &Checkpoint{4, meta(7)}},
		{name: "C4 the same records away from offset 0: a writer's first marker above the phase proves nothing",
			start: Checkpoint{50, ""}, recs: []Record{mt(7, 0, 1, 2), dt(5, "a", 0), mt(5, 1, 0, 2), mt(7, 0, 0, 2)},
			skipped: []Skip{{5, 1}}, phases: []vectorPhase{ph(7)}, checkpoint: &Checkpoint{54, meta(7)}},
		{name: "C4 one writer started at a phase boundary: the first phase is proven by its count",
			start: Checkpoint{100, ""}, recs: []Record{d(5, "a"), d(5, "b"), mk(5, 2)},
			phases: []vectorPhase{ph(5, 100, 101)}, checkpoint: &Checkpoint{103, meta(5)}},
		{name: "C4 one writer started inside a phase: the phase is skipped, not a count mismatch",
			start: Checkpoint{100, ""}, recs: []Record{d(5, "b"), mk(5, 2), d(6, "c"), mk(6, 1)},
			skipped: []Skip{{5, 1}}, phases: []vectorPhase{ph(6, 102)}, checkpoint: &Checkpoint{104, meta(6)}},
		{name: "C4 a first marker counting fewer records than read is a violation",
			start: Checkpoint{100, ""}, recs: []Record{d(5, "a"), d(5, "b"), mk(5, 1)},
			skipped: []Skip{{5, 2}}, violate: []vectorViol{{"count-mismatch", 102}}, checkpoint: &Checkpoint{103, meta(5)}},
		{name: "C4 a later marker counting more records than read is a violation",
			start: Checkpoint{100, ""}, recs: []Record{mk(4, 0), d(5, "a"), mk(5, 2)},
			phases: []vectorPhase{ph(4), ph(5, 101)}, violate: []vectorViol{{"count-mismatch", 102}}, checkpoint: &Checkpoint{103, meta(5)}},
		{name: "C4 another program's metadata is no metadata",
			start: Checkpoint{100, "hello"}, recs: []Record{d(5, "b"), mk(5, 2)},
			skipped: []Skip{{5, 1}}, checkpoint: &Checkpoint{102, meta(5)}},

		{name: "C4 at the end, phases waiting on a writer with no marker since the start are skipped, not missing",
			start: Checkpoint{100, ""}, recs: []Record{dt(5, "a", 1), mt(5, 1, 1, 2), dt(6, "b", 1), mt(6, 1, 1, 2)}, end: true,
			skipped: []Skip{{5, 1}, {6, 1}}},
		{name: "C4 at the end, a phase it could prove but some writer never marked is missing",
			start: Checkpoint{100, ""}, recs: []Record{mt(4, 0, 0, 2), mt(4, 0, 1, 2), dt(5, "a", 0), mt(5, 1, 0, 2)}, end: true,
			phases: []vectorPhase{ph(4)}, violate: []vectorViol{{"missing-marker", 103}}, checkpoint: &Checkpoint{104, meta(4)}},
		{name: "C5 no checkpoint before every writer has a marker read",
			start: Checkpoint{100, ""}, recs: []Record{dt(5, "a", 0), mt(5, 1, 0, 2)}},
		{name: "C5 no checkpoint while a skipped phase is below the highest first proven phase",
			start: Checkpoint{50, ""}, recs: []Record{mt(7, 0, 1, 2), dt(5, "a", 0), mt(5, 1, 0, 2)},
			skipped: []Skip{{5, 1}}},
		{name: "C5 no checkpoint from an unproven start, data only",
			start: Checkpoint{100, ""}, recs: []Record{d(5, "b")}},

		{name: "C1 one record completes two phases: the checkpoint follows both",
			recs:   []Record{mt(5, 0, 0, 2), mt(7, 0, 0, 2), mt(7, 0, 1, 2)},
			phases: []vectorPhase{ph(5), ph(7)}, checkpoint: &Checkpoint{3, meta(7)}},
		{name: "3.3 a reader stops at a marker of a newer version, whatever else its value holds",
			recs:   []Record{d(4, "a"), mk(4, 1), mkWith(5, 0, func(r *Record, _ *Marker) { r.Value = []byte(`{"phase":"x","v":3}`) })},
			phases: []vectorPhase{ph(4, 0)}, violate: []vectorViol{{"malformed", 2}}, stoppedAt: ptr[int64](2)},
		{name: "3.3 a reader stops at a marker of a newer version",
			recs:   []Record{d(4, "a"), mk(4, 1), newer, mk(6, 0)},
			phases: []vectorPhase{ph(4, 0)}, violate: []vectorViol{{"malformed", 2}}, stoppedAt: ptr[int64](2)},
	}
}

// vector turns the row into a reader vector.
func (c checkpointCase) vector(t *testing.T) vector {
	v := vector{Name: c.name, Partition: testPartition, Start: vectorStart(c.start), Records: toVectorRecs(t, c.recs, c.start.Offset), End: c.end}
	v.Want = vectorWant{Phases: c.phases, Violations: c.violate, StoppedAt: c.stoppedAt}
	for _, s := range c.skipped {
		v.Want.Skipped = append(v.Want.Skipped, vectorSkip(s))
	}
	if c.checkpoint != nil {
		v.Want.Checkpoint = &vectorStart{Offset: c.checkpoint.Offset, Metadata: c.checkpoint.Metadata}
	}
	return v
}

func TestCheckpoint(t *testing.T) {
	for _, c := range checkpointCases() {
		t.Run(c.name, func(t *testing.T) {
			v := c.vector(t)
			got := unchecked(runVector(v), v.Want) // the table states offsets; the other tables check counts
			if !reflect.DeepEqual(got, v.Want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(v.Want)
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}

// TestCheckpointNext: Checkpoint taken between Feed and Next keeps the
// phase not taken yet ahead of its offset, and names the phase before it.
func TestCheckpointNext(t *testing.T) {
	r := NewReader(testPartition)
	recs := []Record{dt(5, "a", 0), mt(5, 1, 0, 2), dt(7, "b", 0), mt(7, 1, 0, 2), mt(7, 0, 1, 2)}
	var first *Phase
	for i, rec := range recs {
		rec.Offset = int64(i)
		p, err := r.Feed(rec)
		if err != nil {
			t.Fatal(err)
		}
		if p != nil {
			first = p
		}
	}
	if first == nil || first.ID != 5 {
		t.Fatalf("Feed returned %+v, want phase 5", first)
	}
	if c, ok := r.Checkpoint(); !ok || c.Offset != 2 || c.Metadata != meta(5) {
		t.Fatalf("Checkpoint before Next = %+v, %v; want {2 %s}", c, ok, meta(5))
	}
	if p := r.Next(); p == nil || p.ID != 7 {
		t.Fatalf("Next = %+v, want phase 7", p)
	}
	if c, ok := r.Checkpoint(); !ok || c.Offset != 5 || c.Metadata != meta(7) {
		t.Fatalf("Checkpoint after Next = %+v, %v; want {5 %s}", c, ok, meta(7))
	}
}

func TestNewerVersion(t *testing.T) {
	for _, value := range []string{
		`{"v":3,"phase":5,"partition":2,"count":0,"sources":{},"watermark_ms":1,"sealed_by":"watermark","emitter":"x"}`,
		`{"v":18446744073709551616,"phase":5,"partition":2}`, // above uint64: still a version number
		`{"phase":"x","v":3,"partition":2}`,                  // a bad field before "v": "v" decides
		`{"v":4}`,                                            // nothing else
	} {
		_, err := DecodeOutputMarker([]byte(value))
		if !errors.Is(err, ErrNewerVersion) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrNewerVersion and ErrMalformed", value, err)
		}
	}
	if _, err := DecodeMarker([]byte(`{"v":3,"phase":5,"partition":2}`)); errors.Is(err, ErrNewerVersion) || !errors.Is(err, ErrMalformed) {
		t.Errorf("an input marker of v3: %v, want malformed, not newer (input markers are version 1)", err)
	}
	for _, v := range []string{`"v":0`, `"v":"3"`, `"v":-3`, `"v":3.0`} {
		_, err := DecodeOutputMarker([]byte(`{` + v + `,"phase":5,"partition":2,"count":0,"sources":{},"watermark_ms":1,"sealed_by":"watermark","emitter":"x"}`))
		if errors.Is(err, ErrNewerVersion) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want malformed, not newer", v, err)
		}
	}
}
