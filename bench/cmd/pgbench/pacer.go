package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pacer writes live records, round robin over its slots (input
// partitions), stamped with the time of writing, each value starting with
// "slot:seq:" (appendSeq) so that a reader of the output can tell which
// records of each slot it has: the recovery and lanes steps time every
// record, and check that each arrived exactly once, whatever relays them.
type pacer struct {
	slots []slot
	keyed bool           // a unique key per record ("k-slot-seq"): key routing spreads a slot over the output
	sent  []atomic.Int64 // per slot: records handed to the client so far
}

func newPacer(slots []slot, keyed bool) *pacer {
	return &pacer{slots: slots, keyed: keyed, sent: make([]atomic.Int64, len(slots))}
}

// counts is how many records of each slot were handed to the client.
func (pc *pacer) counts() []int64 {
	out := make([]int64, len(pc.sent))
	for i := range pc.sent {
		out[i] = pc.sent[i].Load()
	}
	return out
}

// run writes size-byte records at rate records/s for d, then flushes. It
// sends its start time on started (when not nil) once it begins writing.
func (pc *pacer) run(ctx context.Context, brokers []string, size int, rate float64, d time.Duration, started chan<- time.Time) (start, end time.Time, n int, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<16),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		if started != nil {
			started <- time.Now()
		}
		return start, end, 0, err
	}
	defer cl.Close()
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
	start = time.Now()
	if started != nil {
		started <- start
	}
	for now := start; now.Sub(start) < d; now = time.Now() {
		due := int(now.Sub(start).Seconds()*rate) - n
		for range due {
			i := n % len(pc.slots)
			sl := pc.slots[i]
			seq := pc.sent[i].Load()
			v := vals.next()
			prefix := appendSeq(make([]byte, 0, 24), i, seq)
			copy(v, prefix) // values are at least 16 bytes (config); a longer prefix grows the value
			if len(prefix) > len(v) {
				v = prefix
			}
			r := &kgo.Record{Topic: sl.topic, Partition: sl.part, Timestamp: time.Now(), Value: v}
			if pc.keyed {
				r.Key = []byte("k-" + string(prefix[:len(prefix)-1]))
			}
			cl.Produce(ctx, r, done)
			pc.sent[i].Add(1)
			n++
		}
		select {
		case <-ctx.Done():
			return start, time.Now(), n, ctx.Err()
		case <-tick.C:
		}
	}
	end = time.Now()
	if err := cl.Flush(ctx); err != nil {
		return start, end, n, err
	}
	mu.Lock()
	defer mu.Unlock()
	return start, end, n, firstErr
}

// seqCheck is what the output held of a pacer's records.
type seqCheck struct {
	Want, Got, Lost, Dups int64
}

// checkSeqs counts, per slot, the records of seq below want[slot] seen
// in data: each once is right; one missing is lost, one twice a duplicate.
func checkSeqs(data []dataEv, want []int64) seqCheck {
	seen := make([][]uint8, len(want))
	var c seqCheck
	for i, w := range want {
		seen[i] = make([]uint8, w)
		c.Want += w
	}
	for _, d := range data {
		if d.slot < 0 || int(d.slot) >= len(want) || d.seq < 0 || d.seq >= want[d.slot] {
			continue
		}
		if seen[d.slot][d.seq] < 255 {
			seen[d.slot][d.seq]++
		}
	}
	for _, s := range seen {
		for _, n := range s {
			switch {
			case n == 0:
				c.Lost++
			case n > 1:
				c.Got++
				c.Dups += int64(n - 1)
			default:
				c.Got++
			}
		}
	}
	return c
}
