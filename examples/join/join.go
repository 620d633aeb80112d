package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/phasegate/phasegate/markers"
)

// Join joins, per phase and per output partition, the records of two
// branches by key. Run is not safe for concurrent use; one Join per group
// member.
type Join struct {
	Left, Right string
	Out         io.Writer
	// Idle, when positive, ends Run after that long without a record
	// (counted from the last assignment too, so a slow group join does
	// not end it).
	Idle time.Duration
	// SessionTimeout is the group session timeout (0: the client's 45 s).
	SessionTimeout time.Duration
	// Phases counts the phases joined; Skipped the phases a reader that
	// started without checkpoint metadata could not prove whole (MARKERS.md
	// rule C4); Violations the breaks of the wire format the readers
	// reported.
	Phases, Skipped, Violations int
	// crash, when set (tests), is asked after each record; true makes Run
	// return at once, committing nothing more, as a killed process would.
	crash func() bool

	mu       sync.Mutex // guards readers, starts and assigned: the group callbacks run on the client's goroutines
	readers  map[int32]*markers.Reader
	starts   map[int32]markers.Checkpoint // where each assigned partition's reader starts
	assigned time.Time                    // the last offset fetch of an assignment: Idle counts from it too
}

// ErrNewerVersion is returned by Run at a marker of a wire format version
// newer than this join knows: it stops there rather than guess at
// completeness (MARKERS.md section 3.3).
var ErrNewerVersion = markers.ErrNewerVersion

// Run consumes topic in group until ctx ends (or Idle passes without a
// record). Each assigned partition gets a markers.Reader that starts from
// the group's committed offset and its metadata (MARKERS.md section 6);
// after the phases a record completed were joined and printed, the
// reader's checkpoint is committed, and nothing while it has none. It
// returns an error wrapping ErrNewerVersion at a marker of a newer
// version.
func (j *Join) Run(ctx context.Context, brokers []string, topic, group string) error {
	j.readers = map[int32]*markers.Reader{}
	j.starts = map[int32]markers.Checkpoint{}
	drop := func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
		j.mu.Lock()
		defer j.mu.Unlock()
		for _, p := range parts[topic] {
			delete(j.readers, p) // what it keeps, the next owner reads whole from the last checkpoint
			delete(j.starts, p)
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // whole phases or nothing
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),    // commit checkpoints only
		kgo.BlockRebalanceOnPoll(), // no rebalance between a record and its commit
		kgo.OnOffsetsFetched(func(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
			return j.fetched(ctx, cl, topic, resp)
		}),
		kgo.AdjustFetchOffsetsFn(func(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			j.mu.Lock()
			defer j.mu.Unlock()
			for p := range offsets[topic] {
				if st, ok := j.starts[p]; ok { // consume from exactly where the reader starts
					offsets[topic][p] = kgo.NewOffset().At(st.Offset)
				}
			}
			return offsets, nil
		}),
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
			var gs *kgo.ErrGroupSession
			switch {
			case fe.Err == context.DeadlineExceeded:
			case errors.As(fe.Err, &gs):
				// The group session failed (NOT_COORDINATOR, a rebalance):
				// kgo rejoins by itself, and the revoke callbacks dropped
				// the readers of what it lost.
				fmt.Fprintf(os.Stderr, "join: %v; rejoining\n", fe.Err)
			default:
				return fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		n := 0
		crashed := false
		fetches.EachRecord(func(r *kgo.Record) {
			if crashed || err != nil {
				return
			}
			n++
			err = j.feed(ctx, cl, r)
			crashed = j.crash != nil && j.crash()
		})
		cl.AllowRebalance()
		if ctx.Err() != nil {
			return nil // stopped, perhaps in a commit: an uncommitted phase is read again by the next run
		}
		if err != nil || crashed {
			return err
		}
		j.mu.Lock()
		if j.assigned.After(last) {
			last = j.assigned
		}
		j.mu.Unlock()
		if n > 0 {
			last = time.Now()
		} else if j.Idle > 0 && time.Since(last) > j.Idle {
			j.end()
			return nil
		}
	}
}

// end ends every partition's reader at an idle exit, the end of the input
// as far as this run goes (markers.Reader.End): a reader that started
// without a checkpoint reports the phases it could never prove as
// skipped (MARKERS.md rule C4), and what no writer completed is reported
// as a violation. Nothing is committed.
func (j *Join) end() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(j.readers)) {
		rd := j.readers[p]
		for _, v := range markers.Violations(rd.End()) {
			j.Violations++
			fmt.Fprintf(j.Out, "VIOLATION partition=%d: %v\n", p, v)
		}
		for _, s := range rd.Skipped() {
			j.Skipped++
			fmt.Fprintf(j.Out, "skipped phase=%d partition=%d records=%d\n", s.Phase, p, s.Records)
		}
	}
}

// fetched starts a reader for each partition of the group's offset fetch
// (kgo.OnOffsetsFetched): from the committed offset and its metadata; with
// no commit, or one below the log's start (deleted by retention), from the
// log's start without metadata, where the reader proves each phase
// (MARKERS.md rule C4).
func (j *Join) fetched(ctx context.Context, cl *kgo.Client, topic string, resp *kmsg.OffsetFetchResponse) error {
	type commit struct {
		offset   int64
		metadata string
	}
	commits := map[int32]commit{}
	var topics []kmsg.OffsetFetchResponseGroupTopic
	for _, g := range resp.Groups {
		topics = append(topics, g.Topics...)
	}
	for _, t := range topics {
		if t.Topic != topic && t.Topic != "" { // "": a response by topic ID; the join reads one topic
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				continue // kgo reports the partition's error as a fetch error and does not assign it
			}
			c := commit{offset: p.Offset}
			if p.Metadata != nil {
				c.metadata = *p.Metadata // one trailing NUL (confluent-kafka's) is the reader's to drop: MARKERS.md C2
			}
			commits[p.Partition] = c
		}
	}
	for _, t := range resp.Topics { // versions before 8 answer per topic
		if t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			c := commit{offset: p.Offset}
			if p.Metadata != nil {
				c.metadata = *p.Metadata
			}
			commits[p.Partition] = c
		}
	}
	if len(commits) == 0 {
		return nil
	}
	low, err := kadm.NewClient(cl).ListStartOffsets(ctx, topic)
	if err == nil {
		err = low.Error()
	}
	if err != nil {
		return fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.assigned = time.Now()
	for p, c := range commits {
		lo, ok := low.Lookup(topic, p)
		if !ok {
			return fmt.Errorf("start offset of %s/%d: not listed", topic, p)
		}
		st := markers.Checkpoint{Offset: c.offset, Metadata: c.metadata}
		if c.offset < 0 || c.offset < lo.Offset { // no commit, or its records were deleted
			st = markers.Checkpoint{Offset: lo.Offset}
		}
		j.starts[p] = st
		j.readers[p] = markers.NewReaderAt(p, st)
	}
	return nil
}

// feed gives one record to its partition's reader; it joins and prints
// each phase the record completed and each phase it skipped, then commits
// the reader's checkpoint.
func (j *Join) feed(ctx context.Context, cl *kgo.Client, r *kgo.Record) error {
	j.mu.Lock()
	rd := j.readers[r.Partition]
	j.mu.Unlock()
	if rd == nil {
		return nil // not ours (any more): its owner reads it from the last checkpoint
	}
	hs := make([]markers.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = markers.Header{Key: []byte(h.Key), Value: h.Value}
	}
	phase, err := rd.Feed(markers.Record{Key: r.Key, Value: r.Value, Headers: hs, Offset: r.Offset})
	if errors.Is(err, markers.ErrNewerVersion) {
		return fmt.Errorf("partition %d offset %d: %w", r.Partition, r.Offset, err)
	}
	for _, v := range markers.Violations(err) {
		j.Violations++
		fmt.Fprintf(j.Out, "VIOLATION partition=%d: %v\n", r.Partition, v)
	}
	handed := false
	for ; phase != nil; phase = rd.Next() {
		j.join(r.Partition, phase)
		handed = true
	}
	for _, s := range rd.Skipped() {
		j.Skipped++
		fmt.Fprintf(j.Out, "skipped phase=%d partition=%d records=%d\n", s.Phase, r.Partition, s.Records)
		handed = true
	}
	if !handed {
		return nil
	}
	// Printed, then committed: a crash between the two repeats the phases
	// since the last commit after a restart (at least once, rule C6). A
	// join whose output must be exactly once writes it in a Kafka
	// transaction together with this checkpoint, or keys its output by
	// (phase, partition).
	ck, ok := rd.Checkpoint()
	if !ok {
		return nil // rule C5: nothing proven yet
	}
	return commit(ctx, cl, r.Topic, r.Partition, ck)
}

// commit commits a checkpoint: its offset and, in the same OffsetCommit,
// its metadata (kgo.PreCommitFnContext).
func commit(ctx context.Context, cl *kgo.Client, topic string, partition int32, ck markers.Checkpoint) error {
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for k := range req.Topics[i].Partitions {
				if req.Topics[i].Partitions[k].Partition == partition {
					req.Topics[i].Partitions[k].Metadata = &ck.Metadata
				}
			}
		}
		return nil
	})
	var cerr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {partition: {Epoch: -1, Offset: ck.Offset}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
						cerr = fmt.Errorf("commit %s/%d: %w", topic, p.Partition, err)
					}
				}
			}
		})
	return cerr
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
