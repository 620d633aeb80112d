package main

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/fleet"
)

// reportWatch reads a group's watermark topic (docs/FLEET.md) from its
// start: every task report, with the owner's clock when it wrote it. The
// lanes step times from it when each task's watermark passed a phase,
// which splits a phase's sealing delay into the input's part (the last
// task passing the phase) and the fleet's (that report reaching the other
// instances, and their seal).
type reportWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex // mu guards reps and lat
	reps   []fleet.Report
	lat    []float64 // ms, each report's at_ms → this reader's receive time
}

func watchReports(ctx context.Context, brokers []string, topic string) (*reportWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.AllowAutoTopicCreation()) // the first sidecar creates it; reading it first must not fail
	if err != nil {
		cancel()
		return nil, err
	}
	w := &reportWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cl.Close()
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			at := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				rep, ok, err := fleet.DecodeReport(r.Key, r.Value)
				if err != nil || !ok {
					return
				}
				w.mu.Lock()
				w.reps = append(w.reps, rep)
				w.lat = append(w.lat, ms(at.Sub(time.UnixMilli(rep.AtMs))))
				w.mu.Unlock()
			})
		}
	}()
	return w, nil
}

// latency is the p50 and p99 of report written → read by this reader,
// over the reports written after from (the topic is read from its start).
func (w *reportWatch) latency(from time.Time) (p50, p99 float64, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var xs []float64
	for i, r := range w.reps {
		if !time.UnixMilli(r.AtMs).Before(from) {
			xs = append(xs, w.lat[i])
		}
	}
	return percentile(xs, 50), percentile(xs, 99), len(xs)
}

func (w *reportWatch) stop() {
	w.cancel()
	<-w.done
}

// passedAt is, per phase n in [lo, hi] (a finite window: it loops over
// it), when the last task's report first said it had passed n (low above
// n, or idle) for good, after its last report that held n (an idle
// report of the start, before any input, is followed by ones that hold
// the first phases): the moment the fleet's
// global watermark could pass n, by the reporting owner's clock. A phase
// some task never reported past is left out.
func (w *reportWatch) passedAt(lo, hi uint64) map[uint64]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := map[int32]map[uint64]time.Time{} // task → phase → first report past it
	for _, r := range w.reps {
		m := first[r.Task]
		if m == nil {
			m = map[uint64]time.Time{}
			first[r.Task] = m
		}
		at := time.UnixMilli(r.AtMs)
		top := r.Low // phases below Low are passed
		if r.Idle {
			top = hi + 1 // an idle task holds no phase back
		}
		for n := lo; n <= hi; n++ {
			if _, ok := m[n]; !ok && n < top {
				m[n] = at
			} else if n >= top {
				delete(m, n) // held again: only the last pass counts
			}
		}
	}
	out := map[uint64]time.Time{}
	for n := lo; n <= hi; n++ {
		var last time.Time
		all := len(first) > 0
		for _, m := range first {
			t, ok := m[n]
			if !ok {
				all = false
				break
			}
			last = maxTime(last, t)
		}
		if all {
			out[n] = last
		}
	}
	return out
}
