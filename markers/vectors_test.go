package markers

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"
)

// The reader vectors: every reader table of this package (sections 1 to
// 3.3, and section 6's checkpoints) as one JSON file, so that the Python
// and Java readers of examples/ are checked against the same rows as
// markers.Reader. The expectations come from the tables, never from a
// reader's output; TestVectors checks that the file holds exactly them and
// that markers.Reader meets them by the procedure the other readers follow
// (docs/MARKERS.md, testdata/README.md).

var update = flag.Bool("update", false, "rewrite testdata/reader-vectors.json from the tables")

const vectorsFile = "testdata/reader-vectors.json"

type vectorFile struct {
	Comment  string           `json:"comment"`
	Vectors  []vector         `json:"vectors"`
	Metadata []metadataVector `json:"metadata"`
}

type vector struct {
	Name      string      `json:"name"`
	Partition int32       `json:"partition"`
	Start     vectorStart `json:"start"`
	Records   []vectorRec `json:"records"`
	End       bool        `json:"end"`
	Want      vectorWant  `json:"want"`
}

type vectorStart struct {
	Offset   int64  `json:"offset"`
	Metadata string `json:"metadata"`
}

type vectorRec struct {
	Offset  int64       `json:"offset"`
	Key     *string     `json:"key"`
	Value   *string     `json:"value"`
	Headers [][2]string `json:"headers"`
}

type vectorWant struct {
	Phases     []vectorPhase `json:"phases"`
	Skipped    []vectorSkip  `json:"skipped"`
	Violations []vectorViol  `json:"violations"`
	// StoppedAt is the offset of a marker of a newer version, where a
	// reader stops (section 3.3); nothing after it is fed.
	StoppedAt *int64 `json:"stopped_at"`
	// Checkpoint is Reader.Checkpoint after the last record (and End),
	// null when there is none (rule C5).
	Checkpoint *vectorStart `json:"checkpoint"`
}

type vectorPhase struct {
	Phase   uint64  `json:"phase"`
	Offsets []int64 `json:"offsets"`
	Count   *int64  `json:"count"` // the marker's count, or the sum over the writers; null: not checked
}

type vectorSkip struct {
	Phase   uint64 `json:"phase"`
	Records int    `json:"records"`
}

type vectorViol struct {
	Kind   string `json:"kind"`
	Offset int64  `json:"offset"`
}

type metadataVector struct {
	Metadata string  `json:"metadata"`
	OK       bool    `json:"ok"`
	Done     *uint64 `json:"done"`
}

func TestVectors(t *testing.T) {
	file := vectorFile{
		Comment: "Generated from the tables of markers/*_test.go by `go test ./markers -run TestVectors -update`; " +
			"the format and the procedure are in markers/testdata/README.md.",
		Vectors:  allVectors(t),
		Metadata: metadataVectors(),
	}
	want := marshalVectors(t, file)
	if *update {
		if err := os.WriteFile(vectorsFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(vectorsFile)
	if err != nil || !bytes.Equal(have, want) {
		t.Fatalf("%s is not what the tables say (err %v): run go test ./markers -run TestVectors -update", vectorsFile, err)
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			if got := unchecked(runVector(v), v.Want); !reflect.DeepEqual(got, v.Want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(v.Want)
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
	for _, m := range file.Metadata {
		done, hasDone, ok := ParseCheckpointMetadata(m.Metadata)
		if ok != m.OK || hasDone != (m.Done != nil) || m.Done != nil && done != *m.Done {
			t.Errorf("ParseCheckpointMetadata(%q) = %d, %v, %v; want %+v", m.Metadata, done, hasDone, ok, m)
		}
	}
}

// runVector is the procedure every reader follows on a vector: feed the
// records in order, taking every phase (Feed's, then Next's until none)
// and every skip after each record; stop at a marker of a newer version;
// then End when the vector says so, and take the checkpoint.
func runVector(v vector) vectorWant {
	r := NewReaderAt(v.Partition, Checkpoint{Offset: v.Start.Offset, Metadata: v.Start.Metadata})
	var w vectorWant
	take := func(p *Phase, err error) {
		for ; p != nil; p = r.Next() {
			vp := vectorPhase{Phase: p.ID, Count: ptr(p.Marker.Count)}
			for _, rec := range p.Records {
				vp.Offsets = append(vp.Offsets, rec.Offset)
			}
			w.Phases = append(w.Phases, vp)
		}
		for _, s := range r.Skipped() {
			w.Skipped = append(w.Skipped, vectorSkip(s))
		}
		for _, vl := range Violations(err) {
			w.Violations = append(w.Violations, vectorViol{Kind: vl.Kind.String(), Offset: vl.Offset})
		}
	}
	for _, vr := range v.Records {
		rec := Record{Offset: vr.Offset}
		if vr.Key != nil {
			rec.Key = []byte(*vr.Key)
		}
		if vr.Value != nil {
			rec.Value = []byte(*vr.Value)
		}
		for _, hv := range vr.Headers {
			rec.Headers = append(rec.Headers, h(hv[0], hv[1]))
		}
		p, err := r.Feed(rec)
		take(p, err)
		if errors.Is(err, ErrNewerVersion) {
			w.StoppedAt = ptr(vr.Offset)
			break
		}
	}
	if w.StoppedAt == nil {
		if v.End {
			take(nil, r.End())
		}
		if c, ok := r.Checkpoint(); ok {
			w.Checkpoint = &vectorStart{Offset: c.Offset, Metadata: c.Metadata}
		}
	}
	sortViolations(w.Violations)
	return w
}

// sortViolations orders violations by offset, then kind: readers need not
// report the violations of one record in the same order.
func sortViolations(vs []vectorViol) {
	slices.SortStableFunc(vs, func(a, b vectorViol) int {
		if a.Offset != b.Offset {
			return int(a.Offset - b.Offset)
		}
		switch {
		case a.Kind < b.Kind:
			return -1
		case a.Kind > b.Kind:
			return 1
		}
		return 0
	})
}

func ptr[T any](v T) *T { return &v }

// unchecked clears in got the counts that want leaves unchecked (null).
func unchecked(got, want vectorWant) vectorWant {
	for i := range got.Phases {
		if i < len(want.Phases) && want.Phases[i].Count == nil {
			got.Phases[i].Count = nil
		}
	}
	return got
}

// marshalVectors writes the file with one vector, and one metadata row,
// per line, so that a change to a table is a change to its lines.
func marshalVectors(t *testing.T, f vectorFile) []byte {
	t.Helper()
	var b bytes.Buffer
	line := func(prefix string, v any, suffix string) {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(prefix)
		b.Write(j)
		b.WriteString(suffix)
	}
	line("{\"comment\": ", f.Comment, ",\n\"vectors\": [\n")
	for i, v := range f.Vectors {
		line("", v, map[bool]string{true: ",\n", false: "\n"}[i < len(f.Vectors)-1])
	}
	b.WriteString("],\n\"metadata\": [\n")
	for i, m := range f.Metadata {
		line("", m, map[bool]string{true: ",\n", false: "\n"}[i < len(f.Metadata)-1])
	}
	b.WriteString("]}\n")
	return b.Bytes()
}

// toVectorRecs numbers recs from base and turns them into JSON.
func toVectorRecs(t *testing.T, recs []Record, base int64) []vectorRec {
	t.Helper()
	str := func(b []byte) *string {
		if b == nil {
			return nil
		}
		if !utf8.Valid(b) {
			t.Fatalf("a vector record holds invalid UTF-8: %q", b)
		}
		return ptr(string(b))
	}
	out := make([]vectorRec, len(recs))
	for i, rec := range recs {
		out[i] = vectorRec{Offset: base + int64(i), Key: str(rec.Key), Value: str(rec.Value), Headers: [][2]string{}}
		for _, hd := range rec.Headers {
			out[i].Headers = append(out[i].Headers, [2]string{*str(hd.Key), *str(hd.Value)})
		}
	}
	return out
}

// allVectors turns every reader table into vectors, expectations from the
// tables only.
func allVectors(t *testing.T) []vector {
	var out []vector
	fromZero := func(name string, recs []Record) vector {
		return vector{Name: name, Partition: testPartition, Records: toVectorRecs(t, recs, 0), End: true}
	}
	for _, c := range readerCases() {
		v := fromZero(c.name, c.recs)
		for _, g := range c.phases {
			v.Want.Phases = append(v.Want.Phases, vectorPhase{Phase: g.ID, Offsets: g.Offsets})
		}
		for _, vl := range c.violate {
			v.Want.Violations = append(v.Want.Violations, vectorViol{Kind: vl.Kind.String(), Offset: vl.Offset})
		}
		out = append(out, v.withEndCheckpoint())
	}
	for _, c := range severalCases() {
		v := fromZero(c.name, c.recs)
		for _, g := range c.phases {
			v.Want.Phases = append(v.Want.Phases, vectorPhase{Phase: g.ID, Offsets: g.Offsets, Count: ptr(g.Count)})
		}
		for _, vl := range c.violate {
			v.Want.Violations = append(v.Want.Violations, vectorViol{Kind: vl.Kind.String(), Offset: vl.Offset})
		}
		out = append(out, v.withEndCheckpoint())
	}
	for _, c := range checkpointCases() {
		out = append(out, c.vector(t))
	}
	for i := range out {
		sortViolations(out[i].Want.Violations)
	}
	return out
}

// withEndCheckpoint sets the checkpoint of a row of the older tables, all
// read from offset 0 to the end with End: End discards everything kept,
// so rule C1 gives the offset after the last record, and C2 the highest
// phase returned (these tables skip nothing).
func (v vector) withEndCheckpoint() vector {
	c := &vectorStart{Offset: int64(len(v.Records)), Metadata: string(AppendCheckpointMetadata(nil, 0, false))}
	if n := len(v.Want.Phases); n > 0 {
		c.Metadata = string(AppendCheckpointMetadata(nil, v.Want.Phases[n-1].Phase, true))
	}
	v.Want.Checkpoint = c
	return v
}

// metadataVectors are rule C2's table.
func metadataVectors() []metadataVector {
	return []metadataVector{
		{`{"phasegate":1,"done":42}`, true, ptr[uint64](42)},
		{`{"phasegate":1}`, true, nil},
		{`{"phasegate":1,"done":18446744073709551615}`, true, ptr[uint64](18446744073709551615)},
		{` { "done" : 7 , "phasegate" : 1 } `, true, ptr[uint64](7)},
		{`{"phasegate":1,"done":3,"note":"x"}`, true, ptr[uint64](3)},
		{"{\"phasegate\":1,\"done\":5}\x00", true, ptr[uint64](5)}, // confluent-kafka 2.16.1 commits a trailing NUL
		{"{\"phasegate\":1,\"done\":5}\x00\x00", false, nil},
		{``, false, nil},
		{`hello`, false, nil},
		{`{"done":3}`, false, nil},
		{`{"phasegate":2,"done":3}`, false, nil},
		{`{"phasegate":"1","done":3}`, false, nil},
		{`{"phasegate":1,"done":-1}`, false, nil},
		{`{"phasegate":1,"done":3.0}`, false, nil},
		{`{"phasegate":1,"done":"3"}`, false, nil},
		{`{"phasegate":1,"done":18446744073709551616}`, false, nil},
		{`{"phasegate":1,"done":3,"done":4}`, false, nil},
		{`{"phasegate":1,"done":null}`, false, nil},
		{`[{"phasegate":1}]`, false, nil},
		{`{"phasegate":1,"done":3`, false, nil},
	}
}
