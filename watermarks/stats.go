package watermarks

import (
	"math"
	"slices"
	"time"
)

// Straggler says how long each branch took to pass a sealed phase.
type Straggler struct {
	// PerPartition has one entry per partition, in P order: Opened → the
	// moment that partition passed the phase, 0 if it had passed it before
	// the phase opened, Sealed - Opened if it never did (idle or timeout).
	PerPartition []PartitionDuration
	// PerTopic is the maximum over each topic's partitions.
	PerTopic map[string]time.Duration
	// CV is the coefficient of variation (population standard deviation over
	// mean) of the PerTopic durations; 0 with fewer than 2 topics or mean 0.
	CV float64
	// Slowest is the partition with the longest duration (lowest P on ties).
	Slowest P
}

// PartitionDuration is one partition's time to pass a phase.
type PartitionDuration struct {
	P         P
	Topic     string
	Partition int32
	Duration  time.Duration
}

// StragglingCV is the CV above which a phase counts as straggling.
const StragglingCV = 0.6

// Straggling reports whether one branch was much slower than the others.
func (s Straggler) Straggling() bool { return s.CV > StragglingCV }

// SlowestPartition returns the entry of Slowest, the partition that took
// longest to pass the phase; false when there are no partitions.
func (s Straggler) SlowestPartition() (PartitionDuration, bool) {
	if int(s.Slowest) >= len(s.PerPartition) {
		return PartitionDuration{}, false
	}
	return s.PerPartition[s.Slowest], true
}

func (t *Tracker) straggler(ph *phase, sealed time.Time) Straggler {
	st := Straggler{
		PerPartition: make([]PartitionDuration, len(t.parts)),
		PerTopic:     make(map[string]time.Duration),
	}
	for i := range t.parts {
		ps := &t.parts[i]
		var d time.Duration
		switch {
		case i < len(ph.parts) && !ph.parts[i].passed.IsZero():
			d = ph.parts[i].passed.Sub(ph.opened)
		case ps.low > ph.id:
			d = 0 // passed before the phase opened
		default:
			d = sealed.Sub(ph.opened)
		}
		st.PerPartition[i] = PartitionDuration{P: P(i), Topic: ps.topic, Partition: ps.partition, Duration: d}
		if cur, ok := st.PerTopic[ps.topic]; !ok || d > cur {
			st.PerTopic[ps.topic] = d
		}
		if d > st.PerPartition[st.Slowest].Duration {
			st.Slowest = P(i)
		}
	}
	st.CV = cv(st.PerTopic)
	return st
}

// cv is the population coefficient of variation of the durations.
func cv(ds map[string]time.Duration) float64 {
	if len(ds) < 2 {
		return 0
	}
	var sum float64
	for _, d := range ds {
		sum += float64(d)
	}
	mean := sum / float64(len(ds))
	if mean == 0 {
		return 0
	}
	var sq float64
	for _, d := range ds {
		sq += (float64(d) - mean) * (float64(d) - mean)
	}
	return math.Sqrt(sq/float64(len(ds))) / mean
}

// Parameters of the adaptive seal timeout (doc.go invariant 4).
const (
	timeoutWindow  = 256 // sealed phases remembered
	timeoutWarmup  = 20  // observations before the timeout leaves its maximum
	timeoutPercent = 99
)

// adaptive is the seal timeout: p99 × 1.5 of the last timeoutWindow phase
// durations, clamped to [min, max]; max until timeoutWarmup were observed.
type adaptive struct {
	min, max time.Duration
	current  time.Duration
	ring     [timeoutWindow]time.Duration
	n        int // observations so far (the ring holds the last min(n, window))
	changed  bool
	scratch  [timeoutWindow]time.Duration
}

func (a *adaptive) observe(d time.Duration) {
	a.ring[a.n%timeoutWindow] = d
	a.n++
	a.changed = true
}

// update recomputes current after new observations; called once per Advance
// so sorting the window costs at most once per call.
func (a *adaptive) update() {
	if !a.changed {
		return
	}
	a.changed = false
	if a.n < timeoutWarmup {
		a.current = a.max
		return
	}
	k := min(a.n, timeoutWindow)
	s := a.scratch[:k]
	copy(s, a.ring[:k])
	slices.Sort(s)
	p := s[(k*timeoutPercent+99)/100-1] // nearest rank: ceil(0.99 k)-th value
	a.current = min(max(p+p/2, a.min), a.max)
}
