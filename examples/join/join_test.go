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

	"github.com/twmb/franz-go/pkg/kadm"
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

// lanes writes to partition 0 of "aligned" a partition with two writers
// (MARKERS.md section 3.3) whose lane 0 runs ahead of lane 1: lane 0
// writes phases 5 to 8 (one order each) before lane 1 writes its phases 5
// to 8 (one payment each, same key): the marker that completes phase 5
// (offset 9) comes after lane 0's data of phases 6, 7 and 8.
func lanes(t *testing.T, brokers []string) {
	t.Helper()
	var recs []*kgo.Record
	for task, topic := range []string{"orders", "payments"} {
		for ph := uint64(5); ph <= 8; ph++ {
			phase := markers.AppendPhase(nil, ph)
			source := fmt.Appendf(nil, "%s/0/%d", topic, ph)
			recs = append(recs, &kgo.Record{Topic: "aligned", Key: []byte(fmt.Sprint("key-", ph)), Value: []byte("v"),
				Headers: kafkatest.Headers(markers.AppendDataHeaders[markers.Header](nil, markers.DataHeaders{}, phase, source, fmt.Append(nil, task)))})
			m := markers.Marker{Phase: ph, Count: 1, Sources: map[string]int64{topic: 1}, WatermarkMs: 1,
				SealedBy: markers.SealedByWatermark, Emitter: fmt.Sprint("pg-", task), Writers: 2, Task: int32(task)}
			recs = append(recs, &kgo.Record{Topic: "aligned", Value: m.AppendOutput(nil),
				Headers: kafkatest.Headers(markers.AppendMarkerHeaders[markers.Header](nil, phase))})
		}
	}
	prod, err := kafkatest.NewProducer(brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := prod.Produce(ctx, recs...); err != nil {
		t.Fatal(err)
	}
}

// committed returns the group's commit of aligned/0: offset and metadata.
func committed(t *testing.T, brokers []string, group string) (int64, string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup("aligned", 0)
	if !ok {
		return -1, ""
	}
	return o.At, o.Metadata
}

// A join killed right after it joined phase 5 of a partition with two
// writers has committed the checkpoint before lane 0's data of phase 6,
// with the metadata done=5, where "the offset after the marker" (10)
// would lie after that data; restarted in its group it returns every
// later phase whole (both writers' records), each once.
func TestJoinSeveralWritersResumesFromCheckpoint(t *testing.T) {
	c, err := kafkatest.Kfake(map[string]int32{"aligned": 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	lanes(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var first syncBuffer
	a := &Join{Left: "orders", Right: "payments", Out: &first}
	a.crash = func() bool { return a.Phases == 1 }
	if err := a.Run(ctx, brokers, "aligned", "join"); err != nil {
		t.Fatal(err)
	}
	if off, md := committed(t, brokers, "join"); off != 2 || md != `{"phasegate":1,"done":5}` {
		t.Fatalf("after phase 5 the join committed offset %d metadata %q; want 2 (lane 0's data of phase 6) and done=5\n%s",
			off, md, first.String())
	}
	var second syncBuffer
	b := &Join{Left: "orders", Right: "payments", Out: &second, Idle: time.Second}
	if err := b.Run(ctx, brokers, "aligned", "join"); err != nil {
		t.Fatal(err)
	}
	want := ""
	for ph := 5; ph <= 8; ph++ {
		want += fmt.Sprintf("phase=%d partition=0 records=2 sources=orders:1,payments:1 marker_count=2 sealed_by=watermark joined=1 unmatched=0\n", ph)
	}
	if got := first.String() + second.String(); got != want || a.Violations+b.Violations+a.Skipped+b.Skipped != 0 {
		t.Fatalf("two runs printed\n%swant every phase whole, once:\n%s", got, want)
	}
	if off, md := committed(t, brokers, "join"); off != 16 || md != `{"phasegate":1,"done":8}` {
		t.Fatalf("at the end the join committed offset %d metadata %q; want 16 and done=8", off, md)
	}
}

// A join whose group offset was set by hand, without metadata, to the
// middle of a partition with two writers (offset 3: after lane 0's marker
// for phase 5 and data of phase 6) proves phases before returning them:
// phases 5 and 6, whose lane-0 records lie behind the start, are reported
// skipped, never returned short; phases 7 and 8 are whole.
func TestJoinWithoutMetadataSkipsWhatItCannotProve(t *testing.T) {
	c, err := kafkatest.Kfake(map[string]int32{"aligned": 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	lanes(t, brokers)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "aligned", Partition: 0, At: 3, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "by-hand", offs)
	cl.Close()
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	j := &Join{Left: "orders", Right: "payments", Out: &out, Idle: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := j.Run(ctx, brokers, "aligned", "by-hand"); err != nil {
		t.Fatal(err)
	}
	want := "skipped phase=5 partition=0 records=1\nskipped phase=6 partition=0 records=1\n" +
		"phase=7 partition=0 records=2 sources=orders:1,payments:1 marker_count=2 sealed_by=watermark joined=1 unmatched=0\n" +
		"phase=8 partition=0 records=2 sources=orders:1,payments:1 marker_count=2 sealed_by=watermark joined=1 unmatched=0\n"
	if out.String() != want || j.Violations != 0 || j.Skipped != 2 {
		t.Fatalf("printed\n%swant\n%s", out.String(), want)
	}
	if off, md := committed(t, brokers, "by-hand"); off != 16 || md != `{"phasegate":1,"done":8}` {
		t.Fatalf("the join committed offset %d metadata %q; want 16 and done=8", off, md)
	}
}

// A join started by hand, without metadata, after lane 0's last marker
// (offset 8) of a finished output: lane 0 never marks again, so no phase
// completes; at its idle exit the join reports phases 5 to 8 skipped
// (lane 1's record of each discarded) instead of leaving them unreported
// (MARKERS.md rule C4, at the end of the input).
func TestJoinAtItsIdleExitSkipsWhatItCouldNeverProve(t *testing.T) {
	c, err := kafkatest.Kfake(map[string]int32{"aligned": 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	lanes(t, brokers)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "aligned", Partition: 0, At: 8, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "late", offs)
	cl.Close()
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	j := &Join{Left: "orders", Right: "payments", Out: &out, Idle: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := j.Run(ctx, brokers, "aligned", "late"); err != nil {
		t.Fatal(err)
	}
	want := ""
	for ph := 5; ph <= 8; ph++ {
		want += fmt.Sprintf("skipped phase=%d partition=0 records=1\n", ph)
	}
	if out.String() != want || j.Violations != 0 || j.Skipped != 4 {
		t.Fatalf("printed\n%swant\n%s", out.String(), want)
	}
}

// A group the Python reader committed to carries its checkpoint with the
// C string terminator confluent-kafka appends ({"phasegate":1,"done":5}
// and a NUL byte): the join still reads it as checkpoint metadata and
// returns phases 6 to 8 whole, skipping none.
func TestJoinResumesFromPythonReadersCheckpoint(t *testing.T) {
	c, err := kafkatest.Kfake(map[string]int32{"aligned": 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	lanes(t, brokers)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "aligned", Partition: 0, At: 2, LeaderEpoch: -1, Metadata: "{\"phasegate\":1,\"done\":5}\x00"})
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "from-python", offs)
	cl.Close()
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	j := &Join{Left: "orders", Right: "payments", Out: &out, Idle: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := j.Run(ctx, brokers, "aligned", "from-python"); err != nil {
		t.Fatal(err)
	}
	want := ""
	for ph := 6; ph <= 8; ph++ {
		want += fmt.Sprintf("phase=%d partition=0 records=2 sources=orders:1,payments:1 marker_count=2 sealed_by=watermark joined=1 unmatched=0\n", ph)
	}
	if out.String() != want || j.Violations+j.Skipped != 0 {
		t.Fatalf("printed\n%swant\n%s", out.String(), want)
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
