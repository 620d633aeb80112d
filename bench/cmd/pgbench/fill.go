package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicSpec is a topic and its partition count.
type topicSpec struct {
	Name       string
	Partitions int32
}

// createTopics creates topics with replication factor 1.
func createTopics(ctx context.Context, brokers []string, topics ...topicSpec) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	names := make([]string, len(topics))
	for i, t := range topics {
		if _, err := adm.CreateTopic(ctx, t.Partitions, 1, nil, t.Name); err != nil {
			return fmt.Errorf("create topic %s: %w", t.Name, err)
		}
		names[i] = t.Name
	}
	// Wait until metadata shows every partition with a leader: a produce
	// right after CreateTopics can still meet UNKNOWN_TOPIC_OR_PARTITION.
	for {
		td, err := adm.ListTopics(ctx, names...)
		if err == nil && topicsReady(td, topics) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %v have no leader yet: %w", names, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func topicsReady(td kadm.TopicDetails, topics []topicSpec) bool {
	for _, t := range topics {
		d, ok := td[t.Name]
		if !ok || d.Err != nil || int32(len(d.Partitions)) != t.Partitions {
			return false
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// inputSpec describes a pre-filled input.
type inputSpec struct {
	Topics  []topicSpec
	Records int
	Size    int
	Rate    float64   // records per second of event time, all partitions together
	Start   time.Time // event time of record 0
	// HotKey is the share of Topics[0]'s records that carry the key "hot";
	// they all go to its partition 0. The others carry unique keys and go
	// round robin. 0: no keys.
	HotKey float64
	// Behind shifts the timestamps of every topic but the first back by this
	// much: those branches run behind at the same log position.
	Behind time.Duration
	// Trailer is how far after the last record, in event time, each
	// partition's trailer record is stamped.
	Trailer time.Duration
	// Keys > 0: every record carries one of Keys keys, drawn at random, and
	// goes to the partition of its topic that Kafka's Java producer would
	// pick (murmur2), so some partitions may get none; only partitions that
	// got a record get a trailer, so empty ones stay empty (and turn idle).
	// Topics still take records in turn by their partition counts.
	Keys int
}

// slot is one (topic, partition) of an input.
type slot struct {
	topic string
	part  int32
	first bool // belongs to Topics[0]
}

func (s inputSpec) slots() []slot {
	var out []slot
	for i, t := range s.Topics {
		for p := range t.Partitions {
			out = append(out, slot{topic: t.Name, part: p, first: i == 0})
		}
	}
	return out
}

// eventTime is the timestamp of record i on a topic (first or not).
func (s inputSpec) eventTime(i int, first bool) time.Time {
	t := s.Start.Add(time.Duration(float64(i) / s.Rate * float64(time.Second)))
	if !first {
		t = t.Add(-s.Behind)
	}
	return t
}

// fillResult is what writing an input took.
type fillResult struct {
	Records int
	Seconds float64
	LastMs  int64 // the newest event time of a counted record
}

// fill writes spec's records non-transactionally (idempotent, acks=all)
// with the timestamps spec gives, then one trailer record per partition.
func fill(ctx context.Context, brokers []string, spec inputSpec) (*fillResult, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(1<<16),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // as ProducerPerformance's default
	)
	if err != nil {
		return nil, err
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
	slots := spec.slots()
	var firstParts int32
	if len(spec.Topics) > 0 {
		firstParts = spec.Topics[0].Partitions
	}
	vals := newValues(spec.Size)
	rng := rand.New(rand.NewPCG(1, 2)) // the same skew on every run
	var rr int32
	start := time.Now()
	var last int64
	hash := kgo.StickyKeyPartitioner(nil) // Kafka's murmur2 for keyed records
	parts := map[string]int{}
	for _, t := range spec.Topics {
		parts[t.Name] = int(t.Partitions)
	}
	used := map[slot]bool{}
	for i := range spec.Records {
		sl := slots[i%len(slots)]
		r := &kgo.Record{Topic: sl.topic, Partition: sl.part, Timestamp: spec.eventTime(i, sl.first)}
		r.Value = vals.next()
		if spec.Keys > 0 {
			r.Key = []byte("key-" + strconv.Itoa(rng.IntN(spec.Keys)))
			r.Partition = int32(hash.ForTopic(sl.topic).Partition(r, parts[sl.topic]))
			used[slot{topic: sl.topic, part: r.Partition, first: sl.first}] = true
		}
		if sl.first && spec.HotKey > 0 {
			if rng.Float64() < spec.HotKey {
				r.Key, r.Partition = []byte("hot"), 0
			} else {
				r.Key, r.Partition = []byte("k-"+strconv.Itoa(i)), rr%firstParts
				rr++
			}
		}
		last = max(last, r.Timestamp.UnixMilli())
		cl.Produce(ctx, r, done)
		if i%65536 == 0 {
			mu.Lock()
			err := firstErr
			mu.Unlock()
			if err != nil {
				return nil, fmt.Errorf("fill: %w", err)
			}
		}
	}
	for _, sl := range slots {
		if spec.Keys > 0 && !used[sl] {
			continue
		}
		ts := time.UnixMilli(last).Add(spec.Trailer)
		cl.Produce(ctx, &kgo.Record{Topic: sl.topic, Partition: sl.part, Timestamp: ts, Value: []byte(trailerValue)}, done)
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return nil, fmt.Errorf("fill: %w", firstErr)
	}
	return &fillResult{Records: spec.Records, Seconds: time.Since(start).Seconds(), LastMs: last}, nil
}

// trailerValue is the value of the trailer records.
const trailerValue = "pgbench trailer"

// values makes record values: size random letters each, copied from a
// 4 MiB pool at pseudo-random offsets, so that batches do not compress much
// better than real payloads would. Letters, because Kafka's copier (String
// serde) must copy them unchanged.
type values struct {
	pool []byte
	size int
	rng  *rand.Rand
}

func newValues(size int) *values {
	rng := rand.New(rand.NewPCG(3, 4))
	pool := make([]byte, 4<<20+size)
	for i := range pool {
		pool[i] = byte('a' + rng.IntN(26))
	}
	return &values{pool: pool, size: size, rng: rng}
}

func (v *values) next() []byte {
	off := v.rng.IntN(len(v.pool) - v.size)
	return append(make([]byte, 0, v.size), v.pool[off:off+v.size]...)
}

// warmBroker makes a fresh broker create its internal topics
// (__consumer_offsets, __transaction_state) before anything is timed: the
// first FindCoordinator of a group or a transactional ID triggers their
// creation, which takes seconds and would otherwise land on whichever step
// runs first.
func warmBroker(ctx context.Context, brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		gerr := adm.FindGroupCoordinators(ctx, "pgbench-warm").Error()
		terr := adm.FindTxnCoordinators(ctx, "pgbench-warm").Error()
		if gerr == nil && terr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("internal topics not ready: group %v, transactions %v: %w", gerr, terr, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
