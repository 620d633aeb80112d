package verify

import (
	"slices"
	"strconv"
	"testing"

	"github.com/phasegate/phasegate/markers"
)

// dataW and markerW are the records of writer task of 2 (MARKERS.md 3.3).
func dataW(phase uint64, task int32, src string, off int64) markers.Record {
	return data(phase, src, off, strconv.AppendInt(nil, int64(task), 10)...)
}

func markerW(phase uint64, part, task int32, count, off int64) markers.Record {
	m := markers.Marker{Phase: phase, Partition: part, Count: count, HasCount: true, Task: task, Writers: 2,
		Sources: map[string]int64{"a": count}, SealedBy: markers.SealedByWatermark, Emitter: "t"}
	return markers.Record{Offset: off, Value: m.AppendOutput(nil), Headers: markers.AppendMarkerHeaders[markers.Header](nil, markers.AppendPhase(nil, phase))}
}

// Key-routed output of two writers per partition, whose transactions
// interleave (writer 0 is a phase ahead of writer 1): checked through
// markers.Reader's lanes, one record completing two phases at once.
func TestCheckerSeveralWriters(t *testing.T) {
	w := func(p int32, r markers.Record) Record { return rec(p, r, 1000*int64(r.Offset)) }
	good := func() [][]Record {
		return [][]Record{{
			w(0, dataW(1, 0, "a/0/0", 0)), w(0, markerW(1, 0, 0, 1, 1)),
			w(0, dataW(2, 0, "a/0/1", 2)), w(0, markerW(2, 0, 0, 1, 3)), // writer 0 marks +2 before writer 1 marks anything
			w(0, markerW(2, 0, 1, 0, 4)), // writer 1, no data here: one marker completes +1 and +2
		}, {
			w(1, markerW(1, 1, 0, 0, 0)), w(1, markerW(1, 1, 1, 0, 1)),
			w(1, markerW(2, 1, 0, 0, 2)), w(1, dataW(2, 1, "a/1/1", 3)), w(1, markerW(2, 1, 1, 1, 4)),
		}}
	}
	cases := []struct {
		name   string
		mutate func([][]Record) [][]Record
		want   int // violations
		phases []uint64
	}{
		{name: "interleaved lanes pass", mutate: func(p [][]Record) [][]Record { return p }, phases: []uint64{1, 2}},
		{name: "a lane's count is checked on its own", mutate: func(p [][]Record) [][]Record {
			p[1][4] = w(1, markerW(2, 1, 1, 2, 4))
			return p
		}, want: 1, phases: []uint64{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines, phases, rep := run(tc.mutate(good()), nil, nil)
			if len(lines) != tc.want {
				t.Fatalf("violations %q, want %d", lines, tc.want)
			}
			if !slices.Equal(phases, tc.phases) {
				t.Fatalf("phases %v, want %v", phases, tc.phases)
			}
			if rep.Stats.Data != 3 || rep.Stats.Markers != 7 {
				t.Fatalf("stats: %d data %d markers, want 3 and 7", rep.Stats.Data, rep.Stats.Markers)
			}
		})
	}
}
