package markers

import (
	"math"
	"math/bits"
	"strconv"
	"time"
)

// maxPhaseDigits is the longest phasegate.phase value (MARKERS.md section 1):
// len("18446744073709551615").
const maxPhaseDigits = 20

// ParsePhase parses a phasegate.phase header value: 1 to 20 ASCII digits, no
// sign, no spaces, at most math.MaxUint64. Leading zeros are accepted (the
// spec does not forbid them, and strconv.ParseUint agrees). It never
// allocates: errors are the sentinels ErrPhaseEmpty,
// ErrPhaseTooLong (more than 20 bytes, whatever they hold),
// ErrPhaseSyntax and ErrPhaseOverflow.
// Safe for concurrent use.
func ParsePhase(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, ErrPhaseEmpty
	}
	if len(b) > maxPhaseDigits {
		return 0, ErrPhaseTooLong
	}
	var n uint64
	for i, c := range b {
		d := uint64(c) - '0'
		if d > 9 {
			return 0, ErrPhaseSyntax
		}
		// Only the 20th (and last possible) digit can overflow: 19 nines
		// fit in a uint64.
		if i == maxPhaseDigits-1 && (n > math.MaxUint64/10 || n == math.MaxUint64/10 && d > math.MaxUint64%10) {
			return 0, ErrPhaseOverflow
		}
		n = n*10 + d
	}
	return n, nil
}

// AppendPhase appends the canonical phasegate.phase value of phase (decimal,
// no leading zeros) to dst. ParsePhase(AppendPhase(nil, p)) == p.
func AppendPhase(dst []byte, phase uint64) []byte {
	return strconv.AppendUint(dst, phase, 10)
}

// PhaseOf returns floor(timestampMs / phase length in ms), the phase of a
// record without a phasegate.phase header (MARKERS.md section 1, rule 2).
// A negative timestamp (Kafka's "no timestamp" is -1) is ErrNoTimestamp; a
// phase length under one millisecond is ErrPhaseLength. Phase lengths that
// are not whole milliseconds are honoured exactly (the division is done in
// nanoseconds with a 128-bit intermediate, so it cannot overflow).
// It never allocates and is safe for concurrent use.
func PhaseOf(timestampMs int64, phaseLength time.Duration) (uint64, error) {
	if timestampMs < 0 {
		return 0, ErrNoTimestamp
	}
	if phaseLength < time.Millisecond {
		return 0, ErrPhaseLength
	}
	if phaseLength%time.Millisecond == 0 {
		return uint64(timestampMs) / uint64(phaseLength/time.Millisecond), nil
	}
	// ts*1e6 / len: the quotient is at most ts < 2^63 because len >= 1e6,
	// so hi < len and bits.Div64 cannot panic.
	hi, lo := bits.Mul64(uint64(timestampMs), uint64(time.Millisecond))
	q, _ := bits.Div64(hi, lo, uint64(phaseLength))
	return q, nil
}
