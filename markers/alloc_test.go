package markers

import (
	"testing"
	"time"
)

// TestNoAllocs holds the per-record functions to the promise of doc.go:
// no allocation, on success or error.
func TestNoAllocs(t *testing.T) {
	buf := make([]byte, 0, 512)
	bad := []Header{h(HeaderPhase, "1"), h(HeaderPhase, "1")}
	var m Meta
	tests := []struct {
		name string
		fn   func()
	}{
		{"ParsePhase ok", func() { _, _ = ParsePhase([]byte("1733140800")) }},
		{"ParsePhase syntax error", func() { _, _ = ParsePhase([]byte("+1")) }},
		{"ParsePhase overflow", func() { _, _ = ParsePhase([]byte("99999999999999999999")) }},
		{"PhaseOf ok", func() { _, _ = PhaseOf(1733140800123, 1500*time.Microsecond) }},
		{"PhaseOf no timestamp", func() { _, _ = PhaseOf(-1, time.Second) }},
		{"Inspect ok", func() { _, _ = Inspect(benchHeaders) }},
		{"Inspect repeated header", func() { _, _ = Inspect(bad) }},
		{"Observe and Check", func() {
			m.Reset()
			for _, hd := range benchHeaders {
				_ = m.Observe(hd.Key, hd.Value)
			}
			_ = m.Check()
		}},
		{"AppendIdentity id", func() { buf = AppendIdentity(buf[:0], []byte("order-7"), "orders", 3, 17) }},
		{"AppendIdentity derived", func() { buf = AppendIdentity(buf[:0], nil, "orders", 3, 17) }},
		{"AppendSource", func() { buf = AppendSource(buf[:0], "orders", 3, 17) }},
		{"AppendPhase", func() { buf = AppendPhase(buf[:0], 1733140800) }},
		{"ParseTask ok", func() { _, _ = ParseTask([]byte("17")) }},
		{"ParseTask error", func() { _, _ = ParseTask([]byte("017")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, tt.fn); n != 0 {
				t.Fatalf("%s allocates %.1f times per call", tt.name, n)
			}
		})
	}
}
