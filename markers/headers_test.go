package markers

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// h builds a header from strings.
func h(k, v string) Header { return Header{Key: []byte(k), Value: []byte(v)} }

func TestInspect(t *testing.T) {
	id256 := strings.Repeat("i", MaxIDLen)
	tests := []struct {
		name string
		hs   []Header
		want Meta // seen is ignored
		err  error
	}{
		{"2/no headers: a data record without phase or id", nil, Meta{}, nil},
		{"2/foreign headers are ignored", []Header{h("traceparent", "00-abc"), h("content-type", "json")}, Meta{}, nil},
		{"2/data record: phase and id", []Header{h(HeaderPhase, "42"), h(HeaderID, "order-7")},
			Meta{HasPhase: true, Phase: 42, ID: []byte("order-7")}, nil},
		{"2/output data record: phase, id and source", []Header{h(HeaderSource, "orders/3/17"), h(HeaderPhase, "42"), h(HeaderID, "x")},
			Meta{HasPhase: true, Phase: 42, ID: []byte("x"), Source: []byte("orders/3/17")}, nil},
		{"3/marker record: marker 1 and phase", []Header{h(HeaderMarker, "1"), h(HeaderPhase, "7")},
			Meta{Marker: true, HasPhase: true, Phase: 7}, nil},
		{"3/marker header may come after phase", []Header{h(HeaderPhase, "7"), h(HeaderMarker, "1")},
			Meta{Marker: true, HasPhase: true, Phase: 7}, nil},
		{"2/id at most 256 bytes: 256 is fine", []Header{h(HeaderID, id256)}, Meta{ID: []byte(id256)}, nil},
		{"2/header names are lower case: Phasegate.Phase is foreign", []Header{h("Phasegate.Phase", "x"), h("PHASEGATE.MARKER", "2")}, Meta{}, nil},
		{"2/unknown phasegate header is ignored", []Header{h("phasegate.future", "x"), h("phasegate.future", "y")}, Meta{}, nil},
		{"2/prefix alone is foreign", []Header{h("phasegate.", "x")}, Meta{}, nil},
		{"2/quarantine reason on a record is read without error", []Header{h(HeaderReason, "late")}, Meta{}, nil},

		{"1/malformed phase header is not guessed at", []Header{h(HeaderPhase, "+42")}, Meta{}, ErrPhaseSyntax},
		{"1/empty phase header", []Header{h(HeaderPhase, "")}, Meta{}, ErrPhaseEmpty},
		{"1/phase header over 20 digits", []Header{h(HeaderPhase, "123456789012345678901")}, Meta{}, ErrPhaseTooLong},
		{"1/phase header over uint64", []Header{h(HeaderPhase, "18446744073709551616")}, Meta{}, ErrPhaseOverflow},
		{"2/marker value is 1: 0 is malformed", []Header{h(HeaderMarker, "0"), h(HeaderPhase, "1")}, Meta{}, ErrMarkerValue},
		{"2/marker value is 1: true is malformed", []Header{h(HeaderMarker, "true"), h(HeaderPhase, "1")}, Meta{}, ErrMarkerValue},
		{"2/marker value is 1: 01 is malformed", []Header{h(HeaderMarker, "01")}, Meta{}, ErrMarkerValue},
		{"2/marker value is 1: empty is malformed", []Header{{Key: []byte(HeaderMarker)}}, Meta{}, ErrMarkerValue},
		{"2/id is opaque bytes but not empty", []Header{h(HeaderPhase, "1"), h(HeaderID, "")},
			Meta{HasPhase: true, Phase: 1}, ErrIDEmpty},
		{"2/id at most 256 bytes: 257 is malformed", []Header{h(HeaderID, id256+"i")}, Meta{}, ErrIDTooLong},
		{"2/phase header repeated", []Header{h(HeaderPhase, "1"), h(HeaderPhase, "1")}, Meta{HasPhase: true, Phase: 1}, ErrHeaderRepeated},
		{"2/id header repeated", []Header{h(HeaderID, "a"), h(HeaderID, "b")}, Meta{ID: []byte("a")}, ErrHeaderRepeated},
		{"2/marker header repeated", []Header{h(HeaderMarker, "1"), h(HeaderMarker, "1")}, Meta{Marker: true}, ErrHeaderRepeated},
		{"2/source header repeated", []Header{h(HeaderSource, "a/0/0"), h(HeaderSource, "a/0/0")}, Meta{Source: []byte("a/0/0")}, ErrHeaderRepeated},
		{"2/reason header repeated", []Header{h(HeaderReason, "late"), h(HeaderReason, "late")}, Meta{}, ErrHeaderRepeated},
		{"2/repeat of a malformed header is still a repeat", []Header{h(HeaderPhase, "x"), h(HeaderPhase, "1")}, Meta{}, ErrPhaseSyntax},
		{"3/marker without phase header", []Header{h(HeaderMarker, "1")}, Meta{Marker: true}, ErrMarkerNoPhase},
		{"3.3/task header is read raw, checked by ParseTask", []Header{h(HeaderPhase, "5"), h(HeaderTask, "x")},
			Meta{HasPhase: true, Phase: 5, Task: []byte("x")}, nil},
		{"3.3/task header repeated", []Header{h(HeaderTask, "1"), h(HeaderTask, "1")}, Meta{Task: []byte("1")}, ErrHeaderRepeated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Inspect(tt.hs)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("Inspect error = %v, want %v", err, tt.err)
			}
			if !sameMeta(got, tt.want) {
				t.Fatalf("Inspect = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func sameMeta(a, b Meta) bool {
	return a.Marker == b.Marker && a.HasPhase == b.HasPhase && a.Phase == b.Phase &&
		bytes.Equal(a.ID, b.ID) && (a.ID == nil) == (b.ID == nil) &&
		bytes.Equal(a.Source, b.Source) && (a.Source == nil) == (b.Source == nil) &&
		bytes.Equal(a.Task, b.Task) && (a.Task == nil) == (b.Task == nil)
}

// TestObserveReset checks that a reused Meta forgets the previous record
// only after Reset: without it a second phasegate.phase is a repeat.
func TestObserveReset(t *testing.T) {
	var m Meta
	if err := m.Observe([]byte(HeaderPhase), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := m.Observe([]byte(HeaderPhase), []byte("2")); !errors.Is(err, ErrHeaderRepeated) {
		t.Fatalf("second phase without Reset: %v, want ErrHeaderRepeated", err)
	}
	m.Reset()
	if err := m.Observe([]byte(HeaderPhase), []byte("2")); err != nil || m.Phase != 2 {
		t.Fatalf("after Reset: phase %d, %v", m.Phase, err)
	}
}

// TestInspectIDAliases checks the documented aliasing: ID points into the
// header value, it is not a copy.
func TestInspectIDAliases(t *testing.T) {
	hs := []Header{h(HeaderID, "abc")}
	m, err := Inspect(hs)
	if err != nil {
		t.Fatal(err)
	}
	hs[0].Value[0] = 'X'
	if string(m.ID) != "Xbc" {
		t.Fatalf("ID = %q, want it to alias the header value", m.ID)
	}
}

func TestSealedByValid(t *testing.T) {
	tests := []struct {
		name string
		in   SealedBy
		want bool
	}{
		{"3/sealed_by markers", "markers", true},
		{"3/sealed_by watermark", "watermark", true},
		{"3/sealed_by idle", "idle", true},
		{"3/sealed_by timeout", "timeout", true},
		{"3/sealed_by is case-sensitive", "Idle", false},
		{"3/sealed_by empty", "", false},
		{"3/sealed_by other", "manual", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Valid(); got != tt.want {
				t.Fatalf("SealedBy(%q).Valid() = %v", tt.in, got)
			}
		})
	}
}

func TestReasonValid(t *testing.T) {
	tests := []struct {
		name string
		in   Reason
		want bool
	}{
		{"2/reason late", "late", true},
		{"2/reason malformed", "malformed", true},
		{"2/reason stale-marker", "stale-marker", true},
		{"2/reason count-mismatch", "count-mismatch", true},
		{"2/reason spelled with underscore", "stale_marker", false},
		{"2/reason empty", "", false},
		{"2/reason duplicate is not a quarantine reason", "duplicate", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Valid(); got != tt.want {
				t.Fatalf("Reason(%q).Valid() = %v", tt.in, got)
			}
		})
	}
}

func TestParseTask(t *testing.T) {
	tests := []struct {
		in   string
		want int32
		err  error
	}{
		{"0", 0, nil}, {"3", 3, nil}, {"2147483647", 2147483647, nil},
		{"", 0, ErrTask}, {"01", 0, ErrTask}, {"-1", 0, ErrTask}, {"+1", 0, ErrTask},
		{" 1", 0, ErrTask}, {"2147483648", 0, ErrTask}, {"1e3", 0, ErrTask},
	}
	for _, tt := range tests {
		t.Run("2/phasegate.task "+strconv.Quote(tt.in), func(t *testing.T) {
			got, err := ParseTask([]byte(tt.in))
			if got != tt.want || err != tt.err {
				t.Fatalf("ParseTask(%q) = %d, %v; want %d, %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}
