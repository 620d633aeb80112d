package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

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
	tr, err := watermarks.New(cfg.Watermarks, 0)
	if err != nil {
		b.Fatal(err)
	}
	cache, err := dedupe.New(cfg.Dedupe)
	if err != nil {
		b.Fatal(err)
	}
	p := &Pipeline{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: now,
		metrics: NewMetrics(prometheus.NewRegistry(), cfg.InputTopics), limiter: logLimiter{last: map[string]time.Time{}}}
	g := &generation{id: 1, tracker: tr, dedupe: cache, markers: dedupe.NewMarkers(), buf: newBuffer(), parts: map[tp]*partState{}}
	for i := range n {
		ps := &partState{tp: tp{"in", int32(i)}, key: dedupe.PartitionKey{Topic: "in", Partition: int32(i)}, counts: map[uint64]int64{}}
		ps.p = tr.Add("in", int32(i))
		p.initPartitionMetrics(ps)
		tr.Lag(ps.p, 0)
		g.parts[ps.tp] = ps
		g.byP = append(g.byP, ps)
	}
	p.gen = g
	return p
}

// BenchmarkHandle is the per-record path (headers, phase, identity, dedupe,
// watermark, buffer) at 1, 64 and 1024 partitions; every 4096 records the
// sealed phases are released as a commit would.
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
				p.handle(delivery{gen: 1, msg: m})
				i++
				if i%4096 == 0 {
					clock = clock.Add(time.Millisecond)
					for _, s := range p.gen.tracker.Advance() {
						p.gen.dedupe.Seal(s.Phase)
						delete(p.gen.buf.phases, s.Phase)
					}
				}
			}
		})
	}
}
