package verifycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/internal/config"
	"github.com/phasegate/phasegate/internal/topicread"
	"github.com/phasegate/phasegate/internal/verify"
)

// verifier is one run of `sidecar verify`.
type verifier struct {
	o       verifyOpts
	client  sarama.Client
	out     *printer
	stderr  io.Writer
	reader  *topicread.Reader
	checker *verify.Checker
	cut     map[int32]bool
	checked map[uint64]bool // phases handed over by the checker (for --inputs)
	total   int64           // offsets to read at start
	started time.Time
	took    time.Duration // the read and check of the topic (not --inputs)
}

// newVerifier connects and fixes every partition's range. Errors naming
// something the user asked for (topic, partition, group) are *usageError.
func newVerifier(e config.VerifyEnv, o verifyOpts, stdout, stderr io.Writer) (*verifier, error) {
	sc := sarama.NewConfig()
	sc.Version, _ = config.ParseKafkaVersion(e.KafkaVersion)
	sc.ClientID = e.ClientID
	sc.Consumer.IsolationLevel = sarama.ReadCommitted
	sc.Metadata.Full = false
	e.Security.Apply(sc)
	client, err := sarama.NewClient(e.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("connect to PHASEGATE_BROKERS=%s: %w", strings.Join(e.Brokers, ","), err)
	}
	v := &verifier{o: o, client: client, stderr: stderr, cut: map[int32]bool{}, checked: map[uint64]bool{}}
	if err := v.setup(stdout); err != nil {
		client.Close()
		if errors.Is(err, sarama.ErrOutOfBrokers) {
			err = fmt.Errorf("connect to PHASEGATE_BROKERS=%s: %w", strings.Join(e.Brokers, ","), err)
		}
		return nil, err
	}
	return v, nil
}

func (v *verifier) close() { _ = v.client.Close() }

// setup finds the topic's partitions and each one's range.
func (v *verifier) setup(stdout io.Writer) error {
	parts, err := v.client.Partitions(v.o.topic)
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return &usageError{fmt.Sprintf("topic %q does not exist", v.o.topic)}
	}
	if err != nil {
		return fmt.Errorf("partitions of %s: %w", v.o.topic, err)
	}
	var committed map[int32]int64
	if v.o.group != "" {
		if committed, err = v.groupOffsets(int32(len(parts))); err != nil {
			return err
		}
	}
	for _, p := range []offsetSpec{v.o.fromOff, v.o.toOff} {
		for q := range p.parts {
			if int(q) >= len(parts) {
				return &usageError{fmt.Sprintf("partition %d: topic %s has %d partitions", q, v.o.topic, len(parts))}
			}
		}
	}
	v.reader = topicread.New(v.client, v.o.topic)
	midLog := map[int32]bool{}
	for p := range int32(len(parts)) {
		oldest, err := topicread.OffsetAt(v.client, v.o.topic, p, sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("log start of %s/%d: %w", v.o.topic, p, err)
		}
		lso, err := topicread.OffsetAt(v.client, v.o.topic, p, sarama.OffsetNewest)
		if err != nil {
			return fmt.Errorf("last stable offset of %s/%d: %w", v.o.topic, p, err)
		}
		start, end := oldest, lso
		switch {
		case !v.o.from.IsZero():
			if start, err = v.offsetForTime(p, v.o.from, lso); err != nil {
				return err
			}
		case v.o.fromOff.set():
			if o, ok := v.o.fromOff.of(p); ok {
				start = o
			}
		case committed != nil:
			if o, ok := committed[p]; ok && o >= 0 {
				start = o
			}
		}
		switch {
		case !v.o.to.IsZero():
			if end, err = v.offsetForTime(p, v.o.to, lso); err != nil {
				return err
			}
		case v.o.toOff.set():
			if o, ok := v.o.toOff.of(p); ok {
				end = min(o, lso)
			}
		}
		start = max(start, oldest)
		end = max(end, start)
		v.cut[p] = end < lso
		midLog[p] = start > oldest
		v.reader.Add(p, start, end)
	}
	v.out = newPrinter(stdout, v.o.json)
	v.checker = verify.New(verify.Config{
		Partitions:  int32(len(parts)),
		KeepSources: len(v.o.inputs) > 0,
		OnViolation: v.out.violation,
		OnPhase: func(s *verify.PhaseSummary) {
			if len(v.o.inputs) > 0 && wholeRange(s) {
				v.checked[s.ID] = true
			}
			v.out.phase(s)
		},
	})
	for _, pp := range v.reader.Parts() {
		if midLog[pp.P] {
			v.checker.StartsMidLog(pp.P)
		}
	}
	v.total = v.reader.Pending()
	return nil
}

// offsetForTime is the first offset of p at or after t, or lso when none.
func (v *verifier) offsetForTime(p int32, t time.Time, lso int64) (int64, error) {
	o, err := topicread.OffsetAt(v.client, v.o.topic, p, t.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("offset of %s/%d at %s: %w", v.o.topic, p, t.Format(time.RFC3339), err)
	}
	if o < 0 || o > lso {
		return lso, nil
	}
	return o, nil
}

// groupOffsets is the group's committed offsets on the topic; -1 where
// it has none.
func (v *verifier) groupOffsets(n int32) (map[int32]int64, error) {
	admin, err := sarama.NewClusterAdminFromClient(v.client)
	if err != nil {
		return nil, err
	}
	// Not admin.Close: it would close the shared client.
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	resp, err := admin.ListConsumerGroupOffsets(v.o.group, map[string][]int32{v.o.topic: ps})
	if err != nil {
		return nil, fmt.Errorf("offsets of group %s: %w", v.o.group, err)
	}
	out := map[int32]int64{}
	found := false
	for p, b := range resp.Blocks[v.o.topic] {
		if b.Err != sarama.ErrNoError {
			return nil, fmt.Errorf("offset of group %s on %s/%d: %w", v.o.group, v.o.topic, p, b.Err)
		}
		out[p] = b.Offset
		found = found || b.Offset >= 0
	}
	if !found {
		return nil, &usageError{fmt.Sprintf("group %q has no committed offset on %s", v.o.group, v.o.topic)}
	}
	return out, nil
}

// run reads and checks until every range is read or ctx ends, then prints
// the summary; it returns the exit status.
func (v *verifier) run(ctx context.Context) int {
	v.started = time.Now()
	done := make(chan error, 1)
	go func() { done <- v.read(ctx) }()
	var readErr error
	select {
	case readErr = <-done:
	case <-ctx.Done():
		v.client.Close() // a fetch in flight ends now, not at its timeout
		readErr = <-done
	}
	v.took = time.Since(v.started)
	interrupted := ctx.Err() != nil
	if interrupted {
		readErr = nil // what failed after the interruption is the interruption
	}
	rep := v.checker.Finish(interrupted || readErr != nil)
	var acc *verify.Accounting
	var accErr error
	if len(v.o.inputs) > 0 && !rep.Interrupted {
		acc, accErr = v.account(ctx)
		if ctx.Err() != nil {
			acc, accErr, interrupted = nil, nil, true
		}
	}
	v.out.summary(v, rep, acc)
	switch {
	case readErr != nil:
		fmt.Fprintf(v.stderr, "sidecar verify: reading %s stopped: %v\n", v.o.topic, readErr)
		return exitCannotCheck
	case accErr != nil:
		fmt.Fprintf(v.stderr, "sidecar verify: --inputs: %v\n", accErr)
		return exitCannotCheck
	case rep.Stats.Violations > 0 || (acc != nil && len(acc.Violations) > 0):
		return 1
	case interrupted:
		return exitInterrupted
	}
	return 0
}

// read feeds the checker until every range is read, ctx ends or the
// cluster cannot be read. It alone touches the checker until it returns.
func (v *verifier) read(ctx context.Context) error {
	for _, pp := range v.reader.Parts() {
		if pp.Done {
			v.checker.EndPartition(pp.P, pp.End, v.cut[pp.P])
		}
	}
	var tick <-chan time.Time
	if v.o.progress > 0 {
		t := time.NewTicker(v.o.progress)
		defer t.Stop()
		tick = t.C
	}
	// Memory: beyond max-open-phases, only the partitions holding the
	// oldest open phase back are read.
	paused := func(p int32) bool { return v.checker.Open() > v.o.maxOpen && !v.checker.Behind(p) }
	feed := func(r topicread.Record) { v.checker.Feed(verifyRecord(r)) }
	for !v.reader.Finished() && ctx.Err() == nil {
		if err := v.reader.Fetch(ctx, paused, feed); err != nil {
			return err
		}
		for _, pp := range v.reader.Parts() {
			if pp.Done {
				v.checker.EndPartition(pp.P, pp.End, v.cut[pp.P]) // once: later calls do nothing
			}
		}
		select {
		case <-tick:
			v.progress()
		default:
		}
	}
	return nil
}

// progress prints one line on stderr.
func (v *verifier) progress() {
	done := v.total - v.reader.Pending()
	el := time.Since(v.started).Seconds()
	pct := 100.0
	if v.total > 0 {
		pct = 100 * float64(done) / float64(v.total)
	}
	fmt.Fprintf(v.stderr, "sidecar verify: %s: %d of %d offsets read (%.0f %%), %.0f records/s, %d violations so far, %d phases open\n",
		v.o.topic, done, v.total, pct, float64(v.checker.Stats().Records)/max(el, 1e-9), v.out.violations, v.checker.Open())
}

// wholeRange reports whether every partition's read covered phase s, so
// that its input records can all be looked for.
func wholeRange(s *verify.PhaseSummary) bool {
	for _, pp := range s.Partitions {
		if pp.OutOfRange {
			return false
		}
	}
	return true
}
