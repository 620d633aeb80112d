package markers

// Header names and limits of the wire format (MARKERS.md section 2).
const (
	HeaderMarker = "phasegate.marker"
	HeaderPhase  = "phasegate.phase"
	HeaderID     = "phasegate.id"
	HeaderSource = "phasegate.source"
	HeaderReason = "phasegate.reason"
	// HeaderTask names the writer of a data record on an output partition
	// with several writers (MARKERS.md section 3.3); absent otherwise.
	HeaderTask = "phasegate.task"
	// Version is the wire format version of a one-writer marker, the "v" of
	// every marker of a partition with one writer and of every input marker.
	Version = 1
	// VersionWriters is the "v" of a marker on an output partition with
	// several writers (MARKERS.md section 3.3).
	VersionWriters = 2
	// MaxIDLen is the longest phasegate.id value, in bytes.
	MaxIDLen = 256
)

// headerPrefix is shared by every phasegate header; headers are matched
// byte for byte, so "Phasegate.Phase" is not a phasegate header.
const headerPrefix = "phasegate."

// SealedBy is the "sealed_by" field of an output marker: why phasegate
// sealed the phase.
type SealedBy string

// The four values MARKERS.md section 3 allows for "sealed_by".
const (
	SealedByMarkers   SealedBy = "markers"
	SealedByWatermark SealedBy = "watermark"
	SealedByIdle      SealedBy = "idle"
	SealedByTimeout   SealedBy = "timeout"
)

// Valid reports whether s is one of the four values of MARKERS.md section 3.
func (s SealedBy) Valid() bool {
	switch s {
	case SealedByMarkers, SealedByWatermark, SealedByIdle, SealedByTimeout:
		return true
	}
	return false
}

// Reason is the phasegate.reason header of a quarantined record.
type Reason string

// The four quarantine reasons of MARKERS.md section 2.
const (
	ReasonLate          Reason = "late"
	ReasonMalformed     Reason = "malformed"
	ReasonStaleMarker   Reason = "stale-marker"
	ReasonCountMismatch Reason = "count-mismatch"
)

// Valid reports whether r is one of the four values of MARKERS.md section 2.
func (r Reason) Valid() bool {
	switch r {
	case ReasonLate, ReasonMalformed, ReasonStaleMarker, ReasonCountMismatch:
		return true
	}
	return false
}

// Header is one record header, independent of any Kafka client.
type Header struct{ Key, Value []byte }

// Bits of Meta.seen, one per phasegate header.
const (
	seenMarker uint8 = 1 << iota
	seenPhase
	seenID
	seenSource
	seenReason
	seenTask
)

// Meta is what phasegate reads from a record's headers. The zero value is
// ready; feed it every header of one record with Observe (no conversion and
// no allocation, whatever the Kafka client's header type), then call Check.
// Reuse it for the next record only after Reset. ID and Source alias the
// header values passed to Observe. Not safe for concurrent use.
type Meta struct {
	Marker   bool   // phasegate.marker: 1 present
	HasPhase bool   // phasegate.phase present and well formed
	Phase    uint64 // valid when HasPhase
	ID       []byte // phasegate.id value (aliases the input), nil if absent
	// Source is the phasegate.source value (aliases the input), nil if
	// absent. Observe does not check its syntax: the header only has a
	// meaning on output records, where ParseSource checks it.
	Source []byte
	// Task is the phasegate.task value (aliases the input), nil if absent.
	// Like Source, Observe does not check its syntax: ParseTask does, on
	// output partitions with several writers (MARKERS.md section 3.3).
	Task []byte

	seen uint8 // which phasegate headers Observe has seen
}

// Reset makes m ready for the next record.
func (m *Meta) Reset() { *m = Meta{} }

// Observe takes one header of the record. Headers whose key does not start
// with "phasegate." and unknown phasegate.* headers are ignored. It returns,
// without allocating:
//   - ErrHeaderRepeated when one of the six phasegate headers comes twice;
//   - ErrMarkerValue when phasegate.marker is not exactly "1";
//   - a ParsePhase error when phasegate.phase is malformed;
//   - ErrIDEmpty or ErrIDTooLong for a bad phasegate.id.
//
// A header that yields an error is not stored in m. MARKERS.md section 1:
// a record with a malformed header is quarantined, never guessed at, so
// callers stop at the first error.
func (m *Meta) Observe(key, value []byte) error {
	if len(key) <= len(headerPrefix) || string(key[:len(headerPrefix)]) != headerPrefix {
		return nil
	}
	var bit uint8
	switch string(key[len(headerPrefix):]) {
	case "marker":
		bit = seenMarker
	case "phase":
		bit = seenPhase
	case "id":
		bit = seenID
	case "source":
		bit = seenSource
	case "reason":
		bit = seenReason
	case "task":
		bit = seenTask
	default:
		return nil
	}
	if m.seen&bit != 0 {
		return ErrHeaderRepeated
	}
	m.seen |= bit
	switch bit {
	case seenMarker:
		if len(value) != 1 || value[0] != '1' {
			return ErrMarkerValue
		}
		m.Marker = true
	case seenPhase:
		p, err := ParsePhase(value)
		if err != nil {
			return err
		}
		m.Phase, m.HasPhase = p, true
	case seenID:
		switch {
		case len(value) == 0:
			return ErrIDEmpty
		case len(value) > MaxIDLen:
			return ErrIDTooLong
		}
		m.ID = value
	case seenSource:
		m.Source = value
	case seenTask:
		m.Task = value
	}
	return nil
}

// Check reports what is wrong with the record as a whole once every header
// has been observed: a marker without phasegate.phase is ErrMarkerNoPhase
// (MARKERS.md section 3). It never allocates.
func (m *Meta) Check() error {
	if m.Marker && !m.HasPhase {
		return ErrMarkerNoPhase
	}
	return nil
}

// Inspect observes every header of hs in order, then checks the result. It
// returns the first error; the Meta returned with an error holds what was
// read before it. It never allocates and is safe for concurrent use.
func Inspect(hs []Header) (Meta, error) {
	var m Meta
	for i := range hs {
		if err := m.Observe(hs[i].Key, hs[i].Value); err != nil {
			return m, err
		}
	}
	return m, m.Check()
}

// ParseTask parses a phasegate.task value (MARKERS.md section 2): a
// canonical decimal (no sign, no leading zero) in [0, 2147483647]. It
// returns ErrTask otherwise, never allocates, and is safe for concurrent
// use.
func ParseTask(b []byte) (int32, error) {
	n, ok := parseCanonical(b, 1<<31-1)
	if !ok {
		return 0, ErrTask
	}
	return int32(n), nil
}
