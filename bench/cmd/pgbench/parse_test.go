package main

import (
	"math"
	"strconv"
	"testing"
	"time"
)

func TestParseProducerPerf(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		records int64
		seconds float64
		p99     float64
		wantErr bool
	}{
		{
			name:    "Kafka 4.1 summary",
			line:    "20000 records sent, 18348.6 records/sec (1.75 MB/sec), 335.12 ms avg latency, 690.00 ms max latency, 317 ms 50th, 434 ms 95th, 455 ms 99th, 457 ms 99.9th.",
			records: 20000, seconds: 20000 / 18348.6, p99: 455,
		},
		{name: "progress line, not a summary", line: "71921 records sent, 14378.4 records/sec (1.37 MB/sec), 1650.7 ms avg latency, 2237.0 ms max latency.", wantErr: true},
		{name: "empty", line: "", wantErr: true},
		{name: "zero rate", line: "0 records sent, 0.0 records/sec (0.00 MB/sec), 0.00 ms avg latency, 0.00 ms max latency, 0 ms 50th, 0 ms 95th, 0 ms 99th, 0 ms 99.9th.", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProducerPerf(tt.line)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parsed %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Records != tt.records || math.Abs(got.Seconds-tt.seconds) > 1e-9 || got.LatP99Ms != tt.p99 {
				t.Errorf("got %d records in %g s, p99 %g; want %d in %g s, p99 %g", got.Records, got.Seconds, got.LatP99Ms, tt.records, tt.seconds, tt.p99)
			}
		})
	}
}

func TestParseConsumerPerf(t *testing.T) {
	header := "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
	data := "2026-12-02 11:56:47:598, 2026-12-02 11:56:49:358, 1.9073, 1.0837, 20000, 11363.6364, 1503, 257, 7.4216, 77821.0117"
	tests := []struct {
		name    string
		lines   []string
		records int64
		rate    float64
		startup float64
		wantErr bool
	}{
		{name: "header then data", lines: []string{"WARN something", header, data}, records: 20000, rate: 11363.6364, startup: 1.503},
		{name: "data without header", lines: []string{data}, wantErr: true},
		{name: "header only", lines: []string{header}, wantErr: true},
		{name: "no records", lines: []string{header, "2026-12-02 11:56:47:598, 2026-12-02 11:56:49:358, 0, 0, 0, 0, 1503, 257, 0, 0"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConsumerPerf(tt.lines)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parsed %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Records != tt.records || math.Abs(got.rate()-tt.rate) > 1e-6 || got.StartupS != tt.startup {
				t.Errorf("got %d records at %g/s, startup %g; want %d at %g/s, startup %g", got.Records, got.rate(), got.StartupS, tt.records, tt.rate, tt.startup)
			}
		})
	}
}

func TestCopierTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	line := func(n int64) string {
		return `{"transactionalId":"c","stage":"ProcessLoop","time":"x","totalProcessed":` + strconv.FormatInt(n, 10) + `,"consumed":0,"remaining":5}`
	}
	tests := []struct {
		name      string
		lines     []string
		processed int64
		txns      int
		first     time.Duration
	}{
		{name: "polls without records are not transactions", lines: []string{line(0), line(0), line(100), line(100), line(250)}, processed: 250, txns: 2, first: 2 * time.Second},
		{name: "shutdown line repeats the total", lines: []string{line(10), `{"shutdown_complete":"c","totalProcessed":10}`}, processed: 10, txns: 1},
		{name: "log noise is skipped", lines: []string{"[WARN] rebalance", line(7)}, processed: 7, txns: 1, first: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c copierTracker
			for i, l := range tt.lines {
				c.line(l, t0.Add(time.Duration(i)*time.Second))
			}
			if c.processed != tt.processed || c.txns != tt.txns || c.first.Sub(t0) != tt.first {
				t.Errorf("got %d processed in %d txns, first at %s; want %d in %d, first at %s",
					c.processed, c.txns, c.first.Sub(t0), tt.processed, tt.txns, tt.first)
			}
		})
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP phasegate_transactions_total Transactions ended, by result.
# TYPE phasegate_transactions_total counter
phasegate_transactions_total{result="aborted"} 2
phasegate_transactions_total{result="committed"} 40
phasegate_records_out_total 1e+06
phasegate_paused_seconds_total{topic="a",partition="0"} 1.5
phasegate_paused_seconds_total{topic="a",partition="1"} 0.25
weird{label="with } brace"} 3
garbage line
`
	tests := []struct {
		name string
		want float64
	}{
		{"phasegate_transactions_total", 42},
		{"phasegate_records_out_total", 1e6},
		{"phasegate_paused_seconds_total", 1.75},
		{"weird", 3},
		{"phasegate_missing", 0},
	}
	got := parseMetrics(text)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got[tt.name] != tt.want {
				t.Errorf("%s = %g, want %g", tt.name, got[tt.name], tt.want)
			}
		})
	}
}

func TestParseProc(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		cpu     float64
		wantErr bool
	}{
		{name: "plain name", stat: "15047 (cat) R 15041 15041 24642 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 363911", cpu: 3},
		{name: "name with spaces and parens", stat: "9 (a b) c)) S 1 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1", cpu: 0.1},
		{name: "truncated", stat: "9 (x) S 1 2", wantErr: true},
		{name: "no name", stat: "garbage", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.stat)
			if tt.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if math.Abs(got-tt.cpu) > 1e-9 {
				t.Errorf("cpu = %g, want %g", got, tt.cpu)
			}
		})
	}
	t.Run("status", func(t *testing.T) {
		hwm, rss, file := parseStatusMem("Name:\tsidecar\nVmPeak:\t  900 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nRssAnon:\t 1 kB\nRssFile:\t  17880 kB\n")
		if hwm != 200<<20 || rss != 100<<20 || file != 17880<<10 {
			t.Errorf("hwm %d rss %d file %d, want %d, %d and %d", hwm, rss, file, 200<<20, 100<<20, 17880<<10)
		}
	})
}

func TestBucketQuantile(t *testing.T) {
	const h = `# TYPE phasegate_seal_to_commit_seconds histogram
phasegate_seal_to_commit_seconds_bucket{le="0.01"} 50
phasegate_seal_to_commit_seconds_bucket{le="0.025"} 90
phasegate_seal_to_commit_seconds_bucket{le="0.1"} 99
phasegate_seal_to_commit_seconds_bucket{le="0.25"} 100
phasegate_seal_to_commit_seconds_bucket{le="+Inf"} 100
phasegate_seal_to_commit_seconds_sum 1.5
phasegate_seal_to_commit_seconds_count 100
other_bucket{le="0.001"} 100
`
	const tail = `x_bucket{le="1"} 98
x_bucket{le="+Inf"} 100
`
	tests := []struct {
		name, text, metric string
		q, want            float64
	}{
		{"median in the first bucket", h, "phasegate_seal_to_commit_seconds", 0.5, 0.01},
		{"p90 on a bound", h, "phasegate_seal_to_commit_seconds", 0.9, 0.025},
		{"p99", h, "phasegate_seal_to_commit_seconds", 0.99, 0.1},
		{"max", h, "phasegate_seal_to_commit_seconds", 1, 0.25},
		{"only +Inf reaches it", tail, "x", 0.99, math.Inf(1)},
		{"another histogram's buckets are not read", h, "other", 0.99, 0.001},
		{"absent", h, "missing", 0.99, math.NaN()},
		{"label sets are summed", "z_bucket{branch=\"a\",le=\"0.1\"} 9\nz_bucket{branch=\"a\",le=\"+Inf\"} 10\n" +
			"z_bucket{branch=\"b\",le=\"0.1\"} 0\nz_bucket{branch=\"b\",le=\"+Inf\"} 10\n", "z", 0.5, math.Inf(1)},
		{"no observation", "y_bucket{le=\"1\"} 0\ny_bucket{le=\"+Inf\"} 0\n", "y", 0.99, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bucketQuantile(tt.text, tt.metric, tt.q)
			if got != tt.want && !(math.IsNaN(got) && math.IsNaN(tt.want)) {
				t.Errorf("bucketQuantile(%s, %g) = %g, want %g", tt.metric, tt.q, got, tt.want)
			}
		})
	}
}
