package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/watermarks"
)

// benchPipeline is a pipeline with one generation over n partitions of one
// topic and no Kafka client: enough for the per-record path.
func benchPipeline(b *testing.B, n int, now func() time.Time) *Pipeline {
	b.Helper()
	cfg := Config{
		InputTopics: []string{"in"}, OutputTopic: "out", QuarantineTopic: "q", GroupID: "g", TransactionalID: "t",
		Watermarks: watermarks.Config{PhaseLength: 100 * time.Millisecond, IdleTimeout: time.Hour,
			MaxBufferBytes: 1 << 40, SealTimeoutMin: time.Hour, SealTimeoutMax: time.Hour, Now: now},
		Dedupe: dedupe.Config{MaxSealedPhases: 64, MaxIdentities: 1 << 22},
		Tick:   time.Millisecond, LagInterval: time.Second, QuarantineDelay: time.Second,
	}
	p := &Pipeline{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: now, outParts: 3, quarParts: 3,
		metrics: NewMetrics(prometheus.NewRegistry(), cfg.InputTopics), limiter: logLimiter{last: map[string]time.Time{}}}
	starts := make([]align.Start, n)
	lso := map[align.TP]int64{}
	for i := range n {
		starts[i] = align.Start{TP: align.TP{Topic: "in", Partition: int32(i)}}
		lso[starts[i].TP] = 0
	}
	s, err := align.New[*sarama.ConsumerMessage](p.alignConfig(), starts)
	if err != nil {
		b.Fatal(err)
	}
	s.Lag(lso, nil)
	p.gen = &generation{id: 1, ctx: context.Background(), s: s}
	return p
}

// BenchmarkHandle is the per-record path as the loop runs it (headers,
// phase, identity, dedupe, watermark, buffer, the records-in counter) at
// 1, 64 and 1024 partitions; every 4096 records, outside the timer, the
// session steps and its Batch is marked committed, as a transaction would
// (BenchmarkStep times that part).
func BenchmarkHandle(b *testing.B) {
	for _, n := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			clock := time.Unix(1_700_000_000, 0)
			p := benchPipeline(b, n, func() time.Time { return clock })
			const ring = 1 << 14
			msgs := make([]*sarama.ConsumerMessage, ring)
			for i := range msgs {
				msgs[i] = &sarama.ConsumerMessage{Topic: "in", Partition: int32(i % n), Key: []byte("customer-42"),
					Value: make([]byte, 100), Headers: []*sarama.RecordHeader{{Key: []byte("trace"), Value: []byte("abc")}}}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m := msgs[i%ring]
				m.Offset = int64(i / n)
				m.Timestamp = clock.Add(time.Duration(i/n) * time.Millisecond)
				p.handle(delivery{gen: 1, msg: m, gate: benchGate, size: messageBytes(m)})
				i++
				if i%4096 == 0 {
					b.StopTimer()
					clock = clock.Add(time.Millisecond)
					if st := p.gen.s.Step(); st.Batch != nil {
						p.gen.s.Committed(st.Batch)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkStep is the commit path per record: the session's Step builds
// the Batch of a sealed phase of 4096 records over 64 partitions, each
// Write becomes a sarama ProducerMessage as commit sends it, and the Batch
// is marked committed. ns/op is per record.
func BenchmarkStep(b *testing.B) {
	const n, perPhase = 64, 4096
	clock := time.Unix(1_700_000_000, 0)
	p := benchPipeline(b, n, func() time.Time { return clock })
	s := p.gen.s
	msgs := make([]*sarama.ConsumerMessage, perPhase+n)
	for i := range msgs {
		msgs[i] = &sarama.ConsumerMessage{Topic: "in", Partition: int32(i % n), Key: []byte("customer-42"),
			Value: make([]byte, 100), Headers: []*sarama.RecordHeader{{Key: []byte("trace"), Value: []byte("abc")}}}
	}
	b.ReportAllocs()
	var offset int64
	phaseStart := clock
	for b.Loop() {
		b.StopTimer()
		for i, m := range msgs { // one phase, then a record per partition of the next
			m.Offset = offset + int64(i/n)
			m.Timestamp = phaseStart
			if i >= perPhase {
				m.Timestamp = phaseStart.Add(100 * time.Millisecond)
			}
			p.handle(delivery{gen: 1, msg: m, gate: benchGate, size: messageBytes(m)})
		}
		offset += int64(len(msgs)/n + 1)
		phaseStart = phaseStart.Add(100 * time.Millisecond)
		b.StartTimer()
		st := s.Step()
		if st.Batch == nil {
			b.Fatal("no Batch")
		}
		for _, w := range st.Batch.Writes {
			_ = p.message(st.Batch, w)
		}
		s.Committed(st.Batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perPhase), "ns/record")
}

// benchGate is the claim gate every benchmarked delivery carries.
var benchGate = newGate(new(atomic.Int32))
