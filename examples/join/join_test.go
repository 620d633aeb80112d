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
	"github.com/phasegate/phasegate/proxy"
	"github.com/phasegate/phasegate/watermarks"
)

// The example join, fed by a real pipeline on kfake, joins every order with
// its payment in the same phase and reports no violation.
func TestJoinReadsWholePhases(t *testing.T) {
	c, err := kafkatest.Kfake(map[string]int32{"orders": 2, "payments": 2, "aligned": 2, "aligned.quarantine": 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	prod, err := kafkatest.NewProducer(brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 40 {
		ts := base.Add(time.Duration(i) * 100 * time.Millisecond) // 4 phases of 1 s
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
		InputTopics: []string{"orders", "payments"}, OutputTopic: "aligned", QuarantineTopic: "aligned.quarantine",
		GroupID: "g", TransactionalID: "join-test",
		Watermarks: watermarks.Config{PhaseLength: time.Second, IdleTimeout: 300 * time.Millisecond, MaxBufferBytes: 1 << 20,
			SealTimeoutMin: time.Minute, SealTimeoutMax: time.Minute, Now: time.Now},
		Dedupe: dedupe.Config{MaxSealedPhases: 8, MaxIdentities: 1 << 16},
		Tick:   10 * time.Millisecond, LagInterval: 100 * time.Millisecond, QuarantineDelay: time.Second,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Stop()

	var out syncBuffer
	j := &Join{Left: "orders", Right: "payments", Out: &out}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- j.Run(runCtx, brokers, "aligned") }()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), "joined=") < 8 && time.Now().Before(deadline) { // 4 phases x 2 partitions
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if j.Violations != 0 || j.Phases != 8 {
		t.Fatalf("phases %d, violations %d:\n%s", j.Phases, j.Violations, text)
	}
	if strings.Count(text, "joined=5 unmatched=0") != 8 {
		t.Fatalf("every phase and partition should join its 5 orders with their payments:\n%s", text)
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
