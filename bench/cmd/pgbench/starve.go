package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// starvation is what watchStarvation found: the longest time a partition
// that held the global watermark, with lag, went without its position
// moving, as seen by polling /phases.
type starvation struct {
	MaxS      float64 // seconds; a lower bound (samples are ~200 ms apart)
	Who       string  // topic/partition of that stretch
	Samples   int     // /phases snapshots with a per-partition list
	MaxHolder int     // most partitions holding the watermark in one snapshot
	Note      string  // why nothing was measured, when so
}

// partitionSample is the part of one /phases partition entry the watcher
// reads. Pointers: a field that is absent (a renamed or summarised /phases)
// is told apart from a zero value.
type partitionSample struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Lag       *int64 `json:"lag"`
	LagKnown  *bool  `json:"lag_known"`
	Idle      bool   `json:"idle"`
	Position  *int64 `json:"position"`
	Holds     *bool  `json:"holds_watermark"`
}

// starveTracker turns /phases snapshots into the longest starvation.
type starveTracker struct {
	pos      map[string]int64     // position in the previous snapshot
	moved    map[string]time.Time // when the position last changed
	since    map[string]time.Time // start of the current holding-with-lag stretch
	res      starvation
	lastSnap string // the snapshot's "updated", to skip one read twice
}

func newStarveTracker() *starveTracker {
	return &starveTracker{pos: map[string]int64{}, moved: map[string]time.Time{}, since: map[string]time.Time{}}
}

// observe feeds one /phases body read at t. It returns false when the body
// has no usable per-partition list (holds_watermark, lag and position).
func (s *starveTracker) observe(body []byte, t time.Time) bool {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return false
	}
	if u, ok := doc["updated"]; ok {
		if string(u) == s.lastSnap {
			return true // the sidecar rebuilds /phases every 200 ms
		}
		s.lastSnap = string(u)
	}
	var parts []partitionSample
	if raw, ok := doc["partitions"]; !ok || json.Unmarshal(raw, &parts) != nil {
		return false
	}
	if len(parts) > 0 { // none: not joined yet, or no row in the asked-for state
		s.res.Samples++
	}
	holders := 0
	listed := make(map[string]bool, len(parts))
	for _, p := range parts {
		if p.Position == nil || p.Holds == nil || p.Lag == nil {
			return false
		}
		k := p.Topic + "/" + strconv.Itoa(int(p.Partition))
		listed[k] = true
		if prev, ok := s.pos[k]; !ok || prev != *p.Position {
			s.moved[k] = t
		}
		s.pos[k] = *p.Position
		lagging := *p.Lag > 0 && (p.LagKnown == nil || *p.LagKnown) && !p.Idle
		if !*p.Holds || !lagging {
			delete(s.since, k)
			continue
		}
		holders++
		if _, ok := s.since[k]; !ok {
			s.since[k] = t
		}
		from := s.since[k]
		if m := s.moved[k]; m.After(from) {
			from = m
		}
		if d := t.Sub(from).Seconds(); d > s.res.MaxS {
			s.res.MaxS, s.res.Who = d, k
		}
	}
	// A list of some partitions only (?partitions=holding), or none: one
	// left out holds nothing now, and its stretch ends.
	for k := range s.since {
		if !listed[k] {
			delete(s.since, k)
		}
	}
	s.res.MaxHolder = max(s.res.MaxHolder, holders)
	return true
}

// watchStarvation polls the sidecar's status path (BENCH_PHASES_PATH,
// default /phases?partitions=all) every 150 ms until ctx ends.
func watchStarvation(ctx context.Context, sc *sidecar, path string) starvation {
	tr := newStarveTracker()
	unusable := 0
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if tr.res.Samples == 0 && unusable > 0 {
				tr.res.Note = fmt.Sprintf("%s has no per-partition list with holds_watermark, lag and position (BENCH_PHASES_PATH names the full list)", path)
			} else if tr.res.Samples == 0 {
				tr.res.Note = "no /phases snapshot with partitions"
			}
			return tr.res
		case <-tick.C:
		}
		b, err := sc.get(ctx, path)
		if err != nil {
			continue
		}
		if !tr.observe(b, time.Now()) {
			unusable++
		}
	}
}
