package verify

import (
	"strings"
	"testing"

	"github.com/phasegate/phasegate/markers"
)

// data is an output data record from input record src, written by the
// only writer of its partition, or by writer task when task is not nil.
func data(phase uint64, src string, off int64, task ...byte) markers.Record {
	return markers.Record{Offset: off, Value: []byte("v"),
		Headers: markers.AppendDataHeaders[markers.Header](nil, markers.DataHeaders{}, markers.AppendPhase(nil, phase), []byte(src), task)}
}

func marker(phase uint64, part int32, count int64, off int64) markers.Record {
	m := markers.Marker{Phase: phase, Partition: part, Count: count, HasCount: true,
		Sources: map[string]int64{"a": count}, SealedBy: markers.SealedByWatermark, Emitter: "t"}
	return markers.Record{Offset: off, Value: m.AppendOutput(nil), Headers: markers.AppendMarkerHeaders[markers.Header](nil, markers.AppendPhase(nil, phase))}
}

// A correct topic passes; each broken rule is reported.
func TestCheckOutput(t *testing.T) {
	good := func() [][]markers.Record {
		return [][]markers.Record{
			{data(1, "a/0/0", 0), marker(1, 0, 1, 1), data(2, "a/0/1", 2), marker(2, 0, 1, 3)},
			{marker(1, 1, 0, 0), data(2, "a/1/0", 1), marker(2, 1, 1, 2)},
		}
	}
	cases := []struct {
		name   string
		mutate func([][]markers.Record) [][]markers.Record
		want   string // substring of the violation; "" = none
	}{
		{"whole phases pass", func(p [][]markers.Record) [][]markers.Record { return p }, ""},
		{"marker missing on a partition", func(p [][]markers.Record) [][]markers.Record {
			p[1] = []markers.Record{data(2, "a/1/0", 1), marker(2, 1, 1, 2)}
			return p
		}, "marker-not-on-every-partition"},
		{"same id twice in a phase across partitions", func(p [][]markers.Record) [][]markers.Record {
			p[1][1] = data(2, "a/0/1", 1)
			return p
		}, "duplicate-id"},
		{"same input record in two phases", func(p [][]markers.Record) [][]markers.Record {
			p[1][1] = data(2, "a/0/0", 1)
			p[1][1].Headers[1].Value = []byte("other-id")
			return p
		}, "published-twice"},
		{"count mismatch", func(p [][]markers.Record) [][]markers.Record {
			p[0][1] = marker(1, 0, 2, 1)
			return p
		}, "count"},
		{"data after its marker", func(p [][]markers.Record) [][]markers.Record {
			p[0] = append(p[0], data(2, "a/0/9", 4))
			return p
		}, "after the marker"},
		{"data without marker at the end", func(p [][]markers.Record) [][]markers.Record {
			p[0] = append(p[0], data(3, "a/0/9", 4))
			return p
		}, "no marker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckOutput(c.mutate(good())).Err()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("violations on a correct topic: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want a violation mentioning %q", err, c.want)
			}
		})
	}
}

func TestAccount(t *testing.T) {
	out := CheckOutput([][]markers.Record{{data(1, "a/0/0", 0), marker(1, 0, 1, 1)}})
	quar := []markers.Record{{Headers: []markers.Header{
		{Key: []byte(markers.HeaderSource), Value: []byte("a/0/2")},
		{Key: []byte(markers.HeaderReason), Value: []byte("late")},
	}}}
	in := func(src string, id string, phase uint64) Input { return Input{Source: src, ID: id, Phase: phase} }
	cases := []struct {
		name   string
		inputs []Input
		want   string
		counts string // Accounting.String() when want is ""
	}{
		{"published, quarantined and a proven duplicate", []Input{in("a/0/0", "a/0/0", 1), in("a/0/1", "a/0/0", 1), in("a/0/2", "x", 0)}, "",
			"in=3 out=1 quarantined=1 (late=1) duplicates=1 markers_in=0"},
		{"lost record", []Input{in("a/0/0", "a/0/0", 1), in("a/0/7", "z", 1)}, "neither in the output", ""},
		{"retry of a quarantined record is a proven duplicate", []Input{in("a/0/0", "a/0/0", 1), in("a/0/2", "late-1", 0), in("a/0/3", "late-1", 0)}, "",
			"in=3 out=1 quarantined=1 (late=1) duplicates=1 markers_in=0"},
		{"a quarantined twin in another phase is not proof", []Input{in("a/0/0", "a/0/0", 1), in("a/0/2", "late-1", 0), in("a/0/3", "late-1", 7)}, "neither in the output", ""},
		{"duplicate in another phase is not proof", []Input{in("a/0/0", "a/0/0", 1), in("a/0/1", "a/0/0", 2)}, "neither in the output", ""},
		{"published in the wrong phase", []Input{in("a/0/0", "a/0/0", 5)}, "published in phase 1", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acc := Account(c.inputs, out, quar)
			err := acc.Err()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("violations: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if c.want == "" && acc.String() != c.counts {
				t.Fatalf("counts: %s", acc)
			}
		})
	}
}
