package verify

import (
	"time"
)

// Stats counts what a Checker read and checked.
type Stats struct {
	Records        int64 // every record fed
	Data, Markers  int64 // data records and markers of whole phases
	LeadIn         int64 // records before the first marker of a mid-log start
	LeadOut        int64 // data records after the last marker of a cut range
	Phases         int   // phases checked across the topic
	PhasesWithData int
	Violations     int
}

// PartitionStats is one partition's share of Stats.
type PartitionStats struct {
	Partition   int32 `json:"partition"`
	FirstOffset int64 `json:"first_offset"` // of the records fed; -1 when none
	LastOffset  int64 `json:"last_offset"`
	Records     int64 `json:"records"`
	Data        int64 `json:"data"`
	Markers     int64 `json:"markers"`
	LeadIn      int64 `json:"lead_in"`
	LeadOut     int64 `json:"lead_out"`
}

// Report is what Finish returns.
type Report struct {
	Stats       Stats
	Partitions  []PartitionStats
	Sources     []*SourceHistograms // by source topic name
	Unchecked   int                 // open phases left unchecked by an interrupted read
	Interrupted bool
}

// Whole reports whether the check found nothing wrong and checked
// everything it read.
func (r *Report) Whole() bool { return r.Stats.Violations == 0 && !r.Interrupted }

// Histogram counts values into buckets: Counts[i] holds the values <=
// Bounds[i] (and above Bounds[i-1]); the last count holds the values above
// every bound.
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []int64   `json:"counts"`
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]int64, len(bounds)+1)}
}

func (h *Histogram) add(v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
}

// Duration buckets (milliseconds) and record-count buckets: 1-2-5 steps
// from 1 ms to 10 minutes, powers of ten from 1 to 10 million.
var (
	durationBoundsMs = []float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000, 600_000}
	countBounds      = []float64{0, 1, 10, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000}
)

// SourceHistograms is, for one source topic, the distribution over phases
// of the phase's duration (last minus first record timestamp of that
// source) and of its record count.
type SourceHistograms struct {
	Topic          string        `json:"topic"`
	Phases         int64         `json:"phases"` // phases holding records of this source
	Records        int64         `json:"records"`
	MaxDuration    time.Duration `json:"max_duration_ns"`
	DurationsMs    Histogram     `json:"phase_duration_ms"`
	RecordsByPhase Histogram     `json:"records_per_phase"`
}

func newSourceHistograms(topic string) *SourceHistograms {
	return &SourceHistograms{Topic: topic, DurationsMs: newHistogram(durationBoundsMs), RecordsByPhase: newHistogram(countBounds)}
}

func (h *SourceHistograms) add(s *SourceStat) {
	h.Phases++
	h.Records += s.Records
	d := s.Duration()
	h.MaxDuration = max(h.MaxDuration, d)
	h.DurationsMs.add(float64(d) / float64(time.Millisecond))
	h.RecordsByPhase.add(float64(s.Records))
}
