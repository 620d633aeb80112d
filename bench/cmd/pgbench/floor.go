package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/internal/inproc"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/proxy"
)

// floorResult is one run of the sarama floor: a relay that does nothing
// but consume and produce with the client library phasegate is built on.
type floorResult struct {
	FetchBytes int32 // what each fetch asked of a partition
	// Headers: each output record carried the headers phasegate adds to
	// an input record without any (markers.AppendDataHeaders: phase, id,
	// source), so that the run costs what the wire format costs the client
	// library, without phasegate's own work.
	Headers   bool
	Records   int64 // every input record, trailers included
	Seconds   float64
	FirstS    float64 // start → the first record acknowledged
	CPU       float64 // pgbench's utime+stime over the run (it does nothing else meanwhile)
	BrokerCPU float64
	Err       error
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
// with the bound the relay reported), at sarama's default when that
// differs, then at phasegate's fetch size with phasegate's headers
// (floorResult.Headers; phase is the row's phase length).
func (r *runner) floors(ctx context.Context, name string, in relayInput, maxBuffer int64, partitions int, phase time.Duration) []*floorResult {
	type run struct {
		fetch int32
		phase time.Duration // > 0: with headers (floor)
	}
	fb := int32(proxy.FetchBytes(maxBuffer, partitions))
	runs := []run{{fetch: fb}}
	if def := sarama.NewConfig().Consumer.Fetch.Default; def != fb {
		runs = append(runs, run{fetch: def})
	}
	runs = append(runs, run{fetch: fb, phase: phase})
	var out []*floorResult
	for i, fr := range runs {
		if ctx.Err() != nil {
			break
		}
		sctx, cancel := r.stepCtx(ctx)
		f := r.floor(sctx, fmt.Sprintf("%s-floor-%d", name, i), in, fr.fetch, fr.phase)
		cancel()
		r.log.Info("sarama floor", "run", name, "fetch_bytes", fr.fetch, "headers", f.Headers, "records", f.Records, "seconds", f.Seconds,
			"cpu_s", f.CPU, "broker_cpu_s", f.BrokerCPU, "err", f.Err)
		out = append(out, f)
	}
	return out
}

// errRebalanced fails a floor run whose group began a second session: it
// would read the input again from the start (no offsets are committed).
var errRebalanced = errors.New("floor: the group rebalanced")

// floor copies every record of in's topics into a fresh topic of
// in.outParts() partitions, input partition mod that (as phasegate's
// partition routing), with sarama alone and the sidecar's client settings
// (proxy.Kafka's ConsumerConfig and a ProducerConfig without a
// transactional ID, from inproc.KafkaFor): a consumer group whose claims
// queue each record (as the sidecar's do, so sarama's fetcher never waits
// on them) for one idempotent async producer, without alignment or
// transactions, and without headers unless phase > 0 (then with
// phasegate's, for phases of that length).
// Each of those only adds work, so its rate (every record fetched and
// produced, from the clients' creation to the last acknowledgement) bounds
// from above what a relay built on sarama reaches on this layout and
// machine. It is done when the producer has acknowledged as many records as
// the input holds.
func (r *runner) floor(ctx context.Context, out string, in relayInput, fetch int32, phase time.Duration) *floorResult {
	res := &floorResult{FetchBytes: fetch, Headers: phase > 0}
	brokers := r.cfg.Brokers
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		res.Err = err
		return res
	}
	ends, err := endOffsets(ctx, kadm.NewClient(cl), in.Topics)
	cl.Close()
	res.Records = sumOffsets(ends)
	if err == nil {
		err = createTopics(ctx, brokers, topicSpec{out, in.outParts()})
	}
	if err != nil {
		res.Err = err
		return res
	}
	k := inproc.KafkaFor(brokers) // the tests' client settings: only timeouts differ from the sidecar's defaults
	cc := k.ConsumerConfig("")
	cc.Consumer.Fetch.Default = fetch

	cpu0, broker0 := selfCPU(), r.brokerCPU()
	start := time.Now()
	prod, err := sarama.NewAsyncProducer(brokers, k.ProducerConfig(""))
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
		h := &floorHandler{prod: prod, out: out, parts: in.outParts(), phase: phase}
		var err error
		for cctx.Err() == nil && err == nil {
			err = group.Consume(cctx, in.Topics, h)
		}
		consumed <- err
	}()
	// A stall is checked once a second, not per acknowledgement: the
	// loop's CPU counts as the floor's.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var acked, seen int64
	var first time.Time
	movedAt := time.Now()
	for acked < res.Records {
		select {
		case <-prod.Successes():
			if acked++; acked == 1 {
				first = time.Now()
			}
		case now := <-tick.C:
			if acked != seen {
				seen, movedAt = acked, now
			} else if now.Sub(movedAt) > r.cfg.StallTimeout {
				res.Err = fmt.Errorf("floor: no record acknowledged for %s (%d of %d)", r.cfg.StallTimeout, acked, res.Records)
				return res
			}
		case err := <-prod.Errors():
			res.Err = fmt.Errorf("floor: produce: %w", err)
			return res
		case err := <-consumed:
			res.Err = fmt.Errorf("floor: consume ended with %d of %d records acknowledged: %w", acked, res.Records, errors.Join(err, ctx.Err()))
			return res
		}
	}
	res.CPU, res.BrokerCPU = selfCPU()-cpu0, r.brokerCPU()-broker0
	res.Seconds = time.Since(start).Seconds()
	res.FirstS = first.Sub(start).Seconds()
	return res
}

type floorHandler struct {
	prod     sarama.AsyncProducer
	out      string
	parts    int32
	phase    time.Duration // > 0: add phasegate's headers (floorResult.Headers)
	sessions atomic.Int32
}

func (h *floorHandler) Setup(sarama.ConsumerGroupSession) error {
	if h.sessions.Add(1) > 1 {
		return errRebalanced
	}
	return nil
}

func (*floorHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim queues what sarama delivers and hands it to the producer in
// order.
func (h *floorHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	var queue []*sarama.ProducerMessage
	for {
		var input chan<- *sarama.ProducerMessage // nil (never ready) while the queue is empty
		var next *sarama.ProducerMessage
		if len(queue) > 0 {
			input, next = h.prod.Input(), queue[0]
		}
		select {
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			pm := &sarama.ProducerMessage{Topic: h.out, Partition: m.Partition % h.parts, Timestamp: m.Timestamp}
			if m.Key != nil {
				pm.Key = sarama.ByteEncoder(m.Key)
			}
			if m.Value != nil {
				pm.Value = sarama.ByteEncoder(m.Value)
			}
			if h.phase > 0 {
				pm.Headers = h.headers(m)
			}
			queue = append(queue, pm)
		case input <- next:
			queue[0] = nil
			queue = queue[1:]
		case <-s.Context().Done():
			return nil
		}
	}
}

// selfCPU is this process's utime+stime in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

// headers are the ones phasegate adds to m when m has none and its
// output partition has one writer: phase, id and source (MARKERS.md
// section 2), built by the function phasegate's relay uses, in one
// allocation per record as the sidecar's are (proxy's outRecord), so
// that the floor counts what the bytes cost and not extra allocations. A
// record without a timestamp gets phase 0: the input never has one.
func (h *floorHandler) headers(m *sarama.ConsumerMessage) []sarama.RecordHeader {
	r := new(floorHeaders)
	ph, _ := markers.PhaseOf(m.Timestamp.UnixMilli(), h.phase)
	phase := markers.AppendPhase(r.buf[:0], ph)
	phase = phase[:len(phase):len(phase)]
	source := markers.AppendSource(r.buf[len(phase):len(phase)], m.Topic, m.Partition, m.Offset)
	return markers.AppendDataHeaders(r.headers[:0], markers.DataHeaders{}, phase, source, nil)
}

// floorHeaders holds one record's headers and their values: a phase (up
// to 20 digits) and a source for topic names of up to 48 bytes (longer
// ones take one more allocation).
type floorHeaders struct {
	headers [markers.MaxAddedHeaders]sarama.RecordHeader
	buf     [20 + 48 + 1 + 10 + 1 + 19]byte
}
