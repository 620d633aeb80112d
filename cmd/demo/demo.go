package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/internal/inproc"
	"github.com/phasegate/phasegate/internal/kafkatest"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/proxy"
	"github.com/phasegate/phasegate/watermarks"
)

// The demo's forks: orders carries a hot key (70 % of its records) and one
// of its partitions goes silent; payments runs 200 ms behind.
const (
	demoFast, demoSlow = "orders", "payments"
	demoOut            = "aligned"
	demoOutParts       = 3
	demoSlowDelay      = 200 * time.Millisecond
	demoPhase          = 500 * time.Millisecond
	demoIdle           = time.Second
)

// schedule is when the demo's events happen, as fractions of the feed
// duration, so that a short or long run shows all of them (8 s: the
// partition goes silent at 2s, the retry storm runs from 4s to 5s, the
// late payment comes at 5s).
type schedule struct {
	feed, silent, stormFrom, stormTo, late time.Duration
}

func newSchedule(feed time.Duration) schedule {
	return schedule{feed: feed, silent: feed / 4, stormFrom: feed / 2, stormTo: feed/2 + feed/8, late: feed * 5 / 8}
}

// demo starts an in-process broker (kfake), feeds two forks through the
// phase trap's failure modes, runs the pipeline behind the sidecar's HTTP
// endpoints and live view, and prints each phase as a read_committed
// consumer sees it. With hold, the pipeline and the live view stay up after
// the summary until ctx ends.
func demo(ctx context.Context, o options, stdout, stderr io.Writer) error {
	sched := newSchedule(o.duration)
	cluster, err := kafkatest.Kfake(map[string]int32{demoFast: 3, demoSlow: 2, demoOut: demoOutParts, demoOut + ".quarantine": demoOutParts})
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	cfg := proxy.Config{
		InputTopics: []string{demoFast, demoSlow}, OutputTopic: demoOut, QuarantineTopic: demoOut + ".quarantine", WatermarkTopic: demoOut + ".watermarks",
		GroupID: "phasegate-demo", TransactionalID: "phasegate-demo-0",
		Watermarks: watermarks.Config{
			PhaseLength: demoPhase, MaxOutOfOrderness: 50 * time.Millisecond, IdleTimeout: demoIdle,
			MaxBufferBytes: 64 << 20, SealTimeoutMin: 5 * time.Second, SealTimeoutMax: time.Minute,
			SealPolicy: watermarks.PolicyWait, Now: time.Now,
		},
		Dedupe: dedupe.Config{MaxSealedPhases: 64, MaxIdentities: 1 << 20},
		Tick:   10 * time.Millisecond, LagInterval: 200 * time.Millisecond, QuarantineDelay: 500 * time.Millisecond,
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	sc, err := inproc.StartSidecar(inproc.KafkaFor(brokers), cfg, log)
	if err != nil {
		return err
	}
	srv, err := app.Listen(o.addr, app.Options{Registry: sc.Registry}, log)
	if err != nil && !o.addrSet {
		srv, err = app.Listen("127.0.0.1:0", app.Options{Registry: sc.Registry}, log)
	}
	if err != nil {
		_ = sc.Stop()
		return fmt.Errorf("%s: cannot serve the live view there (%v): choose a free port", o.addrFrom, err)
	}
	defer srv.Close()
	srv.Attach(sc.Pipeline)

	fmt.Fprintf(stdout, `in-process Kafka (kfake) on %v; live view: http://%s/
forks: %s (3 partitions, hot key holding 70 %%, partition 2 goes silent at %s),
       %s (2 partitions, %s behind); a retry storm from %s to %s; a late payment at %s
output: %s (%d partitions), phases of %s, idle timeout %s; producers feed for %s%s
(flags: -duration, -http, -hold; see demo -help)

`, brokers, srv.Addr(), demoFast, sched.silent, demoSlow, demoSlowDelay, sched.stormFrom, sched.stormTo, sched.late,
		demoOut, demoOutParts, demoPhase, demoIdle, sched.feed, holdNote(o.hold))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	feeder := &demoFeeder{sent: map[string]int{}, sched: sched}
	wg.Go(func() {
		if err := feeder.run(runCtx, brokers); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "demo: producer:", err)
		}
	})
	watch := &demoWatch{out: stdout, start: time.Now(), records: map[string]int{}, byCause: map[markers.SealedBy]int{}}
	readCtx, stopRead := context.WithCancel(runCtx)
	wg.Go(func() { watch.read(readCtx, brokers) })
	durations := map[uint64]float64{}
	collect := func() {
		for _, s := range sc.Pipeline.Status().Sealed {
			durations[s.Phase] = s.Duration
		}
	}
	feedEnd := time.Now().Add(sched.feed)
	stopAt := feedEnd.Add(demoSlowDelay + 3*demoIdle) // the last phases seal by idleness
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(stopAt) && ctx.Err() == nil {
		collect()
		if time.Now().After(feedEnd) && watch.caughtUp(feeder.published()) {
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	collect()
	stopRead()
	cancel()
	wg.Wait()
	peak := sc.Pipeline.Status().PeakBufferedBytes
	dups := gather(sc, "phasegate_duplicates_dropped_total")
	quar := gather(sc, "phasegate_quarantined_total")
	if ctx.Err() != nil {
		fmt.Fprintln(stdout, "\ninterrupted: the summary covers what was visible so far")
	}
	watch.summary(sched, feeder.published(), feeder.retries, dups, quar, peak, p99(durations))
	if o.hold && ctx.Err() == nil {
		fmt.Fprintf(stdout, "\nholding: the pipeline and the live view stay up at http://%s/ until Ctrl-C\n", srv.Addr())
		<-ctx.Done()
	}
	return sc.Stop()
}

func holdNote(hold bool) string {
	if hold {
		return "; the live view stays up after the summary (-hold)"
	}
	return ""
}

// demoFeeder writes the forks: every 10 ms a record per live partition.
type demoFeeder struct {
	sched   schedule
	mu      sync.Mutex
	sent    map[string]int // distinct records per topic (retries not counted)
	retries int
}

func (f *demoFeeder) published() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.sent))
	for k, v := range f.sent {
		out[k] = v
	}
	return out
}

func (f *demoFeeder) run(ctx context.Context, brokers []string) error {
	prod, err := kafkatest.NewProducer(brokers)
	if err != nil {
		return err
	}
	defer prod.Close()
	start := time.Now()
	end := start.Add(f.sched.feed)
	var slowQueue []*kgo.Record
	late := false
	for n := 0; ctx.Err() == nil; n++ {
		now := time.Now()
		if now.After(end) && len(slowQueue) == 0 {
			return nil
		}
		var recs []*kgo.Record
		retries := 0
		if now.Before(end) {
			for p := range int32(3) {
				if p == 2 && now.Sub(start) > f.sched.silent {
					continue // orders/2 goes silent: idle after the idle timeout
				}
				key := "customer-hot"
				if rand.IntN(10) >= 7 {
					key = fmt.Sprint("customer-", rand.IntN(100))
				}
				r := &kgo.Record{Topic: demoFast, Partition: p, Timestamp: now, Key: []byte(key), Value: []byte("order"),
					Headers: []kgo.RecordHeader{{Key: markers.HeaderID, Value: fmt.Appendf(nil, "order-%d-%d", p, n)}}}
				recs = append(recs, r)
				if d := now.Sub(start); d > f.sched.stormFrom && d < f.sched.stormTo {
					retry := *r // a retry storm: the producer sends every order twice
					recs = append(recs, &retry)
					retries++
				}
			}
			for p := range int32(2) {
				slowQueue = append(slowQueue, &kgo.Record{Topic: demoSlow, Partition: p, Timestamp: now, Value: []byte("payment")})
			}
			if !late && now.Sub(start) > f.sched.late {
				late = true // a payment three seconds late: its phase is sealed
				recs = append(recs, &kgo.Record{Topic: demoSlow, Partition: 0, Timestamp: now.Add(-3 * time.Second), Value: []byte("late payment")})
			}
		}
		// The slow branch delivers what it produced 200 ms ago.
		for len(slowQueue) > 0 && now.Sub(slowQueue[0].Timestamp) >= demoSlowDelay {
			recs = append(recs, slowQueue[0])
			slowQueue = slowQueue[1:]
		}
		if err := prod.Produce(ctx, recs...); err != nil {
			return err
		}
		f.mu.Lock()
		for _, r := range recs {
			f.sent[r.Topic]++
		}
		f.sent[demoFast] -= retries
		f.retries += retries
		f.mu.Unlock()
		select { // every 10 ms a record per live partition
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return ctx.Err()
}

// demoWatch reads the output with read_committed and prints each phase
// once its marker has arrived on every output partition.
type demoWatch struct {
	out     io.Writer
	start   time.Time
	mu      sync.Mutex
	phases  int
	records map[string]int
	byCause map[markers.SealedBy]int
}

func (w *demoWatch) read(ctx context.Context, brokers []string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(demoOut),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		fmt.Fprintln(w.out, "reader:", err)
		return
	}
	defer cl.Close()
	readers := map[int32]*markers.Reader{}
	type seen struct {
		parts   int
		sources map[string]int64
		by      markers.SealedBy
	}
	pending := map[uint64]*seen{}
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			rd := readers[r.Partition]
			if rd == nil {
				rd = markers.NewReader(r.Partition)
				readers[r.Partition] = rd
			}
			hs := make([]markers.Header, len(r.Headers))
			for i, h := range r.Headers {
				hs[i] = markers.Header{Key: []byte(h.Key), Value: h.Value}
			}
			ph, err := rd.Feed(markers.Record{Key: r.Key, Value: r.Value, Headers: hs, Offset: r.Offset})
			if err != nil {
				fmt.Fprintf(w.out, "VIOLATION partition %d: %v\n", r.Partition, err)
			}
			if ph == nil {
				return
			}
			s := pending[ph.ID]
			if s == nil {
				s = &seen{sources: map[string]int64{}, by: ph.Marker.SealedBy}
				pending[ph.ID] = s
			}
			s.parts++
			for t, n := range ph.Marker.Sources {
				s.sources[t] += n
			}
			if s.parts < demoOutParts {
				return
			}
			delete(pending, ph.ID)
			w.mu.Lock()
			w.phases++
			w.byCause[s.by]++
			for t, n := range s.sources {
				w.records[t] += int(n)
			}
			w.mu.Unlock()
			fmt.Fprintf(w.out, "%6.1fs  phase %d visible: %s=%-3d %s=%-3d sealed_by=%s\n",
				time.Since(w.start).Seconds(), ph.ID, demoFast, s.sources[demoFast], demoSlow, s.sources[demoSlow], s.by)
		})
	}
}

// caughtUp reports whether every record sent (but the late one) is visible.
func (w *demoWatch) caughtUp(sent map[string]int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(sent) > 0 && w.records[demoFast] >= sent[demoFast] && w.records[demoSlow] >= sent[demoSlow]-1
}

func (w *demoWatch) summary(sched schedule, sent map[string]int, retries int, dups, quar float64, peak int64, p99 float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var causes []string
	for c, n := range w.byCause {
		causes = append(causes, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(causes)
	fmt.Fprintf(w.out, `
summary of %s of feeding: %d phases visible to read_committed, sealed_by %v
  records per branch: %s %d of %d sent, %s %d of %d sent
  duplicates dropped: %.0f (the retry storm from %s to %s resent %d)
  quarantined: %.0f (the late payment at %s)
  largest buffer: %d bytes; p99 phase duration: %.2fs
`, sched.feed, w.phases, causes, demoFast, w.records[demoFast], sent[demoFast], demoSlow, w.records[demoSlow], sent[demoSlow],
		dups, sched.stormFrom, sched.stormTo, retries, quar, sched.late, peak, p99)
}

// gather sums a counter of the demo sidecar's registry over its labels.
func gather(sc *inproc.Sidecar, name string) float64 {
	mfs, err := sc.Registry.Gather()
	if err != nil {
		return 0
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// p99 of the phase durations, in seconds.
func p99(d map[uint64]float64) float64 {
	if len(d) == 0 {
		return 0
	}
	xs := make([]float64, 0, len(d))
	for _, v := range d {
		xs = append(xs, v)
	}
	sort.Float64s(xs)
	return xs[min(len(xs)-1, len(xs)*99/100)]
}
