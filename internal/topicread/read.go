// Package topicread reads partitions of one topic with read_committed
// between fixed offsets, with Fetch requests of its own rather than
// sarama's Consumer: only the raw batches say where a partition's
// position is after control records and aborted batches, which
// read_committed never hands out, so only they tell when a range is read
// to its end. sidecar verify reads whole topics with it, and the sidecar
// reads the output's last markers at start-up.
//
// A Reader is not safe for concurrent use. Records handed to the callback
// keep sarama's slices: copy what outlives the call's batch if needed.
package topicread

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/markers"
)

// Reader reads ranges of partitions of one topic (Add), a Fetch per
// leader at a time (Fetch).
type Reader struct {
	client   sarama.Client
	topic    string
	version  int16
	parts    []*Part
	failures int // fetches failed in a row
}

// Part is one partition's range and position.
type Part struct {
	P          int32
	Pos, End   int64 // next offset to read; End is exclusive
	Done       bool
	fetchBytes int32
}

const (
	fetchMaxBytes       = 1 << 20   // per Fetch response: what memory holds decoded at once
	partitionFetchBytes = 256 << 10 // per partition, doubled while a batch does not fit
	partitionFetchMax   = 64 << 20
	fetchMaxWait        = 500 * time.Millisecond
)

// New returns a Reader of topic over client.
func New(client sarama.Client, topic string) *Reader {
	v := client.Config().Version
	var version int16
	switch { // the versions sarama's own consumer picks
	case v.IsAtLeast(sarama.V2_7_0_0):
		version = 12
	default:
		version = 11 // KAFKA_VERSION is at least 2.5 (kafkaVersion)
	}
	return &Reader{client: client, topic: topic, version: version}
}

// Add reads partition p from start to end (exclusive).
func (t *Reader) Add(p int32, start, end int64) *Part {
	pp := &Part{P: p, Pos: start, End: end, fetchBytes: partitionFetchBytes, Done: start >= end}
	t.parts = append(t.parts, pp)
	return pp
}

// Parts returns the ranges added, in order.
func (t *Reader) Parts() []*Part { return t.parts }

// Pending is the number of offsets left to read.
func (t *Reader) Pending() (n int64) {
	for _, pp := range t.parts {
		if !pp.Done {
			n += pp.End - pp.Pos
		}
	}
	return n
}

// Finished reports whether every range is read.
func (t *Reader) Finished() bool {
	for _, pp := range t.parts {
		if !pp.Done {
			return false
		}
	}
	return true
}

// Fetch sends one Fetch per leader for the partitions neither done nor
// paused (paused may be nil), and hands each visible record to fn, in
// offset order per partition. It retries leadership and transport errors
// (refreshing the metadata) up to a bound, and returns other errors.
func (t *Reader) Fetch(ctx context.Context, paused func(int32) bool, fn func(Record)) error {
	byLeader := map[*sarama.Broker][]*Part{}
	for _, pp := range t.parts {
		if pp.Done || paused != nil && paused(pp.P) {
			continue
		}
		b, err := t.client.Leader(t.topic, pp.P)
		if err != nil {
			return t.retry(ctx, fmt.Errorf("leader of %s/%d: %w", t.topic, pp.P, err), true)
		}
		byLeader[b] = append(byLeader[b], pp)
	}
	for b, pps := range byLeader {
		req := &sarama.FetchRequest{Version: t.version, MaxWaitTime: int32(fetchMaxWait / time.Millisecond), MinBytes: 1,
			MaxBytes: fetchMaxBytes, Isolation: sarama.ReadCommitted, SessionID: 0, SessionEpoch: -1}
		for _, pp := range pps {
			req.AddBlock(t.topic, pp.P, pp.Pos, pp.fetchBytes, -1)
		}
		resp, err := b.Fetch(req)
		if err != nil {
			_ = b.Close()
			return t.retry(ctx, fmt.Errorf("fetch from broker %s: %w", b.Addr(), err), true)
		}
		for _, pp := range pps {
			blk := resp.GetBlock(t.topic, pp.P)
			if blk == nil {
				return t.retry(ctx, fmt.Errorf("fetch %s/%d: %w", t.topic, pp.P, sarama.ErrIncompleteResponse), true)
			}
			if err := t.take(pp, blk, fn); err != nil {
				if errors.Is(err, sarama.ErrOffsetOutOfRange) {
					return fmt.Errorf("%s/%d: offset %d is no longer in the log (deleted by retention while being read?)", t.topic, pp.P, pp.Pos)
				}
				return t.retry(ctx, fmt.Errorf("fetch %s/%d: %w", t.topic, pp.P, err), false)
			}
		}
	}
	t.failures = 0
	return nil
}

// maxFailures bounds the failed fetches in a row (about 200 ms apart)
// before the read gives up.
const maxFailures = 100

// retry refreshes the metadata after a leader change or a lost broker and
// waits a moment; it returns err when err cannot pass (transport is false
// and err is not a leadership error) or after maxFailures in a row.
func (t *Reader) retry(ctx context.Context, err error, transport bool) error {
	t.failures++
	if t.failures > maxFailures {
		return fmt.Errorf("%w (%d attempts in a row failed)", err, t.failures)
	}
	if !transport && !errors.Is(err, sarama.ErrNotLeaderForPartition) && !errors.Is(err, sarama.ErrLeaderNotAvailable) &&
		!errors.Is(err, sarama.ErrFencedLeaderEpoch) && !errors.Is(err, sarama.ErrUnknownLeaderEpoch) &&
		!errors.Is(err, sarama.ErrOffsetNotAvailable) && !errors.Is(err, sarama.ErrRequestTimedOut) {
		return err
	}
	_ = t.client.RefreshMetadata(t.topic)
	select {
	case <-ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
	return nil
}

// take hands out the visible records of one partition's block and moves
// its position past every batch, control and aborted ones included.
func (t *Reader) take(pp *Part, blk *sarama.FetchResponseBlock, fn func(Record)) error {
	if !errors.Is(blk.Err, sarama.ErrNoError) {
		return blk.Err
	}
	aborted := slices.Clone(blk.AbortedTransactions)
	slices.SortFunc(aborted, func(a, b *sarama.AbortedTransaction) int { return int(a.FirstOffset - b.FirstOffset) })
	abortedPIDs := map[int64]bool{}
	progressed := false
	for _, rs := range blk.RecordsSet {
		b := rs.RecordBatch
		if b == nil {
			return errors.New("message format before v2 (Kafka 0.11) is not supported")
		}
		if b.PartialTrailingRecord {
			break
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= b.LastOffset() {
			abortedPIDs[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		next := b.LastOffset() + 1
		switch {
		case b.Control:
			// A control record's key is version (int16) then type (int16): 0 abort, 1 commit.
			if len(b.Records) > 0 && len(b.Records[0].Key) >= 4 && b.Records[0].Key[2] == 0 && b.Records[0].Key[3] == 0 {
				delete(abortedPIDs, b.ProducerID)
			}
		case b.IsTransactional && abortedPIDs[b.ProducerID]:
		default:
			for _, r := range b.Records {
				off := b.FirstOffset + r.OffsetDelta
				if off < pp.Pos {
					continue
				}
				if off >= pp.End {
					break
				}
				fn(toRecord(pp.P, off, b, r))
			}
		}
		if next > pp.Pos {
			pp.Pos, progressed = next, true
		}
		if pp.Pos >= pp.End {
			pp.Pos, pp.Done = pp.End, true
			return nil
		}
	}
	if !progressed && len(blk.RecordsSet) > 0 && pp.fetchBytes < partitionFetchMax {
		pp.fetchBytes *= 2 // a batch larger than what was asked for
	}
	return nil
}

// Record is one record read: its partition and timestamp, and the record
// as markers reads it (a nil Key is a null key).
type Record struct {
	Partition int32
	Timestamp time.Time
	markers.Record
}

// toRecord converts a sarama record; the slices stay sarama's.
func toRecord(p int32, off int64, b *sarama.RecordBatch, r *sarama.Record) Record {
	ts := b.FirstTimestamp.Add(r.TimestampDelta)
	if b.LogAppendTime {
		ts = b.MaxTimestamp
	}
	hs := make([]markers.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = markers.Header{Key: h.Key, Value: h.Value}
	}
	return Record{Partition: p, Timestamp: ts, Record: markers.Record{Key: r.Key, Value: r.Value, Headers: hs, Offset: off}}
}

// OffsetAt lists partition p's offset for a timestamp in ms, or for
// sarama.OffsetNewest / OffsetOldest, as a read_committed consumer sees it:
// OffsetNewest is then the last stable offset.
func OffsetAt(client sarama.Client, topic string, p int32, ts int64) (int64, error) {
	b, err := client.Leader(topic, p)
	if err != nil {
		return 0, err
	}
	req := sarama.NewOffsetRequest(client.Config().Version)
	req.IsolationLevel = sarama.ReadCommitted
	req.AddBlock(topic, p, ts, 1)
	resp, err := b.GetAvailableOffsets(req)
	if err != nil {
		return 0, err
	}
	blk := resp.GetBlock(topic, p)
	switch {
	case blk == nil:
		return 0, sarama.ErrIncompleteResponse
	case !errors.Is(blk.Err, sarama.ErrNoError):
		return 0, blk.Err
	case len(blk.Offsets) == 1:
		return blk.Offsets[0], nil
	}
	return blk.Offset, nil
}

// Offsets is OffsetAt for many partitions at once: one ListOffsets request
// per leader.
func Offsets(client sarama.Client, topic string, parts []int32, ts int64) (map[int32]int64, error) {
	byLeader := map[*sarama.Broker][]int32{}
	for _, p := range parts {
		b, err := client.Leader(topic, p)
		if err != nil {
			return nil, fmt.Errorf("leader of %s/%d: %w", topic, p, err)
		}
		byLeader[b] = append(byLeader[b], p)
	}
	out := make(map[int32]int64, len(parts))
	for b, ps := range byLeader {
		req := sarama.NewOffsetRequest(client.Config().Version)
		req.IsolationLevel = sarama.ReadCommitted
		for _, p := range ps {
			req.AddBlock(topic, p, ts, 1)
		}
		resp, err := b.GetAvailableOffsets(req)
		if err != nil {
			return nil, fmt.Errorf("list offsets of %s on broker %s: %w", topic, b.Addr(), err)
		}
		for _, p := range ps {
			blk := resp.GetBlock(topic, p)
			switch {
			case blk == nil:
				return nil, fmt.Errorf("list offsets of %s/%d: %w", topic, p, sarama.ErrIncompleteResponse)
			case !errors.Is(blk.Err, sarama.ErrNoError):
				return nil, fmt.Errorf("list offsets of %s/%d: %w", topic, p, blk.Err)
			case len(blk.Offsets) == 1:
				out[p] = blk.Offsets[0]
			default:
				out[p] = blk.Offset
			}
		}
	}
	return out, nil
}
