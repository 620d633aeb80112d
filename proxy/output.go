package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/internal/topicread"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/tasks"
)

// lastMarkers reads each output partition's last committed marker (the
// offset it was at, and its value), looking back from the last stable
// offset: the newest tailFirst offsets, then tailMore, then the whole
// partition. phasegate ends every transaction on a partition it writes
// with a marker there, so the first look finds one on every partition
// phasegate wrote; a partition it never wrote has none.
func lastMarkers(ctx context.Context, client sarama.Client, topic string, parts int32) (map[int32]markers.Marker, error) {
	found := map[int32]markers.Marker{}
	all := make([]int32, parts)
	for p := range parts {
		all[p] = p
	}
	starts, err := topicread.Offsets(client, topic, all, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	ends, err := topicread.Offsets(client, topic, all, sarama.OffsetNewest)
	if err != nil {
		return nil, err
	}
	type window struct{ start, end, from int64 }
	todo := map[int32]window{}
	for _, p := range all {
		if start, end := starts[p], ends[p]; end > start {
			todo[p] = window{start, end, max(start, end-tailFirst)}
		}
	}
	for look := 0; len(todo) > 0; look++ {
		r := topicread.New(client, topic)
		for p, w := range todo {
			r.Add(p, w.from, w.end)
		}
		var bad error
		for !r.Finished() && bad == nil {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			err := r.Fetch(ctx, nil, func(rec topicread.Record) {
				meta, err := markers.Inspect(rec.Headers)
				if err != nil || !meta.Marker {
					return
				}
				m, err := markers.DecodeOutputMarker(rec.Value)
				if err != nil {
					bad = fmt.Errorf("%s/%d offset %d: a marker phasegate cannot read: %w", topic, rec.Partition, rec.Offset, err)
					return
				}
				found[rec.Partition] = m // the last one read is the newest
			})
			if err != nil {
				return nil, fmt.Errorf("read the end of %s: %w", topic, err)
			}
		}
		if bad != nil {
			return nil, bad
		}
		for p, w := range todo {
			if _, ok := found[p]; ok || w.from == w.start {
				delete(todo, p)
				continue
			}
			back := int64(tailMore)
			if look > 0 {
				back = w.end - w.start
			}
			todo[p] = window{w.start, w.from, max(w.start, w.from-back)}
		}
	}
	return found, nil
}

// How far back lastMarkers looks: a transaction ends with the markers, so
// the last few offsets of a partition phasegate wrote hold one.
const (
	tailFirst = 64
	tailMore  = 4096
)

// errWriters: an output topic was written by another number of writers per
// partition than the instance's layout gives (MARKERS.md 3.3: W never
// changes on a partition).
var errWriters = errors.New("the output topic was written with another number of writers per partition")

// checkWriters refuses an output whose last markers say another number of
// writers than l gives the partition: readers would drop every new marker
// as malformed (MARKERS.md 3.3, rules M1 and M2).
func checkWriters(topic string, last map[int32]markers.Marker, l *tasks.Layout) error {
	for _, p := range slices.Sorted(maps.Keys(last)) {
		m := last[p]
		had, want := max(int(m.Writers), 1), len(l.Writers(p))
		if had != want {
			return fmt.Errorf("%w: %s partition %d ends with a marker of %d writer(s) (phase %d, by %s); this instance would write it with %d (PHASEGATE_ROUTING, PHASEGATE_TASKS): write to a new output topic (and read it with a new consumer group), or go back to the settings that wrote it",
				errWriters, topic, p, had, m.Phase, m.Emitter, want)
		}
	}
	return nil
}

// checkOutput is New's look at the output topic before anything is
// written: its last markers (lastMarkers) against the layout
// (checkWriters), within a minute.
func checkOutput(client sarama.Client, topic string, parts int32, l *tasks.Layout) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	last, err := lastMarkers(ctx, client, topic, parts)
	if err != nil {
		return err
	}
	return checkWriters(topic, last, l)
}
