package dedupe

import "strconv"

// PartitionKey names an input partition.
type PartitionKey struct {
	Topic     string
	Partition int32
}

// MarkerVerdict is what Markers.See decides about an input marker
// (MARKERS.md section 3.1). The zero value is no verdict.
type MarkerVerdict int

const (
	// MarkerNew is the first marker on its partition, or one for a higher
	// phase than any before: honour it and seal the phase for the partition.
	MarkerNew MarkerVerdict = iota + 1
	// MarkerRepeat is a marker for the same phase as the highest seen on its
	// partition: a producer retry, to drop.
	MarkerRepeat
	// MarkerStale is a marker for a lower phase than one already marked on
	// its partition: quarantine it with reason stale-marker.
	MarkerStale
)

// String returns "new", "repeat" or "stale", fit for a metric label.
func (v MarkerVerdict) String() string {
	switch v {
	case MarkerNew:
		return "new"
	case MarkerRepeat:
		return "repeat"
	case MarkerStale:
		return "stale"
	}
	return "MarkerVerdict(" + strconv.Itoa(int(v)) + ")"
}

// Markers tracks the highest input marker phase per partition.
//
// Not safe for concurrent use: one goroutine (the pipeline) owns it. It lives
// for one session, like Cache: its size is one entry per partition seen or
// restored in that session.
type Markers struct {
	last map[PartitionKey]uint64
}

// NewMarkers returns an empty tracker.
func NewMarkers() *Markers {
	return &Markers{last: make(map[PartitionKey]uint64)}
}

// See classifies an input marker for phase on key: the same phase as the
// highest seen is MarkerRepeat, a lower one MarkerStale, a higher one or the
// first MarkerNew, and only MarkerNew changes what is remembered.
func (m *Markers) See(key PartitionKey, phase uint64) MarkerVerdict {
	last, ok := m.last[key]
	switch {
	case ok && phase == last:
		return MarkerRepeat
	case ok && phase < last:
		return MarkerStale
	}
	m.last[key] = phase
	return MarkerNew
}

// Last returns the highest marker phase seen (or restored) on key.
func (m *Markers) Last(key PartitionKey) (phase uint64, ok bool) {
	phase, ok = m.last[key]
	return phase, ok
}

// Restore sets the highest marker phase of key, as read from the committed
// offset metadata after a restart or an assignment. It overwrites what was
// there: committed state is authoritative.
func (m *Markers) Restore(key PartitionKey, phase uint64) {
	m.last[key] = phase
}
