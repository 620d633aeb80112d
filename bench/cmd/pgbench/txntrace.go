package main

import (
	"context"
	"math"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// txnTrace is a sidecar's first transactions, one by one, as its counters
// show them: each poll of /metrics (name[]-filtered) that finds
// phasegate_transaction_duration_seconds' count higher than the last poll
// adds one txnEv; when one transaction ended between the polls (N = 1),
// Seconds is its own duration (BeginTxn, or the first record streamed
// into it, to the end of the commit) and Records its data records.
type txnTrace struct {
	Evs []txnEv
	// LongestS is the longest transaction: the longest single one seen
	// (N = 1), or the upper bound of the histogram's highest bucket with
	// an observation in the final scrape when that is higher (a later
	// transaction was slower than every traced one).
	LongestS  float64
	LongestUp bool // LongestS is a bucket bound, not a traced duration
	Total     float64
	Timeout   time.Duration // PHASEGATE_TRANSACTION_TIMEOUT of the run
	Warns     int           // "a transaction took more than half the transaction timeout" lines in the log
	WarnLine  string        // the first of them
	// The first phase with data, from the output: its phase and when it
	// was sealed (its markers' record timestamp), from the sidecar's exec.
	FirstPhase  uint64
	FirstSealS  float64
	FirstMarker bool // false: not found
	// ReadAllS is when the polls first saw every record read that the
	// trace saw in all (phasegate_records_in_total stopped growing), from
	// exec; 0 when the trace ended first.
	ReadAllS float64
	inSeen   []txnSample
}

// txnSample is one poll's records read.
type txnSample struct{ atS, in float64 }

// firstDataSeal reads partition 0 of the output (then the others, as
// long as none is found) with read_committed from its start up to the
// first marker that counts a data record: the seal of the first phase
// with data there.
func firstDataSeal(ctx context.Context, brokers []string, topic string, parts int32) (uint64, time.Time, bool) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for p := range parts {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			return 0, time.Time{}, false
		}
		var phase uint64
		var at time.Time
		found, empty := false, 0
		for !found && ctx.Err() == nil && empty < 20 {
			fs := cl.PollRecords(ctx, 10000)
			n := 0
			fs.EachRecord(func(r *kgo.Record) {
				n++
				if found {
					return
				}
				if _, ok := markerOf(r); !ok {
					return
				}
				if m, err := markers.DecodeOutputMarker(r.Value); err == nil && m.Count > 0 {
					phase, at, found = m.Phase, r.Timestamp, true
				}
			})
			if n == 0 {
				empty++
			}
		}
		cl.Close()
		if found {
			return phase, at, true
		}
	}
	return 0, time.Time{}, false
}

// txnEv is what ended between two polls.
type txnEv struct {
	AtS                     float64 // since the sidecar's exec
	N                       float64 // transactions ended
	Seconds                 float64 // their durations, summed
	Records, Markers, Seals float64
	Aborted                 float64 // of N, those not committed (a streamed transaction aborted, a failure)
	In, CPU                 float64 // records read (phasegate_records_in_total) and the sidecar's CPU seconds by then
}

// txnTraceMax is how many polls with a transaction ending the trace keeps:
// the first transactions are the slow ones (fresh output partitions, the
// buffer filled during start-up); the histogram bounds the rest.
const txnTraceMax = 20

// txnTracePoll is the poll interval. A filtered scrape still gathers every
// series of the sidecar (thousands at 512 partitions), so the trace polls
// 4 times a second and stops after txnTraceMax polls with a transaction.
const txnTracePoll = 250 * time.Millisecond

var txnMetrics = []string{"phasegate_transaction_duration_seconds", "phasegate_records_out_total",
	"phasegate_markers_out_total", "phasegate_phases_sealed_total", "phasegate_transactions_total",
	"phasegate_records_in_total", "process_cpu_seconds_total"}

// txnCounters sums the trace's metrics by name, and counts the
// transactions that ended other than committed under "notCommitted".
func txnCounters(text string) map[string]float64 {
	m := parseMetrics(text)
	for _, sm := range samples(text) {
		if sm.name == "phasegate_transactions_total" && !strings.Contains(sm.labels, `result="committed"`) {
			m["notCommitted"] += sm.value
		}
	}
	return m
}

// traceTxns polls sc until ctx ends or the trace is full.
func traceTxns(ctx context.Context, sc *sidecar) *txnTrace {
	tr := &txnTrace{}
	var last map[string]float64
	tick := time.NewTicker(txnTracePoll)
	defer tick.Stop()
	for len(tr.Evs) < txnTraceMax {
		select {
		case <-ctx.Done():
			return tr
		case <-tick.C:
		}
		text, err := sc.get(ctx, "/metrics?"+url.Values{"name[]": txnMetrics}.Encode())
		if err != nil {
			continue
		}
		m := txnCounters(string(text))
		tr.inSeen = append(tr.inSeen, txnSample{time.Since(sc.p.started).Seconds(), m["phasegate_records_in_total"]})
		if last != nil && m["phasegate_transaction_duration_seconds_count"] > last["phasegate_transaction_duration_seconds_count"] {
			ev := txnEv{
				AtS:     time.Since(sc.p.started).Seconds(),
				N:       m["phasegate_transaction_duration_seconds_count"] - last["phasegate_transaction_duration_seconds_count"],
				Seconds: m["phasegate_transaction_duration_seconds_sum"] - last["phasegate_transaction_duration_seconds_sum"],
				Records: m["phasegate_records_out_total"] - last["phasegate_records_out_total"],
				Markers: m["phasegate_markers_out_total"] - last["phasegate_markers_out_total"],
				Seals:   m["phasegate_phases_sealed_total"] - last["phasegate_phases_sealed_total"],
				Aborted: m["notCommitted"] - last["notCommitted"],
				In:      m["phasegate_records_in_total"],
				CPU:     m["process_cpu_seconds_total"],
			}
			tr.Evs = append(tr.Evs, ev)
		}
		if last == nil || m["phasegate_transaction_duration_seconds_count"] != last["phasegate_transaction_duration_seconds_count"] {
			last = m
		}
	}
	return tr
}

// finish completes the trace from the sidecar's final metrics text and
// its log.
func (tr *txnTrace) finish(metricsText, logPath string, timeout time.Duration) {
	tr.Timeout = timeout
	if n := len(tr.inSeen); n > 1 && tr.inSeen[n-1].in == tr.inSeen[n-2].in {
		all := tr.inSeen[n-1].in
		for _, x := range tr.inSeen {
			if x.in >= all {
				tr.ReadAllS = x.atS
				break
			}
		}
	}
	for _, e := range tr.Evs {
		if e.N == 1 {
			tr.LongestS = max(tr.LongestS, e.Seconds)
		}
	}
	if metricsText != "" {
		tr.Total = parseMetrics(metricsText)["phasegate_transaction_duration_seconds_count"]
		if top := topBucket(metricsText, "phasegate_transaction_duration_seconds"); top > tr.LongestS && !math.IsInf(top, 1) {
			// A transaction ended in a bucket above the longest traced one.
			if lower := bucketBelow(top); lower >= tr.LongestS {
				tr.LongestS, tr.LongestUp = top, true
			}
		}
	}
	if b, err := os.ReadFile(logPath); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "a transaction took more than half the transaction timeout") {
				tr.Warns++
				if tr.WarnLine == "" {
					tr.WarnLine = line
				}
			}
		}
	}
}

// txnBuckets are phasegate_transaction_duration_seconds' bucket bounds
// (txn/metrics.go).
var txnBuckets = []float64{.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// bucketBelow is the bucket bound below le (0 for the first).
func bucketBelow(le float64) float64 {
	prev := 0.0
	for _, b := range txnBuckets {
		if b >= le {
			return prev
		}
		prev = b
	}
	return prev
}

// topBucket is the upper bound of the lowest bucket of histogram name
// that holds every observation: the longest one is at most that.
func topBucket(text, name string) float64 {
	return bucketQuantile(text, name, 1)
}

// txnTimeout is the run's PHASEGATE_TRANSACTION_TIMEOUT: the last one
// set in extra, else the sidecar's default of 20 s.
func txnTimeout(extra []string) time.Duration {
	d := 20 * time.Second
	for _, kv := range extra {
		if v, ok := strings.CutPrefix(kv, "PHASEGATE_TRANSACTION_TIMEOUT="); ok {
			if x, err := time.ParseDuration(v); err == nil {
				d = x
			}
		}
	}
	return d
}
