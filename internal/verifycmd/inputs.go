package verifycmd

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/internal/topicread"
	"github.com/phasegate/phasegate/internal/verify"
	"github.com/phasegate/phasegate/markers"
)

// account reads the fork topics and the quarantine topic (from --from, or
// the log start, to their last stable offsets now) and checks that every
// input record of a checked phase is in the output or the quarantine
// exactly once, or is a proven duplicate. A record whose phase header is
// malformed has no phase: it is accounted for when it lies in the time
// range (any time without --from/--to).
func (v *verifier) account(ctx context.Context) (*verify.Accounting, error) {
	var inputs []verify.Input
	for _, topic := range v.o.inputs {
		err := v.readWhole(ctx, topic, func(r *verify.Record) {
			if in, ok := v.input(topic, r); ok {
				inputs = append(inputs, in)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	var quarantine []markers.Record
	err := v.readWhole(ctx, v.o.quarantine, func(r *verify.Record) {
		quarantine = append(quarantine, markers.Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Offset: r.Offset})
	})
	if err != nil {
		return nil, err
	}
	return verify.Account(inputs, v.checker.Kept(), quarantine), nil
}

// input is r as an input record, and whether it is one of the checked
// phases.
func (v *verifier) input(topic string, r *verify.Record) (verify.Input, bool) {
	src := string(markers.AppendSource(nil, topic, r.Partition, r.Offset))
	in := verify.Input{Source: src, ID: src}
	meta, err := markers.Inspect(r.Headers)
	if meta.ID != nil {
		in.ID = string(meta.ID)
	}
	in.Marker = meta.Marker
	switch {
	case err == nil && meta.HasPhase:
		in.Phase = meta.Phase
	case err == nil:
		ph, perr := markers.PhaseOf(r.Timestamp.UnixMilli(), v.o.phaseLength)
		if perr != nil {
			return in, v.inWindow(r.Timestamp)
		}
		in.Phase = ph
	default: // a malformed header: no phase, quarantined when in range
		return in, v.inWindow(r.Timestamp)
	}
	return in, v.checked[in.Phase]
}

func (v *verifier) inWindow(t time.Time) bool {
	return (v.o.from.IsZero() || !t.Before(v.o.from)) && (v.o.to.IsZero() || t.Before(v.o.to))
}

// readWhole reads topic with read_committed from --from (or its log
// start) to its last stable offsets now.
func (v *verifier) readWhole(ctx context.Context, topic string, fn func(*verify.Record)) error {
	parts, err := v.client.Partitions(topic)
	if err != nil {
		return fmt.Errorf("partitions of %s: %w", topic, err)
	}
	tr := topicread.New(v.client, topic)
	for _, p := range parts {
		start, err := topicread.OffsetAt(v.client, topic, p, sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("log start of %s/%d: %w", topic, p, err)
		}
		end, err := topicread.OffsetAt(v.client, topic, p, sarama.OffsetNewest)
		if err != nil {
			return fmt.Errorf("last stable offset of %s/%d: %w", topic, p, err)
		}
		if !v.o.from.IsZero() {
			if o, err := topicread.OffsetAt(v.client, topic, p, v.o.from.UnixMilli()); err == nil && o >= 0 {
				start = max(start, min(o, end))
			}
		}
		tr.Add(p, start, end)
	}
	for !tr.Finished() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := tr.Fetch(ctx, nil, func(r topicread.Record) { fn(verifyRecord(r)) }); err != nil {
			return err
		}
	}
	return nil
}

// verifyRecord is a record read as the checker takes it.
func verifyRecord(r topicread.Record) *verify.Record {
	return &verify.Record{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers}
}
