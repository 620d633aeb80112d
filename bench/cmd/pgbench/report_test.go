package main

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	tests := []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"median of ten is the 5th", xs, 50, 5},
		{"p99 of ten is the max", xs, 99, 10},
		{"p10", xs, 10, 1},
		{"p100", xs, 100, 10},
		{"one sample", []float64{42}, 99, 42},
		{"no samples", nil, 50, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := percentile(tt.xs, tt.q)
			if got != tt.want && !(math.IsNaN(got) && math.IsNaN(tt.want)) {
				t.Errorf("percentile(%v, %g) = %g, want %g", tt.xs, tt.q, got, tt.want)
			}
		})
	}
	if xs[0] != 5 {
		t.Errorf("percentile sorted its input in place")
	}
}

func TestMedianIndex(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want int
	}{
		{"three", []float64{30, 10, 20}, 2},
		{"four takes the lower middle", []float64{4, 1, 3, 2}, 3},
		{"a failed run (0) sorts first", []float64{0, 50, 40}, 2},
		{"one", []float64{7}, 0},
		{"none", nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := medianIndex(tt.xs); got != tt.want {
				t.Errorf("medianIndex(%v) = %d, want %d", tt.xs, got, tt.want)
			}
		})
	}
}

func TestFormatting(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"thousands small", thousands(999), "999"},
		{"thousands million", thousands(1234567.6), "1,234,568"},
		{"thousands negative", thousands(-1234), "-1,234"},
		{"thousands NaN", thousands(math.NaN()), "-"},
		{"mib", mib(64 << 20), "64"},
		{"mib zero", mib(0), "-"},
		{"ratio", ratio(3, 2), "1.50"},
		{"ratio missing", ratio(3, 0), "-"},
		{"verdict met", verdict(60, 100, 0.5), "0.60×, met"},
		{"verdict missed", verdict(40, 100, 0.5), "0.40×, missed"},
		{"verdict no number", verdict(0, 100, 1), "no number"},
		{"oneLine", oneLine(errors.New("a\nb | c")), "a; b / c"},
		{"runs", runsNote([]float64{1000, 0, 3000}), "; median of 3 runs: 1,000, failed, 3,000 records/s"},
		{"one run", runsNote([]float64{1000}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

// TestRender checks that the report carries every number a reader needs and
// says which runs failed instead of printing a rate for them.
func TestRender(t *testing.T) {
	cfg := config{Records: 1000000, Sizes: []int{100}, Phases: []time.Duration{100 * time.Millisecond, time.Second},
		PacedShare: 0.5, PacedFor: 20 * time.Second, SkewPhase: 100 * time.Millisecond, SkewBuffer: 64 << 20, Commit: "abc1234"}
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := &suiteResult{
		Started: start, Ended: start.Add(15 * time.Minute), Cfg: cfg,
		Machine: machine{ID: "3d1219c7", CPU: "AMD EPYC", Cores: 2, MemGiB: 23.5, Kernel: "6.1", LoadAvg: "1 2 3"},
		Sizes: []*sizeRun{{
			Size: 100, InputRate: 200000, RateFrom: "test",
			Producer: &toolResult{Records: 1000000, Seconds: 5, CPU: 10},
			Consumer: &toolResult{Records: 1000000, Seconds: 2, CPU: 4},
			Fill:     &fillResult{Records: 1000000, Seconds: 2.5},
			Copiers:  []*toolResult{{Records: 250005, Seconds: 50, TxnSize: 20000, Txns: 13, Instances: 2}, nil},
			Relays: []*relayResult{
				{Size: 100, Records: 1000000, Seconds: 10, CPU: 8, HWM: 100 << 20, Phases: 50},
				{Size: 100, Records: 1000000, Seconds: 30, Check: errors.New("999999 data records in the output, want 1000000")},
			},
			Paced: []*pacedResult{{TargetRate: 50000, Achieved: 49900, Samples: 540, SealP50: 20, SealP99: 150, SealMax: 200}, nil},
		}},
		Skew:     &relayResult{Size: 1024, Records: 1000000, Seconds: 20, HWM: 200 << 20, PeakBuffered: 40 << 20, Fallbacks: 3},
		SkewRate: 50000,
	}
	md := render(s)
	for _, want := range []string{
		"machine 3d1219c7", "AMD EPYC, 2 cores", "phasegate abc1234",
		"| ceiling: ProducerPerformance (idempotent, acks=all) | 200,000 | 20.0 |",
		"| peer: TransactionalMessageCopier, 100ms | 5,000 |", "250,005 records copied",
		"| phasegate, 100ms | 100,000 | 10.0 | 10.0 |",
		"| phasegate, 1s | not verified |", "want 1000000",
		"| 100 B | 100ms | 20.00 | 0.50 | 0.25 |",
		"| 100 B | 1s | - | - | - |",
		"| reference: the input writer (franz-go in pgbench; idempotent, acks=all, linger 5 ms, 1 MiB batches) | 400,000 | 40.0 | 2.5 |",
		"| 100 B | 100ms | 50,000 | 49,900 | 540 | 20 | 150 | 200 |",
		"100 B 100ms: 20.00×, met", "100 B 1s: no number",
		"100 B 100ms: 0.50×, met",
		"100 B 100ms: 150 ms, missed",
		"200 MiB against 128 MiB: missed (3 stream fallbacks)",
		"| peak RSS ≤ twice the bound + 64 MiB under skew (what the sidecar now allows itself) | 200 MiB against 192 MiB: missed |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| phasegate, 1s | 33,333") {
		t.Errorf("report gives a rate for a run whose output did not verify")
	}
}

func TestResultPathKeepsEarlierRuns(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	want := []string{"2026-12-02-m1.md", "2026-12-02-m1-2.md", "2026-12-02-m1-3.md"}
	for i, w := range want {
		t.Run(w, func(t *testing.T) {
			p := resultPath(dir, at, "m1")
			if filepath.Base(p) != w {
				t.Fatalf("run %d: path %s, want %s", i+1, filepath.Base(p), w)
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	base := map[string]string{
		"BENCH_BROKERS": "127.0.0.1:9092", "BENCH_KAFKA_SH": "k", "BENCH_SIDECAR": "s",
		"BENCH_WORK_DIR": "w", "BENCH_RESULTS_DIR": "r", "BENCH_STREAMS_CLASSPATH": "cp",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr bool
	}{
		{name: "defaults", env: base},
		{name: "quick run", env: with("BENCH_RECORDS", "100000")},
		{name: "too few records", env: with("BENCH_RECORDS", "10"), wantErr: true},
		{name: "no broker", env: with("BENCH_BROKERS", ""), wantErr: true},
		{name: "unknown step", env: with("BENCH_STEPS", "ceiling,warp"), wantErr: true},
		{name: "bad size", env: with("BENCH_SIZES", "100,2"), wantErr: true},
		{name: "bad share", env: with("BENCH_PACED_SHARE", "1.5"), wantErr: true},
		{name: "bad phase", env: with("BENCH_PHASES", "100us"), wantErr: true},
		{name: "streams without its classpath", env: with("BENCH_STREAMS_CLASSPATH", ""), wantErr: true},
		{name: "no streams step, no classpath needed", env: func() map[string]string {
			m := with("BENCH_STREAMS_CLASSPATH", "")
			m["BENCH_STEPS"] = "ceiling,phasegate"
			return m
		}()},
		{name: "zero stream threads", env: with("BENCH_STREAMS_THREADS", "0,2"), wantErr: true},
		{name: "one input partition", env: with("BENCH_PARTITIONS", "1"), wantErr: true},
		{name: "too few partitions records", env: with("BENCH_PARTITIONS_RECORDS", "500"), wantErr: true},
		{name: "no event-time rate", env: with("BENCH_PARTITIONS_RATE", "-1"), wantErr: true},
		{name: "more instances than tasks", env: with("BENCH_INSTANCES", "1,7"), wantErr: true},
		{name: "kill in a run that does not run", env: with("BENCH_INSTANCES_KILL", "4"), wantErr: true},
		{name: "no kill", env: with("BENCH_INSTANCES_KILL", "0")},
		{name: "instances step alone", env: with("BENCH_STEPS", "instances")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(tt.env)
			if tt.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && tt.name == "defaults" {
				if c.Records != 1000000 || len(c.Sizes) != 2 || len(c.Phases) != 2 || c.SkewBuffer != 64<<20 || !c.step("skew") {
					t.Errorf("defaults: %+v", c)
				}
				if !c.step("streams") || !c.step("partitions") || len(c.StreamsThreads) != 2 || len(c.Partitions) != 3 ||
					c.partitionsRecords(2) != 250000 || c.partitionsRecords(7) != 250000 || c.PhasesPath != "/phases?partitions=holding" {
					t.Errorf("defaults of the streams and partitions steps: %+v", c)
				}
				if !c.step("instances") || len(c.Instances) != 3 || c.InstancesKill != 2 || c.InstancesPhase != 100*time.Millisecond {
					t.Errorf("defaults of the instances step: %+v", c)
				}
			}
		})
	}
}

func TestInputSpec(t *testing.T) {
	start := time.UnixMilli(1_000_000)
	s := inputSpec{Topics: []topicSpec{{"a", 3}, {"b", 2}}, Rate: 1000, Start: start, Behind: 200 * time.Millisecond}
	slots := s.slots()
	if len(slots) != 5 || !slots[2].first || slots[3].first || slots[4].part != 1 {
		t.Fatalf("slots %+v", slots)
	}
	tests := []struct {
		name  string
		i     int
		first bool
		want  time.Time
	}{
		{"record 0", 0, true, start},
		{"1000 records are one second at 1000/s", 1000, true, start.Add(time.Second)},
		{"a branch behind trails by 200 ms", 1000, false, start.Add(800 * time.Millisecond)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.eventTime(tt.i, tt.first); !got.Equal(tt.want) {
				t.Errorf("eventTime(%d, %v) = %s, want %s", tt.i, tt.first, got, tt.want)
			}
		})
	}
}

func TestInstancesRow(t *testing.T) {
	tests := []struct {
		name string
		run  *instancesRun
		want []string
	}{
		{"verified", &instancesRun{N: 2, Records: 300000, Seconds: 6, Steady: 60000, CPU: 3, Phases: 31},
			[]string{"| 2 | 50,000 | 60,000 | 6.0 | 10.0 | 31 | output verified |"}},
		{"killed and verified", &instancesRun{N: 2, Records: 1000000, Seconds: 10, CPU: 1, Recover: &recovery{}},
			[]string{"| 2 | 100,000 |", "one SIGKILLed and restarted mid-way; output verified"}},
		{"not verified shows no rate", &instancesRun{N: 3, Records: 1000, Seconds: 1, Check: errors.New("2 data records missing")},
			[]string{"| 3 | not verified |", "not verified: 2 data records missing"}},
		{"failed", &instancesRun{N: 1, Err: errors.New("fill: boom")}, []string{"| 1 | failed |", "fill: boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := instancesRow(tt.run)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("instancesRow = %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

func TestRecoveryLine(t *testing.T) {
	if got := recoveryLine(&instancesRun{N: 3}); got != "" {
		t.Errorf("recoveryLine without a kill = %q, want empty", got)
	}
	got := recoveryLine(&instancesRun{N: 2, Recover: &recovery{Instance: "g-2", FleetS: 0.048, OwnS: 0, StallS: 1.5}})
	for _, w := range []string{"2 instances, g-2", "fleet's next commit 0.05 s", "own first commit - s", "at most 1.50 s"} {
		if !strings.Contains(got, w) {
			t.Errorf("recoveryLine = %q, want it to contain %q", got, w)
		}
	}
}

func TestRenderInstances(t *testing.T) {
	s := &suiteResult{Cfg: config{Records: 300000, InstancesSize: 100, InstancesPhase: 100 * time.Millisecond},
		Instances: []*instancesRun{{N: 1, Records: 300000, Seconds: 5}, {N: 2, Records: 300000, Seconds: 6, Recover: &recovery{Instance: "x-2", FleetS: 2, OwnS: 3}}}}
	var b strings.Builder
	renderInstances(&b, s.Cfg, s)
	out := b.String()
	for _, w := range []string{"6 + 6 partitions, output 6 (partition routing: 6 tasks)", "| 1 | 60,000 |", "| 2 | 50,000 |", "Recovery (2 instances, x-2"} {
		if !strings.Contains(out, w) {
			t.Errorf("renderInstances missing %q in:\n%s", w, out)
		}
	}
	b.Reset()
	renderInstances(&b, s.Cfg, &suiteResult{})
	if b.Len() != 0 {
		t.Errorf("renderInstances without runs wrote %q", b.String())
	}
}
