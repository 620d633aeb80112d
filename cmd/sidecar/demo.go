package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
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

// The demo's fork topics: orders is fast, payments runs 200 ms behind.
const (
	demoFast, demoSlow = "orders", "payments"
	demoOut            = "aligned"
	demoSlowDelay      = 200 * time.Millisecond
	demoPhase          = 500 * time.Millisecond
)

// runDemo starts an in-process broker (kfake), feeds two forks with one
// branch slower than the other, runs the sidecar, and prints each phase as a
// read_committed consumer sees it.
func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dur := fs.Duration("duration", 8*time.Second, "how long the producers feed the forks")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := demo(*dur, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}

func demo(feed time.Duration, stdout, stderr io.Writer) error {
	cluster, err := kafkatest.Kfake(map[string]int32{demoFast: 3, demoSlow: 2, demoOut: 3, demoOut + ".quarantine": 3})
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fmt.Fprintf(stdout, "in-process Kafka (kfake) on %v\nforks: %s (3 partitions, on time), %s (2 partitions, %s behind); output: %s (3 partitions); phases of %s\n\n",
		brokers, demoFast, demoSlow, demoSlowDelay, demoOut, demoPhase)

	cfg := proxy.Config{
		InputTopics: []string{demoFast, demoSlow}, OutputTopic: demoOut, QuarantineTopic: demoOut + ".quarantine",
		GroupID: "phasegate-demo", TransactionalID: "phasegate-demo-0",
		Watermarks: watermarks.Config{
			PhaseLength: demoPhase, MaxOutOfOrderness: 50 * time.Millisecond, IdleTimeout: time.Second,
			MaxBufferBytes: 64 << 20, SealTimeoutMin: 5 * time.Second, SealTimeoutMax: time.Minute,
			SealPolicy: watermarks.PolicyWait, Now: time.Now,
		},
		Dedupe: dedupe.Config{MaxSealedPhases: 64, MaxIdentities: 1 << 20},
		Tick:   10 * time.Millisecond, LagInterval: 200 * time.Millisecond, QuarantineDelay: 500 * time.Millisecond,
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sc, err := kafkatest.StartSidecar(kafkatest.KafkaFor(brokers), cfg, log)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	sent := map[string]int{}
	var sentMu sync.Mutex
	wg.Go(func() {
		if err := feedDemo(ctx, brokers, feed, sent, &sentMu); err != nil {
			fmt.Fprintln(stderr, "demo: producer:", err)
		}
	})
	watch := &demoWatch{out: stdout, start: time.Now()}
	readCtx, stopRead := context.WithCancel(ctx)
	wg.Go(func() { watch.read(readCtx, brokers) })

	time.Sleep(feed)
	cancel2 := time.Now()
	// Let the forks go idle so the last phases seal (sealed_by idle).
	for time.Since(cancel2) < 4*time.Second && !watch.caughtUp(sent, &sentMu) {
		time.Sleep(100 * time.Millisecond)
	}
	stopRead()
	cancel()
	wg.Wait()
	if err := sc.Stop(); err != nil {
		return err
	}
	watch.summary(sent, &sentMu)
	return nil
}

// feedDemo writes a record to every partition of both forks every 10 ms
// until feed has passed; the slow fork's records carry timestamps 200 ms old.
func feedDemo(ctx context.Context, brokers []string, feed time.Duration, sent map[string]int, mu *sync.Mutex) error {
	prod, err := kafkatest.NewProducer(brokers)
	if err != nil {
		return err
	}
	defer prod.Close()
	end := time.Now().Add(feed)
	var slowQueue []*kgo.Record
	for time.Now().Before(end) && ctx.Err() == nil {
		now := time.Now()
		var recs []*kgo.Record
		for p := range int32(3) {
			recs = append(recs, &kgo.Record{Topic: demoFast, Partition: p, Timestamp: now,
				Key: fmt.Appendf(nil, "customer-%d", rand.IntN(50)), Value: []byte("order")})
		}
		for p := range int32(2) {
			slowQueue = append(slowQueue, &kgo.Record{Topic: demoSlow, Partition: p, Timestamp: now, Value: []byte("payment")})
		}
		// The slow branch delivers what it produced 200 ms ago.
		for len(slowQueue) > 0 && now.Sub(slowQueue[0].Timestamp) >= demoSlowDelay {
			recs = append(recs, slowQueue[0])
			slowQueue = slowQueue[1:]
		}
		if err := prod.Produce(ctx, recs...); err != nil {
			return err
		}
		mu.Lock()
		for _, r := range recs {
			sent[r.Topic]++
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	if len(slowQueue) == 0 || ctx.Err() != nil {
		return nil
	}
	time.Sleep(demoSlowDelay) // the slow branch's last records
	if err := prod.Produce(ctx, slowQueue...); err != nil {
		return err
	}
	mu.Lock()
	sent[demoSlow] += len(slowQueue)
	mu.Unlock()
	return nil
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
	w.records, w.byCause = map[string]int{}, map[markers.SealedBy]int{}
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
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
			if s.parts == 3 {
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
			}
		})
	}
}

func (w *demoWatch) caughtUp(sent map[string]int, mu *sync.Mutex) bool {
	mu.Lock()
	defer mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, n := range sent {
		if w.records[t] < n {
			return false
		}
	}
	return len(sent) > 0
}

func (w *demoWatch) summary(sent map[string]int, mu *sync.Mutex) {
	mu.Lock()
	defer mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.out, "\nsummary: %d phases visible to read_committed;", w.phases)
	topics := []string{demoFast, demoSlow}
	for _, t := range topics {
		fmt.Fprintf(w.out, " %s %d/%d records;", t, w.records[t], sent[t])
	}
	var causes []string
	for c, n := range w.byCause {
		causes = append(causes, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(causes)
	fmt.Fprintf(w.out, " sealed_by %v\n", causes)
}
