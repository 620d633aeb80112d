package verify

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/markers"
)

// rec builds a Record of partition p at offset off from a markers.Record.
func rec(p int32, r markers.Record, ms int64) Record {
	return Record{Partition: p, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: time.UnixMilli(ms)}
}

// run feeds parts round-robin, one record of each partition in turn (the
// way a consumer interleaves partitions), ends every partition (cut when
// cut[p]) and returns the violation lines, the phases handed to OnPhase
// and the report.
func run(parts [][]Record, midLog, cut []bool) (lines []string, phases []uint64, rep *Report) {
	c := New(Config{Partitions: int32(len(parts)),
		OnViolation: func(v Violation) { lines = append(lines, v.String()) },
		OnPhase:     func(s *PhaseSummary) { phases = append(phases, s.ID) },
	})
	for p := range parts {
		if midLog != nil && midLog[p] {
			c.StartsMidLog(int32(p))
		}
	}
	for i := 0; ; i++ {
		fed := false
		for p := range parts {
			if i < len(parts[p]) {
				c.Feed(&parts[p][i])
				fed = true
			}
		}
		if !fed {
			break
		}
	}
	for p := range parts {
		end := int64(0)
		if n := len(parts[p]); n > 0 {
			end = parts[p][n-1].Offset + 1
		}
		c.EndPartition(int32(p), end, cut != nil && cut[p])
	}
	return lines, phases, c.Finish(false)
}

// without is the line a violation prints, minus its advice.
func without(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i], _, _ = strings.Cut(l, "; do: ")
	}
	return out
}

func TestCheckerRules(t *testing.T) {
	d := func(p int32, phase uint64, src string, off int64) Record {
		return rec(p, data(phase, src, off), 1000*int64(phase)+off)
	}
	m := func(p int32, phase uint64, count, off int64) Record { return rec(p, marker(phase, p, count, off), 0) }
	good := func() [][]Record {
		return [][]Record{
			{d(0, 1, "a/0/0", 0), m(0, 1, 1, 1), d(0, 2, "a/0/1", 2), m(0, 2, 1, 3)},
			{m(1, 1, 0, 0), d(1, 2, "a/1/0", 1), m(1, 2, 1, 2)},
		}
	}
	cases := []struct {
		name    string
		mutate  func([][]Record) [][]Record
		midLog  []bool
		cut     []bool
		want    []string // violation lines without their advice
		phases  []uint64 // handed to OnPhase, in order
		leadIn  int64
		leadOut int64
	}{
		{name: "whole phases pass", mutate: func(p [][]Record) [][]Record { return p }, phases: []uint64{1, 2}},
		{name: "torn phase: data and no marker at the end", mutate: func(p [][]Record) [][]Record {
			p[0] = append(p[0], d(0, 3, "a/0/9", 4))
			return p
		}, want: []string{"partition 0 offset 4 phase 3 missing-marker: 1 data records of phase 3 and no marker for it (no marker before the end)"}, phases: []uint64{1, 2}},
		{name: "a cut range leaves the last phase unchecked", mutate: func(p [][]Record) [][]Record {
			p[0] = append(p[0], d(0, 3, "a/0/9", 4))
			return p
		}, cut: []bool{true, false}, phases: []uint64{1, 2}, leadOut: 1},
		{name: "data after marker", mutate: func(p [][]Record) [][]Record {
			p[0] = append(p[0], d(0, 2, "a/0/9", 4))
			return p
		}, want: []string{"partition 0 offset 4 phase 2 data-after-marker: a data record of phase 2 after the marker for phase 2"}, phases: []uint64{1, 2}},
		{name: "count mismatch", mutate: func(p [][]Record) [][]Record {
			p[0][1] = m(0, 1, 2, 1)
			return p
		}, want: []string{"partition 0 offset 1 phase 1 count-mismatch: the marker counts 2 data records, 1 came before it"}, phases: []uint64{1, 2}},
		{name: "marker missing on one partition", mutate: func(p [][]Record) [][]Record {
			p[1] = []Record{d(1, 2, "a/1/0", 1), m(1, 2, 1, 2)}
			return p
		}, want: []string{"partition 1 offset 2 phase 1 marker-not-on-every-partition: the phase has 1 data records on other partitions and no marker here (the next marker here is for phase 2)"}, phases: []uint64{1, 2}},
		{name: "duplicate id across partitions", mutate: func(p [][]Record) [][]Record {
			p[1][1] = d(1, 2, "a/0/1", 1)
			return p
		}, want: []string{`partition 0 offset 2 phase 2 duplicate-id: phasegate.id "a/0/1" is also on partition 1 in this phase`}, phases: []uint64{1, 2}},
		{name: "duplicate id on one partition", mutate: func(p [][]Record) [][]Record {
			p[0] = []Record{d(0, 1, "a/0/0", 0), d(0, 1, "a/0/0", 1), m(0, 1, 2, 2), d(0, 2, "a/0/1", 3), m(0, 2, 1, 4)}
			return p
		}, want: []string{`partition 0 offset 1 phase 1 duplicate-id: phasegate.id "a/0/0" seen twice`}, phases: []uint64{1, 2}},
		{name: "phase going backwards", mutate: func(p [][]Record) [][]Record {
			p[0] = append(p[0], m(0, 1, 0, 4))
			return p
		}, want: []string{"partition 0 offset 4 phase 1 phase-backwards: phase 1 after phase 2 (marker after the marker for phase 2)"}, phases: []uint64{1, 2}},
		{name: "a mid-log start skips to the first marker", mutate: func(p [][]Record) [][]Record {
			p[0] = p[0][:0:0]
			p[0] = append(p[0], d(0, 1, "a/0/0", 0), m(0, 1, 1, 1), d(0, 2, "a/0/1", 2), m(0, 2, 1, 3))
			p[0][1] = m(0, 1, 5, 1) // its count covers records before the range: not checked
			return p
		}, midLog: []bool{true, false}, phases: []uint64{1, 2}, leadIn: 2},
		{name: "a mid-log partition with no marker in its range checks nothing of it", mutate: func(p [][]Record) [][]Record {
			p[1] = []Record{d(1, 2, "a/1/0", 1)}
			return p
		}, midLog: []bool{false, true}, phases: []uint64{1, 2}, leadIn: 1},
		{name: "a malformed first marker keeps a mid-log partition in its lead-in", mutate: func(p [][]Record) [][]Record {
			p[1][0].Value = []byte("{")
			return p
		}, midLog: []bool{false, true}, phases: []uint64{1, 2}, leadIn: 3},
		{name: "sealed_by may differ across partitions (an instance seals a phase per task it owns)", mutate: func(p [][]Record) [][]Record {
			mk := markers.Marker{Phase: 2, Partition: 1, Count: 1, Sources: map[string]int64{"a": 1}, SealedBy: markers.SealedByIdle, Emitter: "t"}
			p[1][2].Value = mk.AppendOutput(nil)
			return p
		}, phases: []uint64{1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines, phases, rep := run(c.mutate(good()), c.midLog, c.cut)
			if got := without(lines); !slices.Equal(got, c.want) {
				t.Errorf("violations:\n got %q\nwant %q", got, c.want)
			}
			if !slices.Equal(phases, c.phases) {
				t.Errorf("phases %v, want %v", phases, c.phases)
			}
			if rep.Stats.LeadIn != c.leadIn || rep.Stats.LeadOut != c.leadOut {
				t.Errorf("lead-in %d lead-out %d, want %d and %d", rep.Stats.LeadIn, rep.Stats.LeadOut, c.leadIn, c.leadOut)
			}
			if rep.Whole() != (len(c.want) == 0) || rep.Stats.Violations != len(c.want) {
				t.Errorf("report: whole=%v violations=%d", rep.Whole(), rep.Stats.Violations)
			}
		})
	}
}

// A phase is handed over as soon as every partition passed it, not at the
// end, and a partition running ahead is not Behind: the open phases are
// what memory grows with.
func TestCheckerStreamsPhaseByPhase(t *testing.T) {
	var got []uint64
	c := New(Config{Partitions: 2, OnPhase: func(s *PhaseSummary) { got = append(got, s.ID) }})
	feed := func(r markers.Record, p int32) {
		x := rec(p, r, 0)
		c.Feed(&x)
	}
	for i := range int64(5) { // partition 0 runs 5 phases ahead
		feed(data(uint64(i+1), "a/0/"+string(rune('0'+i)), 2*i), 0)
		feed(marker(uint64(i+1), 0, 1, 2*i+1), 0)
	}
	if c.Open() != 5 || len(got) != 0 || c.Behind(0) || !c.Behind(1) {
		t.Fatalf("open=%d handed=%v behind(0)=%v behind(1)=%v", c.Open(), got, c.Behind(0), c.Behind(1))
	}
	feed(marker(3, 1, 0, 0), 1)
	if c.Open() != 2 || !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("after partition 1 passed phase 3: open=%d handed=%v", c.Open(), got)
	}
}

func TestSourceHistograms(t *testing.T) {
	parts := [][]Record{{
		rec(0, data(1, "orders/0/0", 0), 1000), rec(0, data(1, "orders/0/1", 1), 1040), rec(0, data(1, "pay/1/0", 2), 1001),
		rec(0, marker(1, 0, 3, 3), 0),
	}}
	_, _, rep := run(parts, nil, nil)
	if len(rep.Sources) != 2 || rep.Sources[0].Topic != "orders" || rep.Sources[1].Topic != "pay" {
		t.Fatalf("sources %+v", rep.Sources)
	}
	o := rep.Sources[0]
	// 40 ms falls in (20, 50]: bucket 6; 2 records in (1, 10]: bucket 2.
	if o.Records != 2 || o.MaxDuration != 40*time.Millisecond || o.DurationsMs.Counts[6] != 1 || o.RecordsByPhase.Counts[2] != 1 {
		t.Fatalf("orders: %+v", o)
	}
}
