package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/dedupe"
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

// runDemo starts an in-process broker (kfake), feeds two forks through the
// phase trap's failure modes, runs the sidecar with its HTTP endpoints, and
// prints each phase as a read_committed consumer sees it.
func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dur := fs.Duration("duration", 8*time.Second, "how long the producers feed the forks")
	addr := fs.String("http", "127.0.0.1:9464", "where to serve the live view (a free port is used if taken)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := demo(*dur, *addr, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}

func demo(feed time.Duration, addr string, stdout, stderr io.Writer) error {
	cluster, err := kafkatest.Kfake(map[string]int32{demoFast: 3, demoSlow: 2, demoOut: demoOutParts, demoOut + ".quarantine": demoOutParts})
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	cfg := proxy.Config{
		InputTopics: []string{demoFast, demoSlow}, OutputTopic: demoOut, QuarantineTopic: demoOut + ".quarantine",
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
	sc, err := kafkatest.StartSidecar(kafkatest.KafkaFor(brokers), cfg, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: (&sidecar{pipe: sc.Pipeline}).routes(sc.Registry), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	fmt.Fprintf(stdout, `in-process Kafka (kfake) on %v; live view: http://%s/
forks: %s (3 partitions, hot key holding 70 %%, partition 2 goes silent at 2s),
       %s (2 partitions, %s behind); a retry storm at 4s; a late record at 5s
output: %s (%d partitions), phases of %s, idle timeout %s

`, brokers, ln.Addr(), demoFast, demoSlow, demoSlowDelay, demoOut, demoOutParts, demoPhase, demoIdle)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	feeder := &demoFeeder{sent: map[string]int{}}
	wg.Go(func() {
		if err := feeder.run(ctx, brokers, feed); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "demo: producer:", err)
		}
	})
	watch := &demoWatch{out: stdout, start: time.Now(), records: map[string]int{}, byCause: map[markers.SealedBy]int{}}
	readCtx, stopRead := context.WithCancel(ctx)
	wg.Go(func() { watch.read(readCtx, brokers) })
	durations := map[uint64]float64{}
	collect := func() {
		for _, s := range sc.Pipeline.Status().Sealed {
			durations[s.Phase] = s.Duration
		}
	}
	feedEnd := time.Now().Add(feed)
	stopAt := feedEnd.Add(demoSlowDelay + 3*demoIdle) // the last phases seal by idleness
	for time.Now().Before(stopAt) {
		collect()
		if time.Now().After(feedEnd) && watch.caughtUp(feeder.published()) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	collect()
	stopRead()
	cancel()
	wg.Wait()
	peak := sc.Pipeline.Status().PeakBufferedBytes
	dups := gather(sc, "phasegate_duplicates_dropped_total")
	quar := gather(sc, "phasegate_quarantined_total")
	if err := sc.Stop(); err != nil {
		return err
	}
	watch.summary(feeder.published(), feeder.retries, dups, quar, peak, p99(durations))
	return nil
}

// demoFeeder writes the forks: every 10 ms a record per live partition.
type demoFeeder struct {
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

func (f *demoFeeder) run(ctx context.Context, brokers []string, feed time.Duration) error {
	prod, err := kafkatest.NewProducer(brokers)
	if err != nil {
		return err
	}
	defer prod.Close()
	start := time.Now()
	end := start.Add(feed)
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
				if p == 2 && now.Sub(start) > 2*time.Second {
					continue // orders/2 goes silent: idle after the idle timeout
				}
				key := "customer-hot"
				if rand.IntN(10) >= 7 {
					key = fmt.Sprint("customer-", rand.IntN(100))
				}
				r := &kgo.Record{Topic: demoFast, Partition: p, Timestamp: now, Key: []byte(key), Value: []byte("order"),
					Headers: []kgo.RecordHeader{{Key: markers.HeaderID, Value: fmt.Appendf(nil, "order-%d-%d", p, n)}}}
				recs = append(recs, r)
				if d := now.Sub(start); d > 4*time.Second && d < 5*time.Second {
					retry := *r // a retry storm: the producer sends every order twice
					recs = append(recs, &retry)
					retries++
				}
			}
			for p := range int32(2) {
				slowQueue = append(slowQueue, &kgo.Record{Topic: demoSlow, Partition: p, Timestamp: now, Value: []byte("payment")})
			}
			if !late && now.Sub(start) > 5*time.Second {
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
		time.Sleep(10 * time.Millisecond)
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

func (w *demoWatch) summary(sent map[string]int, retries int, dups, quar float64, peak int64, p99 float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var causes []string
	for c, n := range w.byCause {
		causes = append(causes, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(causes)
	fmt.Fprintf(w.out, `
summary: %d phases visible to read_committed, sealed_by %v
  records per branch: %s %d of %d sent, %s %d of %d sent
  duplicates dropped: %.0f (the retry storm resent %d)
  quarantined: %.0f (the late payment)
  largest buffer: %d bytes; p99 phase duration: %.2fs
`, w.phases, causes, demoFast, w.records[demoFast], sent[demoFast], demoSlow, w.records[demoSlow], sent[demoSlow],
		dups, retries, quar, peak, p99)
}

// gather sums a counter of the demo sidecar's registry over its labels.
func gather(sc *kafkatest.Sidecar, name string) float64 {
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
