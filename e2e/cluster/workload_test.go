//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// producer writes keyed records live (event time = wall time) to the fork
// topics at a steady rate, with franz-go's idempotent producer (acks=all):
// while a partition's leader is away its records wait in the client and
// arrive in order afterwards, as an application's would.
type producer struct {
	cl      *kgo.Client
	topics  []string
	perSec  int
	sent    atomic.Int64 // acknowledged
	failed  atomic.Int64
	stop    context.CancelFunc
	done    chan struct{}
	firstMu sync.Mutex
	first   error
}

func startProducer(ctx context.Context, addrs, topics []string, perSec int) (*producer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	p := &producer{cl: cl, topics: topics, perSec: perSec, stop: cancel, done: make(chan struct{})}
	go p.run(pctx)
	return p, nil
}

func (p *producer) run(ctx context.Context) {
	defer close(p.done)
	rng := rand.New(rand.NewPCG(1, 2))
	const tick = 20 * time.Millisecond
	per := max(1, p.perSec*int(tick)/int(time.Second))
	t := time.NewTicker(tick)
	defer t.Stop()
	seq := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range per {
			seq++
			r := &kgo.Record{
				Topic: p.topics[seq%len(p.topics)],
				Key:   fmt.Appendf(nil, "customer-%d", rng.IntN(1000)),
				Value: fmt.Appendf(nil, "seq=%d", seq),
			}
			p.cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				if err != nil {
					p.failed.Add(1)
					p.firstMu.Lock()
					if p.first == nil {
						p.first = err
					}
					p.firstMu.Unlock()
					return
				}
				p.sent.Add(1)
			})
		}
	}
}

// finish stops producing and waits until every record is acknowledged.
func (p *producer) finish(ctx context.Context) error {
	p.stop()
	<-p.done
	err := p.cl.Flush(ctx)
	p.cl.Close()
	if err != nil {
		return err
	}
	p.firstMu.Lock()
	defer p.firstMu.Unlock()
	if p.first != nil {
		return fmt.Errorf("%d records not produced, the first: %w", p.failed.Load(), p.first)
	}
	return nil
}

// lane is one writer's markers on one output partition: a partition with
// one writer has one lane, with key routing over T tasks it has T.
type lane struct {
	partition, task int32
}

// seen is one output marker as read_committed saw it.
type seen struct {
	at    time.Time
	lane  lane
	phase uint64
}

// observer follows the output with read_committed and records when each
// marker became visible: the availability measure is what a join sees.
type observer struct {
	mu      sync.Mutex // guards markers and last
	markers []seen
	last    map[lane]uint64 // highest phase per lane
	stop    context.CancelFunc
	done    chan struct{}
}

func startObserver(ctx context.Context, addrs []string, topic string) (*observer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithCancel(ctx)
	o := &observer{last: map[lane]uint64{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		defer cl.Close()
		for octx.Err() == nil {
			fs := cl.PollFetches(octx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				if !isMarker(r) {
					return
				}
				m, err := markers.DecodeOutputMarker(r.Value)
				if err != nil {
					return // verify reports malformed markers
				}
				l := lane{r.Partition, m.Task}
				o.mu.Lock()
				o.markers = append(o.markers, seen{at: now, lane: l, phase: m.Phase})
				o.last[l] = max(o.last[l], m.Phase)
				o.mu.Unlock()
			})
		}
	}()
	return o, nil
}

func isMarker(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == markers.HeaderMarker {
			return true
		}
	}
	return false
}

func (o *observer) close() {
	o.stop()
	<-o.done
}

// snapshot is the observer's state at a fault.
type snapshot struct {
	at    time.Time
	top   uint64          // highest phase any lane had marked
	lanes map[lane]uint64 // each lane's highest phase
}

func (o *observer) snapshot() snapshot {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := snapshot{at: time.Now(), lanes: map[lane]uint64{}}
	for l, p := range o.last {
		s.lanes[l] = p
		s.top = max(s.top, p)
	}
	return s
}

// recovery is how long after s the output moved on: first is the first
// marker of a phase above every phase marked before s; next is when every
// lane had marked a phase above that top, the fleet's next committed phase
// as a join sees it (-1: not yet).
func (o *observer) recovery(s snapshot) (first, next time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	first, next = -1, -1
	pending := map[lane]bool{}
	for l := range s.lanes {
		pending[l] = true
	}
	for _, m := range o.markers {
		if !m.at.After(s.at) || m.phase <= s.top {
			continue
		}
		if first < 0 {
			first = m.at.Sub(s.at)
		}
		if pending[m.lane] {
			delete(pending, m.lane)
			if len(pending) == 0 {
				next = m.at.Sub(s.at)
			}
		}
	}
	return first, next
}

// longestGap is the longest time between two consecutive new phases of the
// whole output (the fleet's longest stall) after from.
func (o *observer) longestGap(from time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var gap time.Duration
	prev := from
	var top uint64
	for _, m := range o.markers {
		if m.phase <= top {
			continue
		}
		top = m.phase
		if m.at.After(from) {
			gap = max(gap, m.at.Sub(prev))
			prev = m.at
		}
	}
	return gap
}
