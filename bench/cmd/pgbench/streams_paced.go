package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// latencyResult is produce → visible to read_committed of data records in
// a paced run: the receive time at a read_committed consumer minus the
// record's timestamp (set by the producer when it wrote the record, and
// kept by phasegate and by Kafka Streams).
type latencyResult struct {
	Who        string // "phasegate, 100ms" or "Kafka Streams, 2 threads"
	Size       int
	TargetRate float64
	Achieved   float64
	Samples    int
	P50, P99   float64 // ms
	Max        float64
	Err        error
}

// latencies collects produce → visible samples of data records.
type latencies struct {
	mu      sync.Mutex
	stamps  []time.Time
	samples []float64 // ms
}

func (l *latencies) add(stamp, received time.Time) {
	l.mu.Lock()
	l.stamps = append(l.stamps, stamp)
	l.samples = append(l.samples, ms(received.Sub(stamp)))
	l.mu.Unlock()
}

func (l *latencies) count() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.samples))
}

// fill sets res's percentiles over the records stamped inside [from, to),
// or its error when there were none.
func (l *latencies) fill(res *latencyResult, from, to time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var in []float64
	for i, t := range l.stamps {
		if !t.Before(from) && t.Before(to) {
			in = append(in, l.samples[i])
		}
	}
	res.Samples = len(in)
	if res.Samples == 0 {
		res.Err = fmt.Errorf("no record stamped between %s and %s was received", from.Format(time.TimeOnly), to.Format(time.TimeOnly))
		return
	}
	res.P50, res.P99, res.Max = percentile(in, 50), percentile(in, 99), percentile(in, 100)
}

// streamsPaced runs the pass-through on fresh topics (3 + 2 partitions, as
// the paced phasegate runs) while a producer writes live at rate records/s
// for BENCH_PACED_DURATION, and a read_committed consumer times every
// output record. The first second is warm-up and not timed.
func (r *runner) streamsPaced(ctx context.Context, name string, size, threads int, rate float64) *latencyResult {
	res := &latencyResult{Who: fmt.Sprintf("Kafka Streams, %d %s", threads, plural(threads, "thread")), Size: size, TargetRate: rate}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RunTimeout)
	defer cancel()
	app := fmt.Sprintf("%s-%s", r.tag, name)
	a, b, out := topicSpec{app + "-a", 3}, topicSpec{app + "-b", 2}, topicSpec{app + "-out", outputPartitions}
	if err := createTopics(ctx, r.cfg.Brokers, a, b, out); err != nil {
		res.Err = err
		return res
	}
	sa, err := r.startStreams(app, app, []string{a.Name, b.Name}, out.Name, threads, "")
	if err != nil {
		res.Err = err
		return res
	}
	defer sa.stop()
	for sa.runningAt().IsZero() {
		select {
		case <-ctx.Done():
			res.Err = fmt.Errorf("streams never reached RUNNING: %w (log %s)", ctx.Err(), sa.p.log.Name())
			return res
		case <-sa.p.done:
			res.Err = fmt.Errorf("streams: the JVM exited: %v (log %s)", sa.p.err, sa.p.log.Name())
			return res
		case <-time.After(20 * time.Millisecond):
		}
	}
	lat := &latencies{}
	cctx, stopConsumer := context.WithCancel(ctx)
	var wg sync.WaitGroup
	consumerErr := make(chan error, 1)
	wg.Go(func() {
		consumerErr <- consumeTimed(cctx, r.cfg.Brokers, out.Name, func(rec *kgo.Record, at time.Time) {
			lat.add(rec.Timestamp, at)
		})
	})
	start, end, sent, err := producePaced(ctx, r.cfg.Brokers, []topicSpec{a, b}, size, rate, r.cfg.PacedFor)
	if err == nil {
		res.Achieved = float64(sent) / end.Sub(start).Seconds()
		// Every record written shows up within one commit interval and a
		// fetch; 10 s is a bound for a run that fell behind.
		deadline := time.Now().Add(10 * time.Second)
		for lat.count() < int64(sent) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		if got := lat.count(); got < int64(sent) {
			err = fmt.Errorf("%d of %d records visible 10 s after the producer stopped (log %s)", got, sent, sa.p.log.Name())
		}
	}
	stopConsumer()
	wg.Wait()
	if cerr := <-consumerErr; err == nil {
		err = cerr
	}
	if err != nil {
		res.Err = err
		return res
	}
	lat.fill(res, start.Add(time.Second), end)
	r.log.Info("streams paced", "run", name, "threads", threads, "rate", rate, "achieved", res.Achieved,
		"samples", res.Samples, "p50_ms", res.P50, "p99_ms", res.P99)
	return res
}

// consumeTimed reads topic with read_committed from its start and calls fn
// with each record and the time the fetch returned it, until ctx ends.
func consumeTimed(ctx context.Context, brokers []string, topic string, fn func(*kgo.Record, time.Time)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		at := time.Now()
		for _, e := range fs.Errors() {
			return fmt.Errorf("latency consumer: %w", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { fn(r, at) })
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
