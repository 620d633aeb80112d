package markers

import (
	"errors"
	"strconv"
	"strings"
)

// ViolationKind is the rule of MARKERS.md section 3.2 (or 3.3, rules M1 to
// M8, on a partition with several writers) a Reader saw broken.
type ViolationKind int

// The kinds of Violation. The zero value is not a kind.
const (
	// CountMismatch: a marker's count differs from the data records of its
	// phase read since the previous marker. Want is the count, Got the
	// records read.
	CountMismatch ViolationKind = iota + 1
	// PhaseBackwards: a marker not above the previous marker, a data record
	// below the pending data's phase, or a marker below the pending data's
	// phase. Prior is the phase it went back from.
	PhaseBackwards
	// DataAfterMarker: a data record of phase N after a marker for a phase
	// >= N. Prior is that marker's phase.
	DataAfterMarker
	// MissingMarker: data of phase N was followed by data or a marker of a
	// higher phase, or by the end, with no marker for N between. Phase is
	// N; Got is the number of its data records, which the reader discarded.
	MissingMarker
	// Malformed: a record breaks the shape rules (headers, key, JSON value,
	// partition). Err, when set, is the underlying error.
	Malformed
	// DuplicateID: a phasegate.id seen twice in one phase on the partition.
	DuplicateID
)

func (k ViolationKind) String() string {
	switch k {
	case CountMismatch:
		return "count-mismatch"
	case PhaseBackwards:
		return "phase-backwards"
	case DataAfterMarker:
		return "data-after-marker"
	case MissingMarker:
		return "missing-marker"
	case Malformed:
		return "malformed"
	case DuplicateID:
		return "duplicate-id"
	}
	return "ViolationKind(" + itoa(int64(k)) + ")"
}

// Violation is one broken rule of MARKERS.md section 3.2, found by a Reader
// on one partition.
type Violation struct {
	Kind      ViolationKind
	Partition int32
	// Offset is the offset of the record that revealed the violation; for
	// a MissingMarker found by End, the offset of the phase's last record.
	Offset int64
	// Phase is the phase the violation concerns (see each kind); 0 when a
	// Malformed record's phase could not be read.
	Phase uint64
	// Prior is the phase a PhaseBackwards or DataAfterMarker record went
	// back from.
	Prior     uint64
	Want, Got int64 // CountMismatch: marker count and records read; MissingMarker: Got only
	// Task is the writer (lane) the violation concerns on a partition with
	// several writers (MARKERS.md section 3.3), when HasTask.
	Task    int32
	HasTask bool
	Detail  string // human-readable specifics
	Err     error  // the underlying error of a Malformed violation, or nil
}

func (v *Violation) Error() string {
	var b strings.Builder
	b.WriteString("markers: partition ")
	b.WriteString(itoa(int64(v.Partition)))
	b.WriteString(" offset ")
	b.WriteString(itoa(v.Offset))
	b.WriteString(" phase ")
	b.WriteString(strconv.FormatUint(v.Phase, 10))
	if v.HasTask {
		b.WriteString(" task ")
		b.WriteString(itoa(int64(v.Task)))
	}
	b.WriteString(": ")
	b.WriteString(v.Kind.String())
	switch v.Kind {
	case CountMismatch:
		b.WriteString(": marker count " + itoa(v.Want) + ", read " + itoa(v.Got))
	case MissingMarker:
		b.WriteString(": " + itoa(v.Got) + " records discarded")
	}
	if v.Detail != "" {
		b.WriteString(": ")
		b.WriteString(v.Detail)
	}
	if v.Err != nil {
		b.WriteString(": ")
		b.WriteString(v.Err.Error())
	}
	return b.String()
}

// Unwrap returns Err, so errors.As finds a *MalformedError through a
// Malformed violation and errors.Is finds the header sentinels.
func (v *Violation) Unwrap() error { return v.Err }

// Violations returns every *Violation in err: err itself, or the members of
// an errors.Join as returned by Reader.Feed, in order. It returns nil for
// nil.
func Violations(err error) []*Violation {
	var out []*Violation
	var walk func(error)
	walk = func(err error) {
		if v, ok := err.(*Violation); ok {
			out = append(out, v)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// joinViolations returns nil, the only violation, or all of them joined.
func joinViolations(vs []*Violation) error {
	switch len(vs) {
	case 0:
		return nil
	case 1:
		return vs[0]
	}
	errs := make([]error, len(vs))
	for i, v := range vs {
		errs[i] = v
	}
	return errors.Join(errs...)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
