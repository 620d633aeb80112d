package markers

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"
)

func TestParsePhase(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want uint64
		err  error
	}{
		{"1/phase header: single digit", "0", 0, nil},
		{"1/phase header: decimal ASCII", "42", 42, nil},
		{"1/phase IDs are uint64: max", "18446744073709551615", math.MaxUint64, nil},
		{"1/phase header: 20 digits with leading zeros", "00000000000000000042", 42, nil},
		{"1/phase IDs are uint64: max+1 overflows", "18446744073709551616", 0, ErrPhaseOverflow},
		{"1/phase IDs are uint64: 20 nines overflow", "99999999999999999999", 0, ErrPhaseOverflow},
		{"1/phase header: at most 20 digits", "000000000000000000042", 0, ErrPhaseTooLong},
		{"1/phase header: empty", "", 0, ErrPhaseEmpty},
		{"1/phase header: no leading +", "+42", 0, ErrPhaseSyntax},
		{"1/phase header: no sign", "-42", 0, ErrPhaseSyntax},
		{"1/phase header: no leading space", " 42", 0, ErrPhaseSyntax},
		{"1/phase header: no trailing space", "42 ", 0, ErrPhaseSyntax},
		{"1/phase header: no trailing newline", "42\n", 0, ErrPhaseSyntax},
		{"1/phase header: no underscore", "4_2", 0, ErrPhaseSyntax},
		{"1/phase header: no hex", "0x2a", 0, ErrPhaseSyntax},
		{"1/phase header: no fraction", "4.2", 0, ErrPhaseSyntax},
		{"1/phase header: no exponent", "4e2", 0, ErrPhaseSyntax},
		{"1/phase header: ASCII only", "４２", 0, ErrPhaseSyntax},
		{"1/phase header: bytes just outside 0-9", "/:", 0, ErrPhaseSyntax},
		{"1/phase header: syntax in 20th digit", "1844674407370955161x", 0, ErrPhaseSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePhase([]byte(tt.in))
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("ParsePhase(%q) error = %v, want %v", tt.in, err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("ParsePhase(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestAppendPhase(t *testing.T) {
	tests := []struct {
		name string
		in   uint64
		want string
	}{
		{"1/phase header: zero", 0, "0"},
		{"1/phase header: canonical decimal", 1733140800, "1733140800"},
		{"1/phase IDs are uint64: max is 20 digits", math.MaxUint64, "18446744073709551615"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendPhase([]byte("x="), tt.in)
			if string(got) != "x="+tt.want {
				t.Fatalf("AppendPhase = %q, want %q", got, "x="+tt.want)
			}
			back, err := ParsePhase(got[2:])
			if err != nil || back != tt.in {
				t.Fatalf("ParsePhase(AppendPhase(%d)) = %d, %v", tt.in, back, err)
			}
		})
	}
}

func TestPhaseOf(t *testing.T) {
	tests := []struct {
		name   string
		ts     int64
		length time.Duration
		want   uint64
		err    error
	}{
		{"1/timestamp phase: epoch", 0, time.Second, 0, nil},
		{"1/timestamp phase: last ms of phase 0", 999, time.Second, 0, nil},
		{"1/timestamp phase: first ms of phase 1", 1000, time.Second, 1, nil},
		{"1/timestamp phase: floor of ts/length", 1733140800123, time.Second, 1733140800, nil},
		{"1/timestamp phase: minutes", 1733140800123, time.Minute, 28885680, nil},
		{"1/timestamp phase: 1ms phases", 1733140800123, time.Millisecond, 1733140800123, nil},
		{"1/timestamp phase: max timestamp", math.MaxInt64, time.Millisecond, math.MaxInt64, nil},
		{"1/timestamp phase: length not whole ms", 3, 1500 * time.Microsecond, 2, nil},
		{"1/timestamp phase: length not whole ms, just below boundary", 2, 1500 * time.Microsecond, 1, nil},
		{"1/timestamp phase: length not whole ms, max timestamp", math.MaxInt64, 1500 * time.Microsecond, math.MaxInt64 / 3 * 2, nil},
		{"1/timestamp phase: Kafka no-timestamp -1", -1, time.Second, 0, ErrNoTimestamp},
		{"1/timestamp phase: negative timestamp", math.MinInt64, time.Second, 0, ErrNoTimestamp},
		{"1/timestamp phase: zero length", 1000, 0, 0, ErrPhaseLength},
		{"1/timestamp phase: sub-ms length", 1000, time.Millisecond - 1, 0, ErrPhaseLength},
		{"1/timestamp phase: negative length", 1000, -time.Second, 0, ErrPhaseLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PhaseOf(tt.ts, tt.length)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("PhaseOf(%d, %v) error = %v, want %v", tt.ts, tt.length, err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("PhaseOf(%d, %v) = %d, want %d", tt.ts, tt.length, got, tt.want)
			}
		})
	}
}

// TestPhaseOfBoundaries checks, for several lengths, that every phase
// starts exactly at a multiple of the length and the ms before it belongs
// to the previous phase.
func TestPhaseOfBoundaries(t *testing.T) {
	for _, length := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 1500 * time.Microsecond, time.Second, time.Hour} {
		t.Run(length.String(), func(t *testing.T) {
			for n := uint64(1); n < 50; n++ {
				startNs := n * uint64(length)
				startMs := int64((startNs + uint64(time.Millisecond) - 1) / uint64(time.Millisecond)) // first whole ms in phase n
				if got, _ := PhaseOf(startMs, length); got != n {
					t.Fatalf("PhaseOf(%d) = %d, want %d", startMs, got, n)
				}
				if got, _ := PhaseOf(startMs-1, length); got != n-1 {
					t.Fatalf("PhaseOf(%d) = %d, want %d", startMs-1, got, n-1)
				}
			}
		})
	}
}

// TestParsePhaseAgreesWithStrconv runs every 1- and 2-byte input and the
// strings around the uint64 limit through ParsePhase and strconv.ParseUint.
func TestParsePhaseAgreesWithStrconv(t *testing.T) {
	var inputs []string
	for a := 0; a < 256; a++ {
		inputs = append(inputs, string([]byte{byte(a)}))
		for b := 0; b < 256; b++ {
			inputs = append(inputs, string([]byte{byte(a), byte(b)}))
		}
	}
	for d := uint64(0); d < 20; d++ {
		inputs = append(inputs, strconv.FormatUint(math.MaxUint64-d, 10), "1844674407370955162"+strconv.FormatUint(d%10, 10))
	}
	for _, in := range inputs {
		got, err := ParsePhase([]byte(in))
		want, werr := strconv.ParseUint(in, 10, 64)
		if (err == nil) != (werr == nil) || err == nil && got != want {
			t.Fatalf("ParsePhase(%q) = %d, %v; strconv: %d, %v", in, got, err, want, werr)
		}
	}
}
