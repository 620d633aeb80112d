package markers

import (
	"errors"
	"strconv"
)

// Sentinel errors. They are returned unwrapped by the per-record functions
// (ParsePhase, Meta.Observe, Meta.Check, Inspect, PhaseOf) so that those stay
// free of allocations on the error path too; compare them with errors.Is.
var (
	// ErrPhaseEmpty: a phasegate.phase value has no digits.
	ErrPhaseEmpty = errors.New("markers: phasegate.phase is empty")
	// ErrPhaseSyntax: a phasegate.phase value holds a byte other than 0-9 (a sign, a space, ...).
	ErrPhaseSyntax = errors.New("markers: phasegate.phase is not decimal digits")
	// ErrPhaseTooLong: a phasegate.phase value has more than 20 digits.
	ErrPhaseTooLong = errors.New("markers: phasegate.phase has more than 20 digits")
	// ErrPhaseOverflow: a phasegate.phase value is above 18446744073709551615.
	ErrPhaseOverflow = errors.New("markers: phasegate.phase overflows uint64")
	// ErrNoTimestamp: a record without a phase header has no usable timestamp (it is negative).
	ErrNoTimestamp = errors.New("markers: record has no timestamp")
	// ErrPhaseLength: the configured phase length is shorter than one millisecond.
	ErrPhaseLength = errors.New("markers: phase length is shorter than 1ms")
	// ErrMarkerValue: a phasegate.marker header whose value is not exactly "1".
	ErrMarkerValue = errors.New("markers: phasegate.marker is not 1")
	// ErrIDEmpty: a phasegate.id header with an empty value.
	ErrIDEmpty = errors.New("markers: phasegate.id is empty")
	// ErrIDTooLong: a phasegate.id header longer than MaxIDLen bytes.
	ErrIDTooLong = errors.New("markers: phasegate.id is longer than 256 bytes")
	// ErrHeaderRepeated: one of the six phasegate.* headers appears twice on a record.
	ErrHeaderRepeated = errors.New("markers: phasegate header repeated")
	// ErrMarkerNoPhase: a record with phasegate.marker but without phasegate.phase.
	ErrMarkerNoPhase = errors.New("markers: marker without phasegate.phase")
	// ErrTask: a phasegate.task value that is not a canonical decimal in [0, 2147483647].
	ErrTask = errors.New("markers: phasegate.task is not a task number")
	// ErrSource: a phasegate.source value that is not <topic>/<partition>/<offset>.
	ErrSource = errors.New("markers: malformed phasegate.source")
	// ErrMalformed: a marker value that breaks MARKERS.md section 3; the
	// concrete error is a *MalformedError naming the field.
	ErrMalformed = errors.New("markers: malformed marker value")
	// ErrNewerVersion: an output marker whose "v" is an integer above 2, a
	// version this package does not know. A reader must stop there
	// (MARKERS.md section 3.3). The error is a *MalformedError, so
	// errors.Is(err, ErrMalformed) holds too.
	ErrNewerVersion = errors.New("markers: marker version newer than this reader")
)

// MalformedError says why a marker value was rejected by DecodeMarker or
// DecodeOutputMarker, or by Marker.ValidateOutput. errors.Is(err,
// ErrMalformed) holds for every *MalformedError.
type MalformedError struct {
	// Field is the JSON field at fault, "" when the value as a whole is.
	Field string
	// Reason is a short human-readable explanation.
	Reason string
	newer  bool // "v" is above the versions this package knows: ErrNewerVersion
}

func (e *MalformedError) Error() string {
	if e.Field == "" {
		return ErrMalformed.Error() + ": " + e.Reason
	}
	return ErrMalformed.Error() + ": " + strconv.Quote(e.Field) + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Unwrap() error { return ErrMalformed }

// Is makes errors.Is(err, ErrNewerVersion) true for a marker of a newer
// version.
func (e *MalformedError) Is(target error) bool { return e.newer && target == ErrNewerVersion }

func malformed(field, reason string) *MalformedError {
	return &MalformedError{Field: field, Reason: reason}
}
