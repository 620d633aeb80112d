package main

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// stableWatch polls the last stable offset (LSO) of every partition of a
// topic: the offset below which a read_committed consumer may read. A
// record is visible to read_committed from the first poll whose LSO is
// above its offset. Timing visibility by the LSO rather than by a reader's
// receive time leaves out the reader's own work: once a transaction
// commits, a reader must still fetch everything the transaction wrote
// before it reaches the marker at its end (a 1 s phase of 1 KiB records at
// 54,000 records/s is 55 MB), which is the reader's throughput, not when
// the phase became readable.
type stableWatch struct {
	mu    sync.Mutex
	steps map[int32][]stableStep // per partition, ascending in time and offset
	done  chan struct{}          // closed when the poller has stopped
}

// stableStep is one poll that found a partition's LSO higher than before.
type stableStep struct {
	at  time.Time // when the poll's answer arrived (an upper bound)
	lso int64
}

// stablePollEvery is the LSO poll interval: the resolution of the
// visibility times (each is late by at most this plus one round trip).
const stablePollEvery = 5 * time.Millisecond

// watchStable polls topic's LSOs until ctx ends; wait returns once it has
// stopped.
func watchStable(ctx context.Context, brokers []string, topic string) (*stableWatch, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	w := &stableWatch{steps: map[int32][]stableStep{}, done: make(chan struct{})}
	adm := kadm.NewClient(cl)
	go func() {
		defer close(w.done)
		defer cl.Close()
		tick := time.NewTicker(stablePollEvery)
		defer tick.Stop()
		for {
			lo, err := adm.ListCommittedOffsets(ctx, topic)
			at := time.Now()
			if err == nil {
				lo.Each(func(o kadm.ListedOffset) {
					if o.Err == nil {
						w.observe(o.Partition, o.Offset, at)
					}
				})
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w, nil
}

func (w *stableWatch) wait() { <-w.done }

func (w *stableWatch) observe(part int32, lso int64, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.steps[part]
	if n := len(s); n > 0 && s[n-1].lso >= lso {
		return
	}
	w.steps[part] = append(s, stableStep{at: at, lso: lso})
}

// visibleAt is when the record at offset of part became visible to
// read_committed: the first poll whose LSO was above it. ok is false when
// no poll saw it.
func (w *stableWatch) visibleAt(part int32, offset int64) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.steps[part]
	i := sort.Search(len(s), func(i int) bool { return s[i].lso > offset })
	if i == len(s) {
		return time.Time{}, false
	}
	return s[i].at, true
}
