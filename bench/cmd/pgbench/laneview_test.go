package main

import (
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/fleet"
)

// t0 is the base of the lane tests' clocks.
var t0 = time.UnixMilli(0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// mk is a marker of lane on part for phase, sealed at seal ms and
// visible at vis ms (recv = vis; no LSO poll).
func mk(part, lane, writers int32, phase uint64, seal, vis int) markEv {
	return markEv{part: part, lane: lane, writers: writers, phase: phase, sealed: at(seal), recv: at(vis)}
}

func recvOnly(_ int32, _ int64, recv time.Time) time.Time { return recv }

func TestLaneViewComplete(t *testing.T) {
	// Partition 0 has 3 lanes; lane 2 skips phase 5 (its marker of 6
	// completes it). Partition 1 has one writer.
	marks := []markEv{
		mk(0, 0, 3, 5, 100, 150), mk(0, 1, 3, 5, 110, 400), mk(0, 2, 3, 6, 900, 950),
		mk(0, 0, 3, 6, 880, 960), mk(0, 1, 3, 6, 890, 970),
		mk(1, 0, 1, 5, 100, 120), mk(1, 0, 1, 6, 900, 930),
	}
	v := newLaneView(marks, nil, recvOnly)
	tests := []struct {
		name  string
		part  int32
		phase uint64
		want  int
		ok    bool
	}{
		{"the slowest lane completes it", 0, 5, 950, true},
		{"a later marker completes an earlier phase", 0, 4, 950, true},
		{"every lane marked 6", 0, 6, 970, true},
		{"no lane marked 7", 0, 7, 0, false},
		{"one writer", 1, 5, 120, true},
		{"unknown partition", 2, 5, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := v.completeAt(tc.part, tc.phase)
			if ok != tc.ok || ok && !got.Equal(at(tc.want)) {
				t.Errorf("completeAt(%d, %d) = %v, %v; want %v, %v", tc.part, tc.phase, got.Sub(t0), ok, time.Duration(tc.want)*time.Millisecond, tc.ok)
			}
		})
	}
	if g, ok := v.globalThrough(at(1000)); !ok || g != 6 {
		t.Errorf("globalThrough(1000) = %d, %v; want 6", g, ok)
	}
	if _, ok := v.globalThrough(at(500)); ok {
		t.Errorf("globalThrough(500): ok before partition 0's lane 2 has a marker")
	}
	next, base, ok := v.nextGlobal(at(960))
	if !ok || base != 5 || !next.Equal(at(970)) {
		t.Errorf("nextGlobal(960) = %v, %d, %v; want 970 ms, 5", next.Sub(t0), base, ok)
	}
	if s, ok := v.firstSeal(0, 6); !ok || !s.Equal(at(880)) {
		t.Errorf("firstSeal(0, 6) = %v, %v; want 880 ms", s.Sub(t0), ok)
	}
}

func TestLaneViewSpreadAndSplit(t *testing.T) {
	// Phase n ends at (n+1) s. Lane 1 runs 2 phases behind lane 0 from
	// 3.5 s to 4.5 s; lane 0's data of phase 5 is visible at 3.6 s.
	marks := []markEv{
		mk(0, 0, 2, 1, 2100, 2200), mk(0, 1, 2, 1, 2150, 2200),
		mk(0, 0, 2, 2, 3100, 3200), mk(0, 0, 2, 3, 3400, 3500),
		mk(0, 1, 2, 2, 3200, 4500), mk(0, 1, 2, 3, 3300, 4500),
	}
	data := []dataEv{{part: 0, lane: 0, phase: 5, hasPhase: true, recv: at(3600), slot: -1, seq: -1}}
	v := newLaneView(marks, data, recvOnly)
	sp := v.spread(at(2200), at(5000), 100*time.Millisecond)
	if sp.Max != 2 || sp.DataAhead != 4 {
		t.Errorf("spread: max %v, data ahead %v; want 2 and 4", sp.Max, sp.DataAhead)
	}
	s := v.phaseSplit(0, 10, time.Second)
	if s.N != 3 || s.OnePoll != 1 {
		t.Errorf("phaseSplit: %d phases, %d in one poll; want 3 and 1 (phase 1: both lanes at 2.2 s)", s.N, s.OnePoll)
	}
	// Phase end → last seal: phase 1 150 ms, 2 200 ms, 3 -600 ms.
	if got := percentile(s.EndSeal, 50); got != 150 {
		t.Errorf("phase end → last seal, median = %v; want 150", got)
	}
	if got := percentile(s.SealSpread, 100); got != 100 {
		t.Errorf("largest seal spread = %v; want 100 (phase 3: 3300 .. 3400)", got)
	}
}

func TestSeqs(t *testing.T) {
	v := appendSeq(nil, 3, 41)
	if string(v) != "3:41:" {
		t.Fatalf("appendSeq = %q", v)
	}
	for _, tc := range []struct {
		in         string
		slot, seqN int64
	}{
		{"3:41:abcdef", 3, 41},
		{"pgbench trailer", -1, -1},
		{":1:", -1, -1},
		{"1:x:", -1, -1},
		{"12:7", -1, -1},
	} {
		if s, q := parseSeq([]byte(tc.in)); s != tc.slot || q != tc.seqN {
			t.Errorf("parseSeq(%q) = %d, %d; want %d, %d", tc.in, s, q, tc.slot, tc.seqN)
		}
	}
	data := []dataEv{{slot: 0, seq: 0}, {slot: 0, seq: 1}, {slot: 0, seq: 1}, {slot: 1, seq: 0}, {slot: 1, seq: 5}, {slot: -1, seq: -1}}
	got := checkSeqs(data, []int64{3, 1})
	want := seqCheck{Want: 4, Got: 3, Lost: 1, Dups: 1}
	if got != want {
		t.Errorf("checkSeqs = %+v; want %+v", got, want)
	}
}

func TestSidecarLog(t *testing.T) {
	log := strings.Join([]string{
		`time=2026-12-07T08:10:04.874Z level=INFO msg="serving /healthz"`,
		`time=2026-12-07T08:10:05.200Z level=INFO msg="phasegate started" inputs="[a b]"`,
		`not a log line`,
		`time=2026-12-07T08:10:06.240Z level=INFO msg="partitions idle: no record" count=1 partitions=x-b/2`,
		`time=2026-12-07T08:10:07.000Z level=WARN msg="a transaction took more than half the transaction timeout; …" took=11.504s transaction_timeout=20s records=40735`,
	}, "\n")
	var lines []logLine
	for _, s := range strings.Split(log, "\n") {
		if l, ok := parseLogLine(s); ok && !l.at.Before(time.Date(2026, 12, 7, 8, 10, 5, 0, time.UTC)) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines at or after 08:10:05, want 3", len(lines))
	}
	if l, ok := firstLine(lines, `msg="partitions idle`, "x-b/2"); !ok || l.at.Second() != 6 {
		t.Errorf("firstLine(idle, x-b/2) = %v, %v", l.at, ok)
	}
	if _, ok := firstLine(lines, `msg="partitions idle`, "x-b/1"); ok {
		t.Errorf("firstLine found a partition the line does not name")
	}
	if n := countLines(lines, "more than half the transaction timeout"); n != 1 || lines[2].level != "WARN" {
		t.Errorf("countLines = %d, level %q", n, lines[2].level)
	}
	if got := warnQuote(lines[2].text); got != " (`took=11.504s transaction_timeout=20s records=40735`)" {
		t.Errorf("warnQuote = %q", got)
	}
}

func TestTxnTraceHelpers(t *testing.T) {
	if d := txnTimeout([]string{"GOMEMLIMIT=1GiB", "PHASEGATE_TRANSACTION_TIMEOUT=40s"}); d != 40*time.Second {
		t.Errorf("txnTimeout = %v, want 40s", d)
	}
	if d := txnTimeout(nil); d != 20*time.Second {
		t.Errorf("txnTimeout(nil) = %v, want the sidecar's 20s", d)
	}
	for _, tc := range []struct{ le, want float64 }{{.002, 0}, {2.5, 1}, {10, 5}} {
		if got := bucketBelow(tc.le); got != tc.want {
			t.Errorf("bucketBelow(%v) = %v, want %v", tc.le, got, tc.want)
		}
	}
	text := `phasegate_transaction_duration_seconds_bucket{result="committed",le="1"} 3
phasegate_transaction_duration_seconds_bucket{result="committed",le="2.5"} 3
phasegate_transaction_duration_seconds_bucket{result="committed",le="5"} 4
phasegate_transaction_duration_seconds_bucket{result="committed",le="+Inf"} 4
phasegate_transaction_duration_seconds_count{result="committed"} 4
`
	tests := []struct {
		name   string
		traced float64
		want   float64
		up     bool
	}{
		{"a later transaction was slower than every traced one", 0.8, 5, true},
		{"the slowest is the traced one", 4.2, 4.2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &txnTrace{Evs: []txnEv{{N: 1, Seconds: tc.traced}}}
			tr.finish(text, "/nonexistent", 20*time.Second)
			if tr.LongestS != tc.want || tr.LongestUp != tc.up || tr.Total != 4 {
				t.Errorf("finish: longest %v (bound %v), total %v; want %v (%v), 4", tr.LongestS, tr.LongestUp, tr.Total, tc.want, tc.up)
			}
		})
	}
}

func TestReportSplit(t *testing.T) {
	// Phases end at (n+1) s. Task 0 passes phase 2 at 3.2 s, task 1 at
	// 3.5 s; task 1 turns idle at 4.1 s, which passes phase 3 for it. Its
	// idle report of the start, before any input, passes nothing for good:
	// the next report holds phase 2 again.
	w := &reportWatch{reps: []fleet.Report{
		{Task: 1, Idle: true, AtMs: 500},
		{Task: 0, Low: 2, AtMs: 2900}, {Task: 1, Low: 2, AtMs: 2950},
		{Task: 0, Low: 3, AtMs: 3200}, {Task: 1, Low: 3, AtMs: 3500},
		{Task: 0, Low: 4, AtMs: 4200}, {Task: 1, Low: 3, Idle: true, High: 3, AtMs: 4100},
	}}
	passed := w.passedAt(2, 3)
	if len(passed) != 2 || !passed[2].Equal(at(3500)) || !passed[3].Equal(at(4200)) {
		t.Fatalf("passedAt = %v; want phase 2 at 3.5 s, 3 at 4.2 s", passed)
	}
	var s phaseSplit
	s.reportSplit(passed, []markEv{mk(0, 0, 2, 2, 3600, 3700), mk(1, 0, 2, 2, 3600, 3700), mk(0, 1, 2, 2, 3900, 4000)}, time.Second)
	if got := percentile(s.ReportSeal, 100); len(s.ReportSeal) != 2 || got != 400 {
		t.Errorf("report → seal = %v; want lanes 0 and 1 at 100 and 400 ms", s.ReportSeal)
	}
	if got := percentile(s.EndReport, 100); got != 500 {
		t.Errorf("phase end → report, max = %v; want 500 (phase 2: 3.0 → 3.5 s)", got)
	}
}
