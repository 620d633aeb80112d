package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pacedResult is the latency run at a share of phasegate's peak.
type pacedResult struct {
	Size        int
	Phase       time.Duration
	TargetRate  float64
	Achieved    float64
	Samples     int
	SealP50     float64 // ms, visible (the LSO passed the marker) − marker timestamp (sealing time)
	SealP99     float64
	SealMax     float64
	ReadP50     float64 // ms, the reader's receive time of the marker − marker timestamp
	ReadP99     float64
	EndP50      float64 // ms, visible − end of the phase (event time)
	EndP99      float64
	Err         error
	MarkerCount int
	// Produce → visible of the data records of the timed phases.
	Data *latencyResult
	// From phasegate's histograms over the whole run (warm-up included).
	TxnMeanMs        float64 // phasegate_transaction_duration_seconds: BeginTxn to the end
	SealCommitMeanMs float64 // phasegate_seal_to_commit_seconds
	SealCommitP99Ms  float64 // its p99, rounded up to a bucket bound
}

// markerSeen is one marker as the latency consumer received it.
type markerSeen struct {
	phase    uint64
	part     int32
	offset   int64
	stamp    time.Time // the marker's record timestamp: when phasegate sealed the phase
	received time.Time
}

// paced runs the sidecar on fresh topics while a producer writes live at
// rate records/s for the configured duration, and a read_committed consumer
// times each marker.
func (r *runner) paced(ctx context.Context, name string, size int, phase time.Duration, rate float64) *pacedResult {
	res := &pacedResult{Size: size, Phase: phase, TargetRate: rate}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RunTimeout)
	defer cancel()
	group := fmt.Sprintf("%s-%s", r.tag, name)
	a, b := topicSpec{group + "-a", 3}, topicSpec{group + "-b", 2}
	e := sidecarEnv{Brokers: r.cfg.Brokers, Inputs: []string{a.Name, b.Name}, Output: group + "-out",
		Quarantine: group + "-quarantine", Group: group, PhaseLength: phase, Extra: r.cfg.SidecarEnv}
	if err := createTopics(ctx, r.cfg.Brokers, a, b, topicSpec{e.Output, outputPartitions}, topicSpec{e.Quarantine, 1}); err != nil {
		res.Err = err
		return res
	}
	sc, err := startSidecar(r.cfg.Sidecar, r.cfg.WorkDir, e)
	if err != nil {
		res.Err = err
		return res
	}
	defer func() { _ = sc.p.stop(20 * time.Second) }()
	jctx, jcancel := context.WithTimeout(ctx, time.Minute)
	err = sc.waitJoined(jctx)
	jcancel()
	if err != nil {
		res.Err = err
		return res
	}

	cctx, stopConsumer := context.WithCancel(ctx)
	stable, err := watchStable(cctx, r.cfg.Brokers, e.Output)
	if err != nil {
		stopConsumer()
		res.Err = err
		return res
	}
	var seen []markerSeen
	var mu sync.Mutex
	var wg sync.WaitGroup
	consumerErr := make(chan error, 1)
	data := &latencies{}
	wg.Go(func() {
		consumerErr <- consumeTimed(cctx, r.cfg.Brokers, e.Output, func(rec *kgo.Record, at time.Time) {
			p, ok := markerOf(rec)
			if !ok {
				data.add(rec.Timestamp, at)
				return
			}
			mu.Lock()
			seen = append(seen, markerSeen{phase: p, part: rec.Partition, offset: rec.Offset, stamp: rec.Timestamp, received: at})
			mu.Unlock()
		})
	})
	start, end, sent, err := producePaced(ctx, r.cfg.Brokers, []topicSpec{a, b}, size, rate, r.cfg.PacedFor)
	if err != nil {
		stopConsumer()
		wg.Wait()
		stable.wait()
		res.Err = err
		return res
	}
	res.Achieved = float64(sent) / end.Sub(start).Seconds()
	// Timed phases: from a warm-up second after the start to the last one
	// whose end the partitions' watermarks passed (newest timestamp minus
	// the 200 ms out-of-orderness bound) before the producer stopped; later
	// phases seal only when their partitions turn idle.
	first := uint64(start.Add(time.Second).UnixMilli()/phase.Milliseconds()) + 1
	lastFull := uint64(end.Add(-pacedSealSlack).UnixMilli()/phase.Milliseconds()) - 1
	deadline := time.Now().Add(phase + 10*time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := 0
		for _, m := range seen {
			if m.phase >= lastFull {
				n++
			}
		}
		mu.Unlock()
		if n >= outputPartitions {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if text, err := sc.get(ctx, "/metrics"); err == nil {
		m := parseMetrics(string(text))
		res.TxnMeanMs = 1000 * m["phasegate_transaction_duration_seconds_sum"] / m["phasegate_transaction_duration_seconds_count"]
		res.SealCommitMeanMs = 1000 * m["phasegate_seal_to_commit_seconds_sum"] / m["phasegate_seal_to_commit_seconds_count"]
		res.SealCommitP99Ms = 1000 * bucketQuantile(string(text), "phasegate_seal_to_commit_seconds", 0.99)
	}
	stopConsumer()
	wg.Wait()
	stable.wait()
	if err := <-consumerErr; err != nil {
		res.Err = err
		return res
	}
	var sealMs, readMs, endMs []float64
	mu.Lock()
	for _, m := range seen {
		if m.phase < first || m.phase > lastFull {
			continue
		}
		visible, ok := stable.visibleAt(m.part, m.offset)
		if !ok {
			res.Err = fmt.Errorf("paced: no LSO poll passed the marker of phase %d at %d/%d, which the reader received", m.phase, m.part, m.offset)
			mu.Unlock()
			return res
		}
		sealMs = append(sealMs, ms(visible.Sub(m.stamp)))
		readMs = append(readMs, ms(m.received.Sub(m.stamp)))
		phaseEnd := time.UnixMilli(int64(m.phase+1) * phase.Milliseconds())
		endMs = append(endMs, ms(visible.Sub(phaseEnd)))
	}
	res.MarkerCount = len(seen)
	mu.Unlock()
	res.Samples = len(sealMs)
	if res.Samples == 0 {
		res.Err = fmt.Errorf("paced: no marker of phases %d..%d was received (log %s)", first, lastFull, sc.p.log.Name())
		return res
	}
	res.SealP50, res.SealP99, res.SealMax = percentile(sealMs, 50), percentile(sealMs, 99), percentile(sealMs, 100)
	res.ReadP50, res.ReadP99 = percentile(readMs, 50), percentile(readMs, 99)
	res.Data = &latencyResult{Who: "phasegate, " + phase.String(), Size: size, TargetRate: rate, Achieved: res.Achieved}
	// The data records of the timed phases: stamped from the warm-up's end
	// to the end of the last phase that sealed while the producer ran.
	data.fill(res.Data, start.Add(time.Second), time.UnixMilli(int64(lastFull+1)*phase.Milliseconds()))
	res.EndP50, res.EndP99 = percentile(endMs, 50), percentile(endMs, 99)
	r.log.Info("phasegate paced", "run", name, "rate", rate, "achieved", res.Achieved, "samples", res.Samples,
		"seal_p50_ms", res.SealP50, "seal_p99_ms", res.SealP99, "read_p99_ms", res.ReadP99, "end_p99_ms", res.EndP99)
	return res
}

// pacedSealSlack is the default PHASEGATE_MAX_OUT_OF_ORDERNESS plus the time
// for a record to reach every partition at the lowest paced rates.
const pacedSealSlack = 300 * time.Millisecond

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// producePaced writes records of size bytes, round robin over the
// partitions of topics, stamped with the time of writing, at rate records/s
// for d. It returns when it started and ended and how many it wrote.
func producePaced(ctx context.Context, brokers []string, topics []topicSpec, size int, rate float64, d time.Duration) (time.Time, time.Time, int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<16),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return time.Time{}, time.Time{}, 0, err
	}
	defer cl.Close()
	var slots []slot
	for _, t := range topics {
		for p := range t.Partitions {
			slots = append(slots, slot{topic: t.Name, part: p})
		}
	}
	var mu sync.Mutex
	var firstErr error
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}
	vals := newValues(size)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	sent := 0
	for now := start; now.Sub(start) < d; now = time.Now() {
		due := int(now.Sub(start).Seconds()*rate) - sent
		for range due {
			sl := slots[sent%len(slots)]
			cl.Produce(ctx, &kgo.Record{Topic: sl.topic, Partition: sl.part, Timestamp: time.Now(), Value: vals.next()}, done)
			sent++
		}
		select {
		case <-ctx.Done():
			return start, time.Now(), sent, ctx.Err()
		case <-tick.C:
		}
	}
	end := time.Now()
	if err := cl.Flush(ctx); err != nil {
		return start, end, sent, err
	}
	mu.Lock()
	defer mu.Unlock()
	return start, end, sent, firstErr
}
