package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// Join joins, per phase and per output partition, the records of two
// branches by key. Run is not safe for concurrent use; one Join per group
// member.
type Join struct {
	Left, Right string
	Out         io.Writer
	// Idle, when positive, ends Run after that long without a record.
	Idle time.Duration
	// SessionTimeout is the group session timeout (0: the client's 45 s).
	SessionTimeout time.Duration
	// Phases counts the phases joined; Violations the breaks of the wire
	// format the readers reported.
	Phases, Violations int
	// crash, when set (tests), is asked after each record; true makes Run
	// return at once, committing nothing more, as a killed process would.
	crash func() bool

	mu      sync.Mutex // guards readers: the rebalance callbacks run on the client's goroutine
	readers map[int32]*markers.Reader
}

// Run consumes topic in group until ctx ends (or Idle passes without a
// record). A partition's committed offset only ever moves to the offset
// after a marker, and only once the phase was joined.
func (j *Join) Run(ctx context.Context, brokers []string, topic, group string) error {
	j.readers = map[int32]*markers.Reader{}
	drop := func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
		j.mu.Lock()
		defer j.mu.Unlock()
		for _, p := range parts[topic] {
			delete(j.readers, p) // its half-read phase is read again by the next owner
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // whole phases or nothing
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),    // commit phase boundaries only
		kgo.BlockRebalanceOnPoll(), // no rebalance between a record and its commit
		kgo.OnPartitionsRevoked(drop), kgo.OnPartitionsLost(drop)}
	if j.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(j.SessionTimeout))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer func() {
		cl.AllowRebalance() // Close leaves the group, which waits for a rebalance a poll blocked
		cl.Close()
	}()
	last := time.Now()
	for {
		pctx, cancel := context.WithTimeout(ctx, waitIdle)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fetches.Errors() {
			if fe.Err != context.DeadlineExceeded {
				return fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		n := 0
		crashed := false
		fetches.EachRecord(func(r *kgo.Record) {
			if crashed {
				return
			}
			n++
			if err == nil {
				err = j.feed(ctx, cl, r)
			}
			crashed = j.crash != nil && j.crash()
		})
		cl.AllowRebalance()
		if ctx.Err() != nil {
			return nil // stopped, perhaps in a commit: an uncommitted phase is read again by the next run
		}
		if err != nil || crashed {
			return err
		}
		if n > 0 {
			last = time.Now()
		} else if j.Idle > 0 && time.Since(last) > j.Idle {
			return nil
		}
	}
}

// feed gives one record to its partition's reader; when the record closes
// a phase it joins the phase, then commits the offset after the marker.
func (j *Join) feed(ctx context.Context, cl *kgo.Client, r *kgo.Record) error {
	j.mu.Lock()
	rd := j.readers[r.Partition]
	if rd == nil {
		rd = markers.NewReader(r.Partition)
		j.readers[r.Partition] = rd
	}
	j.mu.Unlock()
	hs := make([]markers.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = markers.Header{Key: []byte(h.Key), Value: h.Value}
	}
	phase, err := rd.Feed(markers.Record{Key: r.Key, Value: r.Value, Headers: hs, Offset: r.Offset})
	for _, v := range markers.Violations(err) {
		j.Violations++
		fmt.Fprintf(j.Out, "VIOLATION partition=%d: %v\n", r.Partition, v)
	}
	if phase == nil {
		return nil
	}
	j.join(r.Partition, phase)
	// Printed, then committed: a crash between the two repeats this one
	// phase after a restart (at least once). A join whose output must be
	// exactly once writes it in a Kafka transaction together with this
	// offset, or keys its output by (phase, partition).
	return cl.CommitRecords(ctx, r) // commits r.Offset+1: the offset after the marker
}

// join pairs each left record with the right records of the same key in
// the same phase, and prints the phase's line.
func (j *Join) join(partition int32, ph *markers.Phase) {
	j.Phases++
	right := map[string]int{}
	sources := map[string]int{}
	var left []markers.Record
	for _, rec := range ph.Records {
		b := branch(rec)
		sources[b]++
		switch b {
		case j.Right:
			right[string(rec.Key)]++
		case j.Left:
			left = append(left, rec)
		}
	}
	pairs, unmatched := 0, 0
	for _, l := range left {
		if right[string(l.Key)] == 0 {
			unmatched++
		}
		pairs += right[string(l.Key)]
	}
	fmt.Fprintf(j.Out, "phase=%d partition=%d records=%d sources=%s marker_count=%d sealed_by=%s joined=%d unmatched=%d\n",
		ph.ID, partition, len(ph.Records), formatSources(sources), ph.Marker.Count, ph.Marker.SealedBy, pairs, unmatched)
}

// formatSources prints counts by topic as topic:n pairs sorted by topic,
// the form every reader of docs/CONSUMING.md prints.
func formatSources(m map[string]int) string {
	var b strings.Builder
	for i, t := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", t, m[t])
	}
	return b.String()
}

// branch is the input topic a data record came from (its phasegate.source).
func branch(rec markers.Record) string {
	for _, h := range rec.Headers {
		if string(h.Key) == markers.HeaderSource {
			topic, _, _, err := markers.ParseSource(h.Value)
			if err == nil {
				return topic
			}
		}
	}
	return ""
}
