package proxy

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
)

// part is a partition row for the summary tests: topic/partition with
// watermark phase wm and consumer lag; opts set the rest.
func part(topic string, p int32, wm uint64, lag int64, opts ...func(*PartitionStatus)) PartitionStatus {
	ps := PartitionStatus{Topic: topic, Partition: p, Watermark: wm, Lag: lag, LagKnown: true}
	for _, o := range opts {
		o(&ps)
	}
	return ps
}

func idle(p *PartitionStatus)    { p.Idle = true }
func holding(p *PartitionStatus) { p.HoldsWatermark = true }
func noLag(p *PartitionStatus)   { p.LagKnown, p.Lag = false, 0 }
func pausedBy(reasons ...string) func(*PartitionStatus) {
	return func(p *PartitionStatus) { p.Paused, p.PauseReasons = true, reasons }
}
func deferred(reasons ...string) func(*PartitionStatus) {
	return func(p *PartitionStatus) { p.PauseReasons = reasons }
}
func buffered(n int) func(*PartitionStatus) {
	return func(p *PartitionStatus) { p.BufferedRecords = n }
}

func keys(ps []PartitionStatus) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Topic+"/"+strconv.Itoa(int(p.Partition)))
	}
	return out
}

// counts is the part of a Summary a case states.
type counts struct {
	Parts, Live, Idle, Paused, Deferred, AtWM, Holding, WithLag, LagUnknown, Buffered int
	Lag                                                                               int64
}

func countsOf(s *Summary) counts {
	return counts{s.Partitions, s.Live, s.Idle, s.Paused, s.PauseDeferred, s.AtWatermark, s.Holding, s.WithLag, s.LagUnknown, s.BufferedRecords, s.Lag}
}

func TestSummarize(t *testing.T) {
	// many is 2,048 partitions over two topics: partition i has lag i mod
	// 700; the eleven with i mod 200 == 7 hold the watermark at phase 10,
	// every 28th (not holding) is idle and every 5th of the rest paused
	// by the buffer.
	many := &Status{GlobalWatermark: 10}
	for i := range 2048 {
		topic := "a"
		if i >= 1024 {
			topic = "b"
		}
		p := part(topic, int32(i%1024), 12, int64(i%700))
		switch {
		case i%200 == 7:
			p.Watermark, p.HoldsWatermark = 10, true
		case i%28 == 0:
			p.Idle, p.Watermark = true, 3
		case i%5 == 0:
			p.Paused, p.PauseReasons = true, []string{"buffer"}
		}
		many.Partitions = append(many.Partitions, p)
	}

	tests := []struct {
		name     string
		st       *Status
		top      int
		want     counts
		pausedBy map[string]int
		topics   []TopicSummary
		holders  []string
		lagging  []string
	}{
		{
			name: "not in the group yet: zeros and empty lists", st: &Status{}, top: DefaultTop,
			pausedBy: map[string]int{}, topics: []TopicSummary{}, holders: []string{}, lagging: []string{},
		},
		{
			name: "one of each state",
			st: &Status{GlobalWatermark: 102, Partitions: []PartitionStatus{
				part("orders", 0, 103, 0, buffered(40)),
				part("orders", 1, 104, 12, pausedBy("buffer"), buffered(9)),
				part("payments", 0, 102, 0, holding),
				part("payments", 1, 90, 0, idle), // lowest, but idle: not at the watermark
			}},
			top:      DefaultTop,
			want:     counts{Parts: 4, Live: 2, Idle: 1, Paused: 1, AtWM: 1, Holding: 1, WithLag: 1, Buffered: 49, Lag: 12},
			pausedBy: map[string]int{"buffer": 1},
			topics: []TopicSummary{{Topic: "orders", Partitions: 2, Live: 1, Paused: 1, Lag: 12},
				{Topic: "payments", Partitions: 2, Live: 1, Idle: 1}},
			holders: []string{"payments/0"}, lagging: []string{"orders/1"},
		},
		{
			name: "idle and paused counts as idle; deferred pauses and unknown lag are counted apart",
			st: &Status{GlobalWatermark: 5, Partitions: []PartitionStatus{
				part("t", 0, 9, 0, idle, pausedBy("align")),
				part("t", 1, 5, 3, deferred("buffer")),
				part("t", 2, 7, 0, noLag, pausedBy("buffer", "align")),
				part("t", 3, 6, 0, noLag),
			}},
			top:      DefaultTop,
			want:     counts{Parts: 4, Live: 2, Idle: 1, Paused: 1, Deferred: 1, AtWM: 1, WithLag: 1, LagUnknown: 2, Lag: 3},
			pausedBy: map[string]int{"buffer": 1, "align": 1},
			topics:   []TopicSummary{{Topic: "t", Partitions: 4, Live: 2, Idle: 1, Paused: 1, Lag: 3}},
			holders:  []string{}, lagging: []string{"t/1"},
		},
		{
			name: "most lagging first; equal lag: lower watermark, then topic and partition",
			st: &Status{Partitions: []PartitionStatus{
				part("b", 0, 4, 50), part("a", 1, 4, 50), part("a", 0, 4, 50), part("c", 0, 3, 50),
				part("a", 2, 4, 70), part("a", 3, 4, 10), part("a", 4, 4, 0),
			}},
			top:      4,
			want:     counts{Parts: 7, Live: 7, WithLag: 6, Lag: 280},
			pausedBy: map[string]int{},
			topics: []TopicSummary{{Topic: "a", Partitions: 5, Live: 5, Lag: 180}, {Topic: "b", Partitions: 1, Live: 1, Lag: 50},
				{Topic: "c", Partitions: 1, Live: 1, Lag: 50}},
			holders: []string{}, lagging: []string{"a/2", "c/0", "a/0", "a/1"},
		},
		{
			name: "top 0: counts only", st: &Status{Partitions: []PartitionStatus{part("t", 0, 1, 5, holding), part("t", 1, 2, 0)}},
			top: 0, want: counts{Parts: 2, Live: 2, AtWM: 0, Holding: 1, WithLag: 1, Lag: 5}, pausedBy: map[string]int{},
			topics:  []TopicSummary{{Topic: "t", Partitions: 2, Live: 2, Lag: 5}},
			holders: []string{}, lagging: []string{},
		},
		{
			name: "2,048 partitions: eleven holders, the top 10 of each list", st: many, top: 10,
			want:     counts{Parts: 2048, Live: 1579, Idle: 74, Paused: 395, AtWM: 11, Holding: 11, WithLag: 2045, Lag: lagSum(2048, 700)},
			pausedBy: map[string]int{"buffer": 395},
			topics: []TopicSummary{{Topic: "a", Partitions: 1024, Live: 790, Idle: 37, Paused: 197, Lag: lagSum(1024, 700)},
				{Topic: "b", Partitions: 1024, Live: 789, Idle: 37, Paused: 198, Lag: lagSum(2048, 700) - lagSum(1024, 700)}},
			// holders i = 7, 207, ..., 2007 (lag i mod 700), most lag first,
			// equal lag by topic: 607 (a/607, b/983 = i 2007), 507 (b/183), 407 ...
			holders: []string{"a/607", "b/983", "b/183", "a/407", "b/783", "a/1007", "a/207", "b/583", "a/807", "a/7"},
			// lag 699: i = 699, 1399; 698: 698, 1398; ...
			lagging: []string{"a/699", "b/375", "a/698", "b/374", "a/697", "b/373", "a/696", "b/372", "a/695", "b/371"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summarize(tt.st, tt.top)
			if got := countsOf(s); got != tt.want {
				t.Errorf("counts\n got %+v\nwant %+v", got, tt.want)
			}
			if s.Live+s.Idle+s.Paused != s.Partitions {
				t.Errorf("live %d + idle %d + paused %d != %d partitions", s.Live, s.Idle, s.Paused, s.Partitions)
			}
			if !maps.Equal(s.PausedBy, tt.pausedBy) {
				t.Errorf("paused by reason %v, want %v", s.PausedBy, tt.pausedBy)
			}
			if !reflect.DeepEqual(s.Topics, tt.topics) {
				t.Errorf("topics\n got %+v\nwant %+v", s.Topics, tt.topics)
			}
			if got := keys(s.Holders); !slices.Equal(got, tt.holders) {
				t.Errorf("holders %v, want %v", got, tt.holders)
			}
			if got := keys(s.MostLagging); !slices.Equal(got, tt.lagging) {
				t.Errorf("most lagging %v, want %v", got, tt.lagging)
			}
			if s.Top != tt.top {
				t.Errorf("top %d, want %d", s.Top, tt.top)
			}
		})
	}
}

// lagSum is the sum of i mod m over i < n.
func lagSum(n, m int) int64 {
	var s int64
	for i := range n {
		s += int64(i % m)
	}
	return s
}

// The default /phases body leaves the rows out and says how to get them;
// ?partitions=all adds them. Either way it keeps every other field of
// Status under the same name, so a client reading joined, sealed or
// peak_buffered_bytes (the e2e harness, pgbench) reads the same values.
func TestNewPhases(t *testing.T) {
	last := uint64(7)
	st := &Status{
		Updated: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Joined: true, Ready: true, GlobalWatermark: 8, GlobalMs: 1,
		LastSealed: &last, SealTimeout: "5s", BufferedBytes: 10, MaxBufferBytes: 20, PeakBufferedBytes: 15,
		Partitions: []PartitionStatus{part("t", 0, 8, 3, holding), part("t", 1, 9, 0)},
		OpenPhases: []OpenPhaseStatus{{Phase: 8, Records: 1}},
		Sealed:     []SealStatus{{Phase: 7, SealedBy: "watermark"}},
	}
	asMap := func(v any) map[string]any {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	old := asMap(st)
	tests := []struct {
		name      string
		st        *Status
		all       bool
		wantParts any // the "partitions" value; nil: left out
		fullList  string
	}{
		{name: "summary by default", st: st, fullList: FullListPath},
		{name: "every row when asked", st: st, all: true, wantParts: old["partitions"]},
		{name: "asked, none assigned: an empty list", st: &Status{Updated: st.Updated}, all: true, wantParts: []any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := Query{Top: DefaultTop}
			if tt.all {
				q.Rows = "all"
			}
			ph := NewPhases(tt.st, q)
			got := asMap(ph)
			parts, ok := got["partitions"]
			if (tt.wantParts != nil) != ok || !reflect.DeepEqual(parts, tt.wantParts) {
				t.Errorf("partitions present %v: %v, want %v", ok, parts, tt.wantParts)
			}
			if ph.Summary == nil || ph.Summary.FullList != tt.fullList {
				t.Fatalf("summary %+v, want full_list %q", ph.Summary, tt.fullList)
			}
			if got["summary"].(map[string]any)["partitions"] != float64(len(tt.st.Partitions)) {
				t.Errorf("summary.partitions = %v, want %d", got["summary"], len(tt.st.Partitions))
			}
			for k, v := range asMap(tt.st) {
				if k == "partitions" {
					continue
				}
				if !reflect.DeepEqual(got[k], v) {
					t.Errorf("%s = %v, Status has %v", k, got[k], v)
				}
			}
		})
	}
}

// ?partitions=<state> sends the rows of the partitions in that state, in
// the Status's order; offset and limit cut a page out of them, and the
// selection says how many matched.
func TestNewPhasesRows(t *testing.T) {
	st := &Status{Partitions: []PartitionStatus{
		part("t", 0, 5, 0), part("t", 1, 5, 3, pausedBy("buffer")), part("t", 2, 4, 9, holding), part("t", 3, 1, 0, idle),
		part("t", 4, 5, 2), part("t", 5, 5, 0, idle, pausedBy("align")), part("t", 6, 5, 1, pausedBy("buffer")),
	}}
	tests := []struct {
		name    string
		q       Query
		want    []string
		matched int
	}{
		{name: "all", q: Query{Rows: "all"}, want: []string{"t/0", "t/1", "t/2", "t/3", "t/4", "t/5", "t/6"}, matched: 7},
		{name: "live", q: Query{Rows: "live"}, want: []string{"t/0", "t/2", "t/4"}, matched: 3},
		{name: "paused, not the idle one", q: Query{Rows: "paused"}, want: []string{"t/1", "t/6"}, matched: 2},
		{name: "idle", q: Query{Rows: "idle"}, want: []string{"t/3", "t/5"}, matched: 2},
		{name: "holding", q: Query{Rows: "holding"}, want: []string{"t/2"}, matched: 1},
		{name: "lagging", q: Query{Rows: "lagging"}, want: []string{"t/1", "t/2", "t/4", "t/6"}, matched: 4},
		{name: "a page", q: Query{Rows: "all", Offset: 2, Limit: 3}, want: []string{"t/2", "t/3", "t/4"}, matched: 7},
		{name: "the last page, short", q: Query{Rows: "all", Offset: 6, Limit: 3}, want: []string{"t/6"}, matched: 7},
		{name: "past the end", q: Query{Rows: "lagging", Offset: 9, Limit: 3}, want: []string{}, matched: 4},
		{name: "offset without limit: the rest", q: Query{Rows: "live", Offset: 1}, want: []string{"t/2", "t/4"}, matched: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ph := NewPhases(st, tt.q)
			if got := keys(ph.Partitions); !slices.Equal(got, tt.want) {
				t.Errorf("rows %v, want %v", got, tt.want)
			}
			want := Selection{State: tt.q.Rows, Matched: tt.matched, Offset: tt.q.Offset}
			if ph.Selection == nil || *ph.Selection != want {
				t.Errorf("selection %+v, want %+v", ph.Selection, want)
			}
			if ph.Summary.FullList != "" {
				t.Errorf("full_list %q with rows sent", ph.Summary.FullList)
			}
		})
	}
}

// The rows of each state are as many as the summary counts in it, so the
// live page's pager and the summary agree.
func TestRowStatesMatchSummary(t *testing.T) {
	st := benchStatus(2048)
	sum := Summarize(st, 0)
	for _, tt := range []struct {
		state string
		want  int
	}{
		{"all", sum.Partitions}, {"live", sum.Live}, {"paused", sum.Paused}, {"idle", sum.Idle},
		{"holding", sum.Holding}, {"lagging", sum.WithLag},
	} {
		t.Run(tt.state, func(t *testing.T) {
			if got := NewPhases(st, Query{Rows: tt.state, Limit: 1}).Selection.Matched; got != tt.want || got == 0 {
				t.Errorf("%d partitions %s, the summary counts %d", got, tt.state, tt.want)
			}
		})
	}
}

// BenchmarkPhasesBody measures what GET /phases costs to build and encode
// (indented, as served) and its size: "before" is the Status itself (the
// body until the summary), "summary" the default body, "all" the body of
// ?partitions=all, "page" that of a page of the live view's full table
// (?partitions=all&offset=n/2&limit=100).
func BenchmarkPhasesBody(b *testing.B) {
	for _, n := range []int{5, 512, 2048} {
		st := benchStatus(n)
		for _, c := range []struct {
			name string
			body func() any
		}{
			{"before", func() any { return st }},
			{"summary", func() any { return NewPhases(st, Query{Top: DefaultTop}) }},
			{"all", func() any { return NewPhases(st, Query{Top: DefaultTop, Rows: "all"}) }},
			{"page", func() any { return NewPhases(st, Query{Top: DefaultTop, Rows: "all", Offset: n / 2, Limit: 100}) }},
		} {
			b.Run(fmt.Sprintf("partitions=%d/%s", n, c.name), func(b *testing.B) {
				var size int
				b.ReportAllocs()
				for b.Loop() {
					out, err := json.MarshalIndent(c.body(), "", "  ")
					if err != nil {
						b.Fatal(err)
					}
					size = len(out) + 1 // the encoder's newline
				}
				b.ReportMetric(float64(size), "bytes/body")
			})
		}
	}
}

// benchStatus is a mid-run status with n partitions over two topics, in
// the mix of the 512-partition run: a fifth paused by the buffer,
// one in seven idle, a few holding the watermark, lag everywhere else.
func benchStatus(n int) *Status {
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	last := uint64(1000)
	st := &Status{Updated: now, Joined: true, Ready: true, GlobalWatermark: 1001, GlobalMs: now.UnixMilli(),
		LastSealed: &last, SealTimeout: "5s", BufferedBytes: 136 << 20, MaxBufferBytes: 256 << 20, PeakBufferedBytes: 140 << 20}
	for i := range n {
		p := part(fmt.Sprintf("fork-%c", 'a'+i%2), int32(i/2), 1002, int64(1900+i%1500))
		p.WatermarkMs, p.Position, p.BufferedRecords, p.BufferedBytes = now.UnixMilli()+int64(i%900), int64(1100+i), 300, 300*130
		switch {
		case i%47 == 3:
			p.Watermark, p.WatermarkMs, p.HoldsWatermark = 1001, now.UnixMilli(), true
		case i%7 == 0:
			p.Idle, p.Lag = true, 0
		case i%5 == 0:
			p.Paused, p.PauseReasons = true, []string{"buffer"}
		}
		st.Partitions = append(st.Partitions, p)
	}
	for ph := range uint64(3) {
		st.OpenPhases = append(st.OpenPhases, OpenPhaseStatus{Phase: 1001 + ph, Records: 5000, Bytes: 650000, Opened: now})
	}
	for ph := range uint64(historyLen) {
		st.Sealed = append(st.Sealed, SealStatus{Phase: 969 + ph, SealedBy: "watermark", Records: 20000, Sealed: now,
			Duration: 1.2, PerTopic: map[string]int{"fork-a": 10000, "fork-b": 10000}, CV: 0.3, Straggler: "fork-a/7"})
	}
	return st
}
