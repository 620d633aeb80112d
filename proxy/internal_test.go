package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/watermarks"
)

// held, one row per rule: nothing is held without a step in flight; at the
// bound the holders are still read until a sealed phase waits for the
// next transaction; in is held at the bound or at half of it waiting,
// unless a holder's claim waits for its records there.
func TestHeld(t *testing.T) {
	const bound = 1 << 20
	for _, c := range []struct {
		name              string
		inflight          bool
		buffered, waiting int64
		toHot             bool
		holdIn, holdHot   bool
	}{
		{name: "no step in flight, over the bound", buffered: 2 * bound, waiting: bound},
		{name: "in flight, below every threshold", inflight: true, buffered: bound - 1, waiting: bound/2 - 1},
		{name: "in flight, half the bound waiting", inflight: true, buffered: bound - 1, waiting: bound / 2, holdIn: true},
		{name: "in flight, at the bound, nothing sealed waiting: holders read", inflight: true, buffered: bound, holdIn: true},
		{name: "in flight, at the bound, a sealed phase waiting: both held", inflight: true, buffered: bound, waiting: 1, holdIn: true, holdHot: true},
		{name: "in flight, over the bound, a sealed phase waiting", inflight: true, buffered: 2 * bound, waiting: bound, holdIn: true, holdHot: true},
		{name: "in flight, at the bound, a holder's records on in: in read", inflight: true, buffered: bound, toHot: true},
		{name: "in flight, half the bound waiting, a holder's records on in: in read", inflight: true, buffered: bound - 1, waiting: bound / 2, toHot: true},
		{name: "in flight, at the bound, a sealed phase and a holder's records on in: hot held", inflight: true, buffered: bound, waiting: 1, toHot: true, holdHot: true},
	} {
		holdIn, holdHot := held(c.inflight, c.buffered, c.waiting, bound, c.toHot)
		if holdIn != c.holdIn || holdHot != c.holdHot {
			t.Errorf("%s: held = in %v, hot %v; want %v, %v", c.name, holdIn, holdHot, c.holdIn, c.holdHot)
		}
	}
}

// initPaused sets every pause series of the partition to zero, whatever
// they held: what a resume needs (it had deleted them by a partial match,
// which scans every series).
func TestInitPausedResetsEveryReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, []string{"a"})
	k := align.TP{Topic: "a", Partition: 3}
	other := align.TP{Topic: "a", Partition: 4}
	m.initPaused(k)
	m.initPaused(other)
	m.paused.WithLabelValues("a", "3", watermarks.ReasonBuffer).Set(1)
	m.paused.WithLabelValues("a", "3", align.ReasonDedupe).Set(1)
	m.paused.WithLabelValues("a", "4", watermarks.ReasonBuffer).Set(1)
	m.initPaused(k)
	for _, r := range []string{watermarks.ReasonBuffer, align.ReasonDedupe} {
		if v := gaugeValue(t, m.paused.WithLabelValues("a", "3", r)); v != 0 {
			t.Errorf("a/3 %s = %v after initPaused, want 0", r, v)
		}
	}
	if v := gaugeValue(t, m.paused.WithLabelValues("a", "4", watermarks.ReasonBuffer)); v != 1 {
		t.Errorf("a/4 buffer = %v, want 1: another partition's series changed", v)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := -1
	for _, f := range families {
		if f.GetName() == "phasegate_partition_paused" {
			series = len(f.GetMetric())
		}
	}
	if series != 4 {
		t.Errorf("%d pause series gathered, want 4 (2 partitions x 2 reasons; -1: none)", series)
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// waitFor polls cond until it holds or timeout passes. WaitFor is the same
// for package proxy_test.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var WaitFor = waitFor

// latest: a new session starts from this process's own last commit only
// when it is newer than the group's. With the rule it replaced (the own
// commit whenever its offset was at least the group's), the returning
// owner row started from g=5 and published phases 5 to 7 a second time.
func TestLatestStart(t *testing.T) {
	tp := align.TP{Topic: "in", Partition: 0}
	at := func(off int64, meta string) align.Start { return align.Start{TP: tp, Offset: off, Metadata: meta} }
	for _, c := range []struct {
		name             string
		group, mem, want align.Start
	}{
		{"nothing committed by this process", at(10, "pg1;g=5;h=12;m=-"), align.Start{}, at(10, "pg1;g=5;h=12;m=-")},
		{"the group's fetch is older (no RequireStable)", at(10, "pg1;g=5;h=12;m=-"), at(12, "pg1;g=6;h=15;m=-"), at(12, "pg1;g=6;h=15;m=-")},
		{"a task returning to its former owner", at(10, "pg1;g=8;h=14;m=-"), at(10, "pg1;g=5;h=14;m=-"), at(10, "pg1;g=8;h=14;m=-")},
		{"the same commit", at(10, "pg1;g=5;h=14;m=-"), at(10, "pg1;g=5;h=14;m=-"), at(10, "pg1;g=5;h=14;m=-")},
		{"no group commit yet", at(-1, ""), at(3, "pg1;g=1;h=4;m=-"), at(3, "pg1;g=1;h=4;m=-")},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := latest(c.group, c.mem); got != c.want {
				t.Errorf("latest(%+v, %+v) = %+v, want %+v", c.group, c.mem, got, c.want)
			}
		})
	}
}

// retryBudget: exponential from first, capped at a second apart, adding up
// to about 60 % of the transaction timeout (a failover fits, the commit
// still has time), never fewer than 3 retries.
func TestRetryBudget(t *testing.T) {
	for _, c := range []struct {
		first, timeout time.Duration
		wantMin        time.Duration
	}{
		{100 * time.Millisecond, 20 * time.Second, 12 * time.Second},
		{20 * time.Millisecond, 20 * time.Second, 12 * time.Second},
		{100 * time.Millisecond, 5 * time.Second, 3 * time.Second},
		{100 * time.Millisecond, 100 * time.Millisecond, 0},
	} {
		n, f := retryBudget(c.first, c.timeout)
		var total time.Duration
		for i := range n {
			d := f(i, n)
			if d > time.Second || i > 0 && d < f(i-1, n) {
				t.Fatalf("backoff %d = %s after %s", i, d, f(i-1, n))
			}
			total += d
		}
		if n < 3 || total < c.wantMin || total > c.timeout*6/10+time.Second {
			t.Errorf("retryBudget(%s, %s) = %d retries, %s in all; want at least 3 and about 60 %% of the timeout", c.first, c.timeout, n, total)
		}
		if f(0, n) != c.first {
			t.Errorf("first backoff %s, want %s", f(0, n), c.first)
		}
	}
}
