package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/internal/inproc"
	"github.com/phasegate/phasegate/internal/kafkatest"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/proxy"
	"github.com/phasegate/phasegate/watermarks"
)

// pipeline runs phasegate on kfake over phases of 1 s: each phase puts n
// orders and their n payments (same keys) on each of 2 partitions.
func pipeline(t *testing.T, phases, n int) []string {
	t.Helper()
	c, err := kafkatest.Kfake(map[string]int32{"orders": 2, "payments": 2, "aligned": 2, "aligned.quarantine": 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	prod, err := kafkatest.NewProducer(brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	step := time.Second / time.Duration(n)
	var recs []*kgo.Record
	for i := range phases * n * 2 {
		ts := base.Add(time.Duration(i/2) * step)
		key := []byte(fmt.Sprint("order-", i))
		p := int32(i % 2)
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Key: key, Timestamp: ts, Value: []byte("o")},
			&kgo.Record{Topic: "payments", Partition: p, Key: key, Timestamp: ts, Value: []byte("p")})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := prod.Produce(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	sc, err := inproc.StartSidecar(inproc.KafkaFor(brokers), proxy.Config{
		InputTopics: []string{"orders", "payments"}, OutputTopic: "aligned", QuarantineTopic: "aligned.quarantine", WatermarkTopic: "phasegate.watermarks",
		GroupID: "g", TransactionalID: "join-test",
		Watermarks: watermarks.Config{PhaseLength: time.Second, IdleTimeout: 300 * time.Millisecond, MaxBufferBytes: 1 << 20,
			SealTimeoutMin: time.Minute, SealTimeoutMax: time.Minute, Now: time.Now},
		Dedupe: dedupe.Config{MaxSealedPhases: 8, MaxIdentities: 1 << 16},
		Tick:   10 * time.Millisecond, LagInterval: 100 * time.Millisecond, QuarantineDelay: time.Second,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop() })
	return brokers
}

// markerLines reads the output as the test's own read_committed consumer
// and returns, per (phase, partition) key, the marker's count.
func markerLines(t *testing.T, brokers []string, want int) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		parts, err := kafkatest.ReadTopic(context.Background(), brokers, "aligned", true, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for p, recs := range parts {
			for _, r := range recs {
				if meta, err := markers.Inspect(r.Headers); err == nil && meta.Marker {
					m, err := markers.DecodeOutputMarker(r.Value)
					if err != nil {
						t.Fatal(err)
					}
					got[fmt.Sprintf("phase=%d partition=%d", m.Phase, p)] = m.Count
				}
			}
		}
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// phaseKeys returns the "phase=.. partition=.." prefix of each phase line.
func phaseKeys(out string) []string {
	var keys []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 2 && strings.HasPrefix(f[0], "phase=") {
			keys = append(keys, f[0]+" "+f[1])
		}
	}
	return keys
}

// The join, fed by a real pipeline on kfake, joins every order with its
// payment in the same phase and reports no violation.
func TestJoinReadsWholePhases(t *testing.T) {
	brokers := pipeline(t, 4, 5)
	var out syncBuffer
	j := &Join{Left: "orders", Right: "payments", Out: &out}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx, brokers, "aligned", "join") }()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), "joined=5 ") < 8 && time.Now().Before(deadline) { // 4 phases x 2 partitions
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if j.Violations != 0 || strings.Count(text, "records=10 sources=orders:5,payments:5 marker_count=10") != 8 ||
		strings.Count(text, "joined=5 unmatched=0") != 8 {
		t.Fatalf("every phase and partition should join its 5 orders with their payments (violations %d):\n%s", j.Violations, text)
	}
}

// A join killed in the middle of a phase and restarted in the same group
// resumes after the last whole phase: across the two runs every phase of
// every partition is joined exactly once, each with its marker's count.
func TestJoinRestartResumesAfterLastWholePhase(t *testing.T) {
	const phases = 12
	brokers := pipeline(t, phases, 10)
	want := markerLines(t, brokers, phases*2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var first syncBuffer
	a := &Join{Left: "orders", Right: "payments", Out: &first}
	var fed int
	a.crash = func() bool { // dies after its 4th phase, 3 data records into a phase
		if a.Phases >= 4 {
			fed++
		}
		return fed == 3
	}
	if err := a.Run(ctx, brokers, "aligned", "join"); err != nil {
		t.Fatal(err)
	}
	if fed != 3 {
		t.Fatalf("the first run ended without the crash (%d phases)", a.Phases)
	}
	var second syncBuffer
	b := &Join{Left: "orders", Right: "payments", Out: &second, Idle: 2 * time.Second}
	if err := b.Run(ctx, brokers, "aligned", "join"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, k := range append(phaseKeys(first.String()), phaseKeys(second.String())...) {
		seen[k]++
	}
	for k, count := range want {
		if seen[k] != 1 {
			t.Errorf("%s (marker count %d) joined %d times", k, count, seen[k])
		}
	}
	if len(seen) != len(want) || a.Violations+b.Violations != 0 || a.Phases < 4 || b.Phases == 0 {
		t.Fatalf("joined %d phase-partitions of %d; violations %d; first run %d phases, second %d\nfirst:\n%s\nsecond:\n%s",
			len(seen), len(want), a.Violations+b.Violations, a.Phases, b.Phases, first.String(), second.String())
	}
}

// syncBuffer is a bytes.Buffer the join goroutine writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
