package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
)

// phasesBody is a /phases document with one partition entry per p.
func phasesBody(updated string, parts ...string) []byte {
	return []byte(fmt.Sprintf(`{"updated":%q,"joined":true,"partitions":[%s]}`, updated, strings.Join(parts, ",")))
}

func part(topic string, p int, pos, lag int64, holds bool) string {
	return fmt.Sprintf(`{"topic":%q,"partition":%d,"position":%d,"lag":%d,"lag_known":true,"holds_watermark":%v}`, topic, p, pos, lag, holds)
}

func TestStarveTracker(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type snap struct {
		ms   int
		body []byte
	}
	tests := []struct {
		name    string
		snaps   []snap
		usable  bool
		maxS    float64
		who     string
		samples int
	}{
		{
			name: "a holder with lag whose position stands still for 600 ms",
			snaps: []snap{
				{0, phasesBody("a", part("a", 0, 10, 50, true), part("a", 1, 10, 0, false))},
				{200, phasesBody("b", part("a", 0, 10, 50, true), part("a", 1, 90, 0, false))},
				{600, phasesBody("c", part("a", 0, 10, 50, true), part("a", 1, 190, 0, false))},
				{800, phasesBody("d", part("a", 0, 60, 0, false), part("a", 1, 190, 0, false))},
			},
			usable: true, maxS: 0.6, who: "a/0", samples: 4,
		},
		{
			name: "a holder that keeps reading is not starved",
			snaps: []snap{
				{0, phasesBody("a", part("a", 0, 10, 50, true))},
				{200, phasesBody("b", part("a", 0, 20, 40, true))},
				{400, phasesBody("c", part("a", 0, 30, 30, true))},
			},
			usable: true, maxS: 0, samples: 3,
		},
		{
			name: "standing still without lag, or without holding, is not starvation",
			snaps: []snap{
				{0, phasesBody("a", part("a", 0, 10, 0, true), part("b", 0, 5, 99, false))},
				{900, phasesBody("b", part("a", 0, 10, 0, true), part("b", 0, 5, 99, false))},
			},
			usable: true, maxS: 0, samples: 2,
		},
		{
			name: "the stretch starts when the partition begins to hold",
			snaps: []snap{
				{0, phasesBody("a", part("a", 0, 10, 50, false))},
				{1000, phasesBody("b", part("a", 0, 10, 50, true))},
				{1300, phasesBody("c", part("a", 0, 10, 50, true))},
			},
			usable: true, maxS: 0.3, who: "a/0", samples: 3,
		},
		{
			name: "a holders-only list (?partitions=holding): a partition left out stops its stretch",
			snaps: []snap{
				{0, phasesBody("a", part("a", 0, 10, 50, true))},
				{200, phasesBody("b", part("a", 1, 10, 50, true))},
				{1000, phasesBody("c", part("a", 0, 10, 50, true), part("a", 1, 20, 40, true))},
				{1300, phasesBody("d", part("a", 0, 10, 50, true))},
			},
			usable: true, maxS: 0.3, who: "a/0", samples: 4,
		},
		{
			name: "an empty list ends every stretch and is no sample",
			snaps: []snap{
				{0, phasesBody("a", part("a", 0, 10, 50, true))},
				{500, phasesBody("b")},
				{1000, phasesBody("c", part("a", 0, 10, 50, true))},
				{1300, phasesBody("d", part("a", 0, 10, 50, true))},
			},
			usable: true, maxS: 0.3, who: "a/0", samples: 3,
		},
		{
			name: "the same snapshot read twice counts once",
			snaps: []snap{
				{0, phasesBody("a", part("a", 0, 10, 50, true))},
				{500, phasesBody("a", part("a", 0, 10, 50, true))},
			},
			usable: true, maxS: 0, samples: 1,
		},
		{
			name:   "a summary without per-partition positions is not usable",
			snaps:  []snap{{0, []byte(`{"updated":"a","partitions":{"paused":3,"idle":1}}`)}},
			usable: false,
		},
		{
			name:   "entries without holds_watermark are not usable",
			snaps:  []snap{{0, []byte(`{"updated":"a","partitions":[{"topic":"a","partition":0,"position":1,"lag":1}]}`)}},
			usable: false, samples: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newStarveTracker()
			usable := true
			for _, s := range tt.snaps {
				usable = tr.observe(s.body, at(s.ms)) && usable
			}
			if usable != tt.usable {
				t.Fatalf("usable = %v, want %v", usable, tt.usable)
			}
			if d := tr.res.MaxS - tt.maxS; d > 1e-9 || d < -1e-9 || tr.res.Who != tt.who || tr.res.Samples != tt.samples {
				t.Errorf("got %.3f s on %q over %d samples, want %.3f s on %q over %d", tr.res.MaxS, tr.res.Who, tr.res.Samples, tt.maxS, tt.who, tt.samples)
			}
		})
	}
}

func TestPartitionsLayout(t *testing.T) {
	tests := []struct {
		total      int
		a, b, outs int32
	}{
		{5, 3, 2, 3},
		{512, 256, 256, 256},
		{2048, 1024, 1024, 256},
		{101, 51, 50, 51},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.total), func(t *testing.T) {
			a, b, out := partitionsLayout(tt.total)
			if a != tt.a || b != tt.b || out != tt.outs {
				t.Errorf("partitionsLayout(%d) = %d + %d → %d, want %d + %d → %d", tt.total, a, b, out, tt.a, tt.b, tt.outs)
			}
		})
	}
}

func TestOutOfOrderness(t *testing.T) {
	tests := []struct {
		phase, want time.Duration
	}{
		{time.Second, 0},
		{201 * time.Millisecond, 0},
		{200 * time.Millisecond, 100 * time.Millisecond},
		{100 * time.Millisecond, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.phase.String(), func(t *testing.T) {
			if got := outOfOrderness(tt.phase); got != tt.want {
				t.Errorf("outOfOrderness(%s) = %s, want %s", tt.phase, got, tt.want)
			}
		})
	}
}

func TestLatenciesWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	l := &latencies{}
	for i := range 10 { // stamped at 0..9 s, each visible i×10 ms later
		stamp := t0.Add(time.Duration(i) * time.Second)
		l.add(stamp, stamp.Add(time.Duration(i*10)*time.Millisecond))
	}
	tests := []struct {
		name          string
		from, to      int // seconds
		samples       int
		p50, p99, max float64
		wantErr       bool
	}{
		{name: "all", from: 0, to: 10, samples: 10, p50: 40, p99: 90, max: 90},
		{name: "warm-up left out", from: 5, to: 10, samples: 5, p50: 70, p99: 90, max: 90},
		{name: "none in the window", from: 20, to: 30, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res latencyResult
			l.fill(&res, t0.Add(time.Duration(tt.from)*time.Second), t0.Add(time.Duration(tt.to)*time.Second))
			if (res.Err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", res.Err, tt.wantErr)
			}
			if !tt.wantErr && (res.Samples != tt.samples || res.P50 != tt.p50 || res.P99 != tt.p99 || res.Max != tt.max) {
				t.Errorf("got %+v", res)
			}
		})
	}
}

// TestRenderStreams checks the Kafka Streams rows, the ratios to them, the
// produce → visible table and the partitions table.
func TestRenderStreams(t *testing.T) {
	cfg := config{Records: 100000, Sizes: []int{100}, Phases: []time.Duration{time.Second}, PacedShare: 0.5, PacedFor: 20 * time.Second,
		Steps: []string{"phasegate", "streams", "paced", "partitions"}, StreamsJVM: []string{"-Xmx512m"},
		PartitionsSize: 100, PartitionsKeys: 1000, PartitionsRate: 50000, PartitionsPhase: time.Second, PartitionsStreams: 2}
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	relay := func(records int, secs, steady, first float64, starve *starvation) *relayResult {
		return &relayResult{Size: 100, Records: records, Seconds: secs, CPU: 1, BrokerCPU: 2, HWM: 100 << 20, Steady: steady, FirstS: first, Starve: starve}
	}
	s := &suiteResult{
		Started: start, Ended: start.Add(time.Minute), Cfg: cfg, Machine: machine{Cores: 2},
		Sizes: []*sizeRun{{
			Size:   100,
			Relays: []*relayResult{relay(100000, 1, 0, 0, nil)},
			Streams: []*streamsResult{
				{Threads: 1, Size: 100, Records: 100000, Seconds: 4, CPU: 8, HWM: 400 << 20, InOffsets: 100005, Out: 100005},
				{Threads: 2, Size: 100, Records: 100000, Seconds: 10, Err: errors.New("the JVM exited")},
			},
			Paced:    []*pacedResult{{Data: &latencyResult{Who: "phasegate, 1s", Size: 100, TargetRate: 50000, Achieved: 49000, Samples: 900, P50: 700, P99: 1200, Max: 1300}}},
			StrPaced: []*latencyResult{{Who: "Kafka Streams, 1 thread", Size: 100, TargetRate: 12500, Achieved: 12400, Samples: 200, P50: 150, P99: 400, Max: 500}},
		}},
		Partitions: []*partitionsRun{
			{Total: 5, Forks: [2]int32{3, 2}, OutParts: 3, Records: 100000, Relay: relay(100000, 2, 100000, 0.5, &starvation{Samples: 5}),
				Streams: &streamsResult{Threads: 2, Records: 100000, Seconds: 10, Steady: 20000, FirstS: 5, CPU: 10, InOffsets: 5, Out: 5},
				Floors: []*floorResult{{FetchBytes: 1 << 20, Records: 100005, Seconds: 0.5, FirstS: 0.1, CPU: 0.3, BrokerCPU: 0.2},
					{FetchBytes: 1 << 20, Headers: true, Records: 100005, Seconds: 0.6, FirstS: 0.1, CPU: 0.5, BrokerCPU: 0.3}}},
			{Total: 512, Forks: [2]int32{256, 256}, OutParts: 256, Records: 100000, Empty: 10,
				Relay:   relay(100000, 10, 40000, 4, &starvation{MaxS: 1.4, Who: "a/7", Samples: 30, MaxHolder: 12}),
				Streams: &streamsResult{Threads: 2, Records: 100000, Seconds: 20, Steady: 10000, FirstS: 8, CPU: 10, InOffsets: 5, Out: 4, Check: errors.New("4 records in the output, want 5")},
				Floors: []*floorResult{{FetchBytes: 20833, Records: 100010, Seconds: 2, FirstS: 0.4, CPU: 0.5, BrokerCPU: 0.4},
					{FetchBytes: 1 << 20, Err: errors.New("floor: consume ended")},
					{FetchBytes: 20833, Headers: true, Err: errors.New("floor: produce: broken pipe")}}},
		},
	}
	md := render(s)
	for _, want := range []string{
		"| peer: Kafka Streams pass-through (exactly_once_v2, commit.interval.ms 100), 1 thread | 25,000 | 2.5 | 4.0 |",
		"| peer: Kafka Streams pass-through (exactly_once_v2, commit.interval.ms 100), 2 threads | failed |",
		"| 100 B | 1s | 1 | 4.00 | 8.00 | 0.25 |",
		"| 100 B | 1s | 2 | - | - | - |",
		"| 100 B | phasegate, 1s | 50,000 | 49,000 | 900 | 700 | 1200 | 1300 |",
		"| 100 B | Kafka Streams, 1 thread | 12,500 | 12,400 | 200 | 150 | 400 | 500 |",
		"| 5 (3 + 2) | 3 | 100,000 | 0 | phasegate | 50,000 | 100,000 | 0.5 |",
		"| 512 (256 + 256) | 256 | 100,000 | 10 | phasegate | 10,000 | 40,000 | 4.0 | 10.0 | 20.0 | 100 | 1.4 | longest: a/7;",
		"| 512 (256 + 256) | 256 | 100,000 | 10 | Kafka Streams | not verified | | | | | | | 4 records in the output, want 5 |\n",
		"| 512 | 0.40 | - | - | - | 0.25 | 0.20 | 5.0 | - |",
		"| 5 | 1.00 | 5.00 | 5.00 | 0.10 | 1.00 | 0.25 | 7.0 | 5.0 |",
		"| 5 (3 + 2) | 3 | 100,000 | 0 | sarama floor, 1 MiB fetches | 200,010 | - | 0.1 | 3.0 | 2.0 | - | - | consume → produce only;",
		"| 512 (256 + 256) | 256 | 100,000 | 10 | sarama floor, 20.3 KiB fetches | 50,005 | - | 0.4 | 5.0 | 4.0 | - | - |",
		"| 512 (256 + 256) | 256 | 100,000 | 10 | sarama floor, 1 MiB fetches | failed | | | | | | | floor: consume ended |\n",
		"| 5 (3 + 2) | 3 | 100,000 | 0 | sarama floor with phasegate's headers, 1 MiB fetches | 166,675 | - | 0.1 | 5.0 | 3.0 | - | - |",
		"| 512 (256 + 256) | 256 | 100,000 | 10 | sarama floor with phasegate's headers, 20.3 KiB fetches | failed | | | | | | | floor: produce: broken pipe |\n",
		"| 15: steady throughput ≥ 0.8× the 5-partition figure | 512: 0.40×, missed |", "512: 1.4 s, missed", "512: 4.0 s against 8.0 s, met",
		"1s vs 2 threads: no number", // the peer has as many threads as the machine cores, even when it failed
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// phasegate's relay waits for every input offset but the trailers': a
// trailer's phase seals only after PHASEGATE_IDLE_TIMEOUT.
func TestWithoutTrailers(t *testing.T) {
	ends := kadm.ListedOffsets{"a": {
		0: {Topic: "a", Partition: 0, Offset: 5},
		1: {Topic: "a", Partition: 1, Offset: 0}, // empty: no trailer either
	}, "b": {0: {Topic: "b", Partition: 0, Offset: 2}}}
	got := withoutTrailers(ends)
	want := map[string]int64{"a/0": 4, "a/1": 0, "b/0": 1}
	n := 0
	got.Each(func(o kadm.ListedOffset) {
		n++
		if k := fmt.Sprintf("%s/%d", o.Topic, o.Partition); o.Offset != want[k] {
			t.Errorf("%s: target %d, want %d", k, o.Offset, want[k])
		}
	})
	if n != len(want) {
		t.Errorf("%d partitions, want %d", n, len(want))
	}
	if ends["a"][0].Offset != 5 {
		t.Errorf("ends changed: a/0 at %d, want 5", ends["a"][0].Offset)
	}
}

// The header floor's records carry what the sidecar adds to an input
// record without headers on a one-writer partition (MARKERS.md section 2),
// in one allocation as the sidecar's do, also when the topic name is too
// long for it.
func TestFloorHeaders(t *testing.T) {
	h := &floorHandler{phase: time.Second}
	long := strings.Repeat("t", 200)
	for _, tc := range []struct {
		m    *sarama.ConsumerMessage
		want []string
	}{
		{&sarama.ConsumerMessage{Topic: "a", Partition: 2, Offset: 7, Timestamp: time.UnixMilli(2500)},
			[]string{"phasegate.phase=2", "phasegate.id=a/2/7", "phasegate.source=a/2/7"}},
		{&sarama.ConsumerMessage{Topic: long, Partition: 2147483647, Offset: 1<<63 - 1, Timestamp: time.UnixMilli(1 << 60)},
			[]string{"phasegate.phase=1152921504606846", "phasegate.id=" + long + "/2147483647/9223372036854775807", "phasegate.source=" + long + "/2147483647/9223372036854775807"}},
	} {
		var got []string
		for _, hd := range h.headers(tc.m) {
			got = append(got, string(hd.Key)+"="+string(hd.Value))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("headers %q, want %q", got, tc.want)
		}
	}
	m := &sarama.ConsumerMessage{Topic: "b676449-parts-5-a", Partition: 2, Offset: 1234567, Timestamp: time.UnixMilli(1796673396123)}
	if n := testing.AllocsPerRun(100, func() { h.headers(m) }); n != 1 {
		t.Errorf("%v allocations per record, want 1", n)
	}
}
