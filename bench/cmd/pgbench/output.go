package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/internal/verify"
	"github.com/phasegate/phasegate/markers"
)

// markerOf returns the phase of a marker record (phasegate.marker: 1).
func markerOf(r *kgo.Record) (uint64, bool) {
	var isMarker bool
	var phase []byte
	for _, h := range r.Headers {
		switch h.Key {
		case markers.HeaderMarker:
			isMarker = string(h.Value) == "1"
		case markers.HeaderPhase:
			phase = h.Value
		}
	}
	if !isMarker {
		return 0, false
	}
	p, err := strconv.ParseUint(string(phase), 10, 64)
	return p, err == nil
}

// awaitFinalMarkers returns once a read_committed fetch of the last few
// records of every partition of topic shows the marker of phase last, and
// the time it saw the last of them.
func awaitFinalMarkers(ctx context.Context, brokers []string, topic string, parts int32, last uint64) (time.Time, error) {
	offsets := map[int32]kgo.Offset{}
	for p := range parts {
		offsets[p] = kgo.NewOffset().AtEnd().Relative(-4)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return time.Time{}, err
	}
	defer cl.Close()
	seen := map[int32]bool{}
	for int32(len(seen)) < parts {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return time.Time{}, fmt.Errorf("markers of phase %d visible on %d of %d partitions: %w", last, len(seen), parts, err)
		}
		at := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			if p, ok := markerOf(r); ok && p >= last {
				seen[r.Partition] = true
			}
		})
		if int32(len(seen)) == parts {
			return at, nil
		}
	}
	return time.Now(), nil
}

// outputCheck is what verifyOutput found.
type outputCheck struct {
	Data, Markers int
	Phases        int // distinct phases with a marker
	Err           error
}

// verifyOutput reads topic whole with read_committed, until every partition
// showed the marker of phase last and then was quiet for a second, and checks
// it with internal/verify (every rule of MARKERS.md 3.2, the verifier of
// `sidecar verify` and the e2e suite): data records = want, no data after
// the marker of phase last, and the quarantine topic is empty.
func verifyOutput(ctx context.Context, brokers []string, topic, quarantine string, parts int32, last uint64, want int) outputCheck {
	var c outputCheck
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		c.Err = err
		return c
	}
	defer cl.Close()
	var errs []error
	fail := func(format string, a ...any) {
		if len(errs) < 5 {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	chk := verify.New(verify.Config{Partitions: parts, OnViolation: func(v verify.Violation) { fail("%s", v) }})
	done := make([]bool, parts) // the marker of phase last was read
	doneParts := int32(0)
	for {
		quiet := time.Second
		if doneParts < parts {
			quiet = 30 * time.Second
		}
		pctx, cancel := context.WithTimeout(ctx, quiet)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			c.Err = ctx.Err()
			return c
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			p, isMarker := markerOf(r)
			if done[r.Partition] && (isMarker && p > last || !isMarker && string(r.Value) == trailerValue) {
				// The trailers' phase: sealed when every partition turned
				// idle (PHASEGATE_IDLE_TIMEOUT), after the relay's end.
				return
			}
			chk.Feed(toVerify(r))
			switch {
			case isMarker && p >= last && !done[r.Partition]:
				done[r.Partition] = true
				doneParts++
			case !isMarker && done[r.Partition]:
				fail("partition %d offset %d: data after the final marker", r.Partition, r.Offset)
			}
		})
		if n == 0 {
			if doneParts < parts {
				fail("only %d of %d partitions showed the marker of phase %d", doneParts, parts, last)
			}
			break
		}
	}
	for p := range parts {
		chk.EndPartition(p, 0, false)
	}
	rep := chk.Finish(false)
	c.Data, c.Markers, c.Phases = int(rep.Stats.Data), int(rep.Stats.Markers), rep.Stats.Phases
	if c.Data != want {
		fail("%d data records in the output, want %d", c.Data, want)
	}
	if q, err := committedEnd(ctx, cl, quarantine); err != nil {
		fail("quarantine end offsets: %v", err)
	} else if q > 0 {
		fail("%d offsets in the quarantine topic %s", q, quarantine)
	}
	c.Err = errors.Join(errs...)
	return c
}

// toVerify converts a franz-go record for the verifier.
func toVerify(r *kgo.Record) *verify.Record {
	hs := make([]markers.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = markers.Header{Key: []byte(h.Key), Value: h.Value}
	}
	return &verify.Record{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: hs}
}

// committedEnd sums the last stable offsets of topic's partitions.
func committedEnd(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	lo, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var n int64
	var ferr error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ferr = o.Err
			return
		}
		n += o.Offset
	})
	return n, ferr
}
