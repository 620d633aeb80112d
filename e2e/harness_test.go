//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The suite's own reading of records: if these are wrong, every scenario's
// verdict is. They need no broker.

func TestExpectationOf(t *testing.T) {
	cases := []struct {
		name  string
		value string
		want  expectation
	}{
		{"data record", string(value(7, expectData)), expectData},
		{"late record", string(value(7, "late")), "late"},
		{"hand-written marker", `{"v":1,"phase":3,"partition":0,"e2e_seq":9,"expect":"stale-marker"}`, "stale-marker"},
		{"marker with a count before it", `{"v":1,"phase":3,"partition":0,"count":1000000,"e2e_seq":9,"expect":"count-mismatch"}`, "count-mismatch"},
		{"not json", "not json e2e_seq=4 expect=malformed", "malformed"},
		{"foreign record", "hello", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := expectationOf([]byte(c.value)); got != c.want {
				t.Fatalf("expectationOf(%q) = %q, want %q", c.value, got, c.want)
			}
		})
	}
}

func TestToInputsPhase(t *testing.T) {
	ts := time.UnixMilli(1_000_050) // phase 10000 at 100 ms
	cases := []struct {
		name    string
		headers []kgo.RecordHeader
		phase   uint64
		id      string
		marker  bool
	}{
		{"timestamp", nil, 10000, "t/1/5", false},
		{"header wins", []kgo.RecordHeader{{Key: "phasegate.phase", Value: []byte("42")}}, 42, "t/1/5", false},
		{"malformed header", []kgo.RecordHeader{{Key: "phasegate.phase", Value: []byte("+5")}}, 0, "t/1/5", false},
		{"empty header", []kgo.RecordHeader{{Key: "phasegate.phase", Value: nil}}, 0, "t/1/5", false},
		{"id header", []kgo.RecordHeader{{Key: "phasegate.id", Value: []byte("retry-1")}}, 10000, "retry-1", false},
		{"marker", []kgo.RecordHeader{{Key: "phasegate.marker", Value: []byte("1")}, {Key: "phasegate.phase", Value: []byte("9")}}, 9, "t/1/5", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &kgo.Record{Topic: "t", Partition: 1, Offset: 5, Timestamp: ts, Headers: c.headers}
			in := toInputs([][]*kgo.Record{{r}})[0]
			if in.Phase != c.phase || in.ID != c.id || in.Marker != c.marker || in.Source != "t/1/5" {
				t.Fatalf("got %+v, want phase %d id %s marker %v", in.Input, c.phase, c.id, c.marker)
			}
		})
	}
}

func TestCompareIsolation(t *testing.T) {
	rec := func(p int32, off int64, v string) *kgo.Record {
		return &kgo.Record{Topic: "o", Partition: p, Offset: off, Value: []byte(v)}
	}
	cases := []struct {
		name        string
		committed   [][]*kgo.Record
		uncommitted [][]*kgo.Record
		aborted     int
		err         string
	}{
		{"aborted records only in the uncommitted view",
			[][]*kgo.Record{{rec(0, 2, "b")}}, [][]*kgo.Record{{rec(0, 0, "x"), rec(0, 2, "b")}}, 1, ""},
		{"a committed record the uncommitted view lacks",
			[][]*kgo.Record{{rec(0, 3, "b")}}, [][]*kgo.Record{{rec(0, 2, "b")}}, 0, "not in the read_uncommitted view"},
		{"same offset, other value",
			[][]*kgo.Record{{rec(0, 2, "b")}}, [][]*kgo.Record{{rec(0, 2, "c")}}, 0, "differs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := compareIsolation(c.committed, c.uncommitted)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("err = %v, want %q", err, c.err)
			}
			if c.err == "" && n != c.aborted {
				t.Fatalf("aborted = %d, want %d", n, c.aborted)
			}
		})
	}
}

func TestCompareJava(t *testing.T) {
	marker := &kgo.Record{Partition: 0, Offset: 1, Headers: []kgo.RecordHeader{{Key: "phasegate.marker", Value: []byte("1")}}}
	data := &kgo.Record{Partition: 0, Offset: 0}
	kgoRead := [][]*kgo.Record{{data, marker}}
	cases := []struct {
		name string
		jr   javaRead
		err  string
	}{
		{"same records and markers", javaRead{positions: map[position]bool{{0, 0}: true, {0, 1}: true}, markers: 1, processed: 2}, ""},
		{"a record missing", javaRead{positions: map[position]bool{{0, 1}: true}, markers: 1, processed: 1}, "did not"},
		{"a marker too few", javaRead{positions: map[position]bool{{0, 0}: true, {0, 1}: true}, markers: 0, processed: 2}, "0 markers"},
		{"its own count differs", javaRead{positions: map[position]bool{{0, 0}: true, {0, 1}: true}, markers: 1, processed: 3}, "it says 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := compareJava(&c.jr, kgoRead)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("err = %v, want %q", err, c.err)
			}
		})
	}
}

// TestR2Judge runs R2's judge on made-up runs: each rule it enforces
// fails the runs that break it.
func TestR2Judge(t *testing.T) {
	truth := map[phaseKey]truePhase{
		{0, 10}: {rest: "records=2 sources=o:2 marker_count=2 sealed_by=watermark", records: 2, first: 0, last: 4},
		{0, 11}: {rest: "records=1 sources=o:1 marker_count=1 sealed_by=watermark", records: 1, first: 3, last: 7},
		{0, 12}: {rest: "records=0 sources= marker_count=0 sealed_by=idle", records: 0, first: 8, last: 9},
	}
	l10 := "phase=10 partition=0 " + truth[phaseKey{0, 10}].rest
	l11 := "phase=11 partition=0 " + truth[phaseKey{0, 11}].rest + " joined=0 unmatched=1"
	l12 := "phase=12 partition=0 " + truth[phaseKey{0, 12}].rest
	short11 := "phase=11 partition=0 records=0 sources= marker_count=1 sealed_by=watermark"
	killed := func(lines []string, offset int64, meta string) *readerRun {
		return &readerRun{lines: lines, killed: true, code: -1, ok: true, after: map[int32]groupCommit{0: {offset, meta}}}
	}
	last := func(lines ...string) *readerRun { return &readerRun{lines: lines, ok: true} }
	cases := []struct {
		name    string
		runs    []*readerRun
		mid     *midStart
		err     string
		repeats int
	}{
		{"every phase once", []*readerRun{last(l10, l11, l12)}, nil, "", 0},
		{"a short phase", []*readerRun{last(l10, short11, l12)}, nil, "printed phase=11 partition=0 records=0", 0},
		{"a missing phase", []*readerRun{last(l10, l12)}, nil, "1 phases of the output never printed: phase=11", 0},
		{"twice in one run", []*readerRun{last(l10, l10, l11, l12)}, nil, "over twice", 1},
		{"a violation", []*readerRun{last(l10, "VIOLATION partition=0: x", l11, l12)}, nil, "VIOLATION", 0},
		{"a bad exit", []*readerRun{{lines: []string{l10, l11, l12}, code: 3}}, nil, "status 3", 0},
		{"repeat above the committed done", []*readerRun{killed([]string{l10, l11}, 3, `{"phasegate":1,"done":10}`), last(l11, l12)}, nil, "", 1},
		{"repeat at the committed done", []*readerRun{killed([]string{l10, l11}, 8, `{"phasegate":1,"done":11}`), last(l11, l12)}, nil, "printed phase=11 partition=0 again after a restart", 1},
		{"a commit with confluent-kafka's trailing NUL", []*readerRun{killed([]string{l10, l11}, 8, `{"phasegate":1,"done":11}`+"\x00"), last(l11, l12)}, nil, "printed phase=11 partition=0 again after a restart", 1},
		{"no commit yet: all may repeat", []*readerRun{killed([]string{l10}, 0, `{"phasegate":1}`), last(l10, l11, l12)}, nil, "", 1},
		{"commit past a later phase's record", []*readerRun{killed([]string{l10}, 5, `{"phasegate":1,"done":10}`), last(l11, l12)}, nil, "past a record of phase=11 partition=0 at offset 3", 0},
		{"commit without metadata", []*readerRun{killed([]string{l10}, 5, ``), last(l11, l12)}, nil, "no checkpoint metadata", 0},
		{"a skip from offset 0", []*readerRun{last("skipped phase=10 partition=0 records=1", l11, l12)}, nil, "started at offset 0", 0},
		{"mid: skipped, then whole", []*readerRun{last("skipped phase=11 partition=0 records=1", l12)}, &midStart{at: map[int32]int64{0: 5}, last: lastMarkers{0: {-1: 9}}}, "", 0},
		{"mid: a phase straddling the start missing", []*readerRun{last(l12)}, &midStart{at: map[int32]int64{0: 5}, last: lastMarkers{0: {-1: 9}}}, "never printed nor skipped: phase=11", 0},
		{"mid: skipped and printed", []*readerRun{last("skipped phase=11 partition=0 records=1", l11, l12)}, &midStart{at: map[int32]int64{0: 5}, last: lastMarkers{0: {-1: 9}}}, "both printed and skipped", 0},
		{"mid: a writer silent after the start", []*readerRun{last()}, &midStart{at: map[int32]int64{0: 5}, last: lastMarkers{0: {0: 9, 1: 4}}}, "writers 1 (last marker at offset 4) wrote their last marker before the start", 0},
		{"mid: skipped with more records than the phase", []*readerRun{last("skipped phase=11 partition=0 records=2", l12)}, &midStart{at: map[int32]int64{0: 5}, last: lastMarkers{0: {-1: 9}}}, "2 records read", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := judge(truth, c.runs, c.mid)
			all := strings.Join(v.errs, "\n")
			if c.err == "" && len(v.errs) > 0 || c.err != "" && !strings.Contains(all, c.err) {
				t.Fatalf("errors:\n%s\nwant %q", all, c.err)
			}
			if v.repeats != c.repeats {
				t.Fatalf("repeats = %d, want %d", v.repeats, c.repeats)
			}
		})
	}
}
