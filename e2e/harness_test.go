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
