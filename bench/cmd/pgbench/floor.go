package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/proxy"
)

// floorResult is one run of the sarama floor: a relay that does nothing
// but consume and produce with the client library phasegate is built on.
type floorResult struct {
	FetchBytes int32 // what each fetch asked of a partition
	Records    int64 // every input record, trailers included
	Seconds    float64
	FirstS     float64 // start → the first record acknowledged
	Steady     float64 // records after the first acknowledgement ÷ first → last
	CPU        float64 // pgbench's utime+stime over the run (it does nothing else meanwhile)
	BrokerCPU  float64
	Err        error
}

func (f *floorResult) ok() bool { return f != nil && f.Err == nil && f.Seconds > 0 }

func (f *floorResult) rate() float64 {
	if !f.ok() {
		return 0
	}
	return float64(f.Records) / f.Seconds
}

// floors runs the sarama floor over a partitions row's input: at the fetch
// size phasegate gives each partition for this layout (proxy.FetchBytes
// with the bound the relay reported), and at sarama's default when that
// differs.
func (r *runner) floors(ctx context.Context, name string, in relayInput, maxBuffer int64, partitions int) []*floorResult {
	sizes := []int32{int32(proxy.FetchBytes(maxBuffer, partitions))}
	if def := sarama.NewConfig().Consumer.Fetch.Default; def != sizes[0] {
		sizes = append(sizes, def)
	}
	var out []*floorResult
	for _, fb := range sizes {
		if ctx.Err() != nil {
			break
		}
		sctx, cancel := r.stepCtx(ctx)
		f := r.floor(sctx, fmt.Sprintf("%s-floor-%d", name, fb), in, fb)
		cancel()
		r.log.Info("sarama floor", "run", name, "fetch_bytes", fb, "records", f.Records, "seconds", f.Seconds,
			"steady", f.Steady, "cpu_s", f.CPU, "broker_cpu_s", f.BrokerCPU, "err", f.Err)
		out = append(out, f)
	}
	return out
}

// floor copies every record of in's topics into a fresh topic of
// in.OutParts partitions, input partition mod in.OutParts (as phasegate's
// partition routing), with sarama alone: a consumer group
// (read_committed, offsets never committed) whose claims hand each record
// to one async producer (idempotent, acks=all, the sidecar's flush
// settings) without headers, alignment or transactions. Each of those
// only adds work, so its rate bounds from above what any relay built on
// sarama reaches on this layout and machine. It is done when the producer
// has acknowledged as many records as the input holds.
func (r *runner) floor(ctx context.Context, out string, in relayInput, fetch int32) *floorResult {
	res := &floorResult{FetchBytes: fetch}
	brokers := r.cfg.Brokers
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		res.Err = err
		return res
	}
	ends, err := endOffsets(ctx, kadm.NewClient(cl), in.Topics)
	cl.Close()
	if err == nil {
		err = createTopics(ctx, brokers, topicSpec{out, in.OutParts})
	}
	if err != nil {
		res.Err = err
		return res
	}
	ends.Each(func(o kadm.ListedOffset) { res.Records += o.Offset })

	base := func() *sarama.Config {
		c := sarama.NewConfig()
		c.Version = sarama.V3_9_0_0 // the sidecar's default PHASEGATE_KAFKA_VERSION
		return c
	}
	pc := base()
	pc.Producer.Idempotent = true
	pc.Producer.RequiredAcks = sarama.WaitForAll
	pc.Net.MaxOpenRequests = 1
	pc.Producer.Return.Successes = true
	pc.Producer.Partitioner = sarama.NewManualPartitioner
	pc.Producer.Flush.Bytes = 1 << 20
	pc.Producer.Flush.Messages = 10000
	pc.Producer.Flush.Frequency = 5 * time.Millisecond
	cc := base()
	cc.Consumer.IsolationLevel = sarama.ReadCommitted
	cc.Consumer.Offsets.Initial = sarama.OffsetOldest
	cc.Consumer.Offsets.AutoCommit.Enable = false
	cc.Consumer.Fetch.Default = fetch

	cpu0, broker0 := selfCPU(), r.brokerCPU()
	start := time.Now()
	prod, err := sarama.NewAsyncProducer(brokers, pc)
	if err != nil {
		res.Err = err
		return res
	}
	defer prod.Close()
	group, err := sarama.NewConsumerGroup(brokers, out, cc)
	if err != nil {
		res.Err = err
		return res
	}
	defer group.Close()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumed := make(chan error, 1)
	go func() {
		var err error
		for cctx.Err() == nil && err == nil {
			err = group.Consume(cctx, in.Topics, floorHandler{prod: prod, out: out, parts: in.OutParts})
		}
		consumed <- err
	}()
	var acked int64
	var first time.Time
	for acked < res.Records {
		select {
		case <-prod.Successes():
			if acked++; acked == 1 {
				first = time.Now()
			}
		case err := <-prod.Errors():
			res.Err = fmt.Errorf("floor: produce: %w", err)
			return res
		case err := <-consumed:
			res.Err = fmt.Errorf("floor: consume ended with %d of %d records acknowledged: %w", acked, res.Records, errors.Join(err, ctx.Err()))
			return res
		}
	}
	end := time.Now()
	res.CPU, res.BrokerCPU = selfCPU()-cpu0, r.brokerCPU()-broker0
	res.Seconds = end.Sub(start).Seconds()
	res.FirstS = first.Sub(start).Seconds()
	if end.After(first) {
		res.Steady = float64(res.Records-1) / end.Sub(first).Seconds()
	}
	return res
}

type floorHandler struct {
	prod  sarama.AsyncProducer
	out   string
	parts int32
}

func (floorHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (floorHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h floorHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		pm := &sarama.ProducerMessage{Topic: h.out, Partition: m.Partition % h.parts, Timestamp: m.Timestamp}
		if m.Key != nil {
			pm.Key = sarama.ByteEncoder(m.Key)
		}
		if m.Value != nil {
			pm.Value = sarama.ByteEncoder(m.Value)
		}
		select {
		case h.prod.Input() <- pm:
		case <-s.Context().Done():
			return nil
		}
	}
	return nil
}

// selfCPU is this process's utime+stime in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
