package watermarks

import (
	"strings"
	"testing"
	"time"
)

// TestSealTimeout: a strict pipeline with a dead branch b. The oldest open
// phase outlives the 1 min timeout (the maximum: nothing observed yet).
func TestSealTimeout(t *testing.T) {
	tests := []struct {
		name         string
		policy       Policy
		wait         time.Duration // after the first record of phase 0
		wantSeals    string
		wantGlobal   uint64
		wantTimeouts int64
		wantLate     bool // a new record of phase 0 is late
	}{
		{"wait: not yet at the timeout", PolicyWait, time.Minute, "", 0, 0, false},
		{"wait: counts once and keeps waiting", PolicyWait, 5 * time.Minute, "", 0, 1, false},
		{"seal: not yet at the timeout", PolicySeal, time.Minute, "", 0, 0, false},
		{"seal: seals with cause timeout", PolicySeal, time.Minute + time.Millisecond, "0:timeout", 1, 1, true},
		{"seal: the next phase that timed out too", PolicySeal, time.Minute + 1500*time.Millisecond, "0:timeout 2:timeout", 3, 2, true},
		{"seal: every phase that timed out", PolicySeal, 5 * time.Minute, "0:timeout 2:timeout 9:timeout", 10, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.IdleTimeout = 0; c.SealPolicy = tt.policy }, 0)
			a := h.add("a/0")
			h.add("b/0") // silent forever
			h.at(a, 500)
			h.clk.step(time.Second)
			h.at(a, 2500) // phase 2 opens 1s after phase 0
			h.clk.step(time.Second)
			h.at(a, 9500) // phase 9 opens 2s after phase 0
			for waited := 2 * time.Second; waited < tt.wait; {
				d := min(10*time.Second, tt.wait-waited)
				h.clk.step(d)
				waited += d
				h.advance()
			}
			if got := strings.Join(h.seals, " "); got != tt.wantSeals {
				t.Errorf("seals = %q, want %q", got, tt.wantSeals)
			}
			h.wantGlobal(tt.wantGlobal)
			if got := h.tr.Snapshot().Timeouts; got != tt.wantTimeouts {
				t.Errorf("Timeouts = %d, want %d", got, tt.wantTimeouts)
			}
			want := Accepted
			if tt.wantLate {
				want = Late
			}
			h.wantVerdict(h.at(a, 600), want)
		})
	}
}

// observe runs len(ds) phases through a single-partition tracker, phase i
// open for ds[i], and returns the tracker.
func observe(t *testing.T, min, max time.Duration, ds []time.Duration) *harness {
	t.Helper()
	h := newHarness(t, func(c *Config) { c.SealTimeoutMin, c.SealTimeoutMax = min, max }, 0)
	a := h.add("a/0")
	for i, d := range ds {
		ms := int64(i) * 1000
		h.at(a, ms)
		h.clk.step(d)
		h.at(a, ms+1000)
		if seals := h.advance(); len(seals) != 1 || seals[0].Sealed.Sub(seals[0].Opened) != d {
			t.Fatalf("phase %d: seals %+v, want one of duration %s", i, seals, d)
		}
	}
	return h
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestAdaptiveTimeout(t *testing.T) {
	s := time.Second
	tests := []struct {
		name     string
		min, max time.Duration
		ds       []time.Duration
		want     time.Duration
	}{
		{"nothing observed: max", s, time.Minute, nil, time.Minute},
		{"19 observed: still max", s, time.Minute, repeat(19, 2*s), time.Minute},
		{"20 observed: p99 × 1.5", s, time.Minute, repeat(20, 2*s), 3 * s},
		{"clamped to min", 10 * s, time.Minute, repeat(20, 2*s), 10 * s},
		{"clamped to max", s, time.Minute, repeat(20, time.Minute), time.Minute},
		{"one outlier in 100 is below p99", s, time.Minute, append(repeat(99, s), 10*s), 1500 * time.Millisecond},
		{"two outliers in 100 reach p99", s, time.Minute, append(repeat(98, s), 10*s, 10*s), 15 * s},
		{"only the last 256 count", s, time.Minute, append(repeat(256, 10*s), repeat(256, s)...), 1500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := observe(t, tt.min, tt.max, tt.ds)
			if got := h.tr.Snapshot().SealTimeout; got != tt.want {
				t.Errorf("SealTimeout = %s, want %s", got, tt.want)
			}
		})
	}
}

// A phase sealed by timeout is not learned from: otherwise each timeout would
// raise the next one by half.
func TestTimeoutSealsAreNotObserved(t *testing.T) {
	h := observe(t, time.Second, time.Minute, repeat(20, 2*time.Second))
	h.tr.cfg.SealPolicy = PolicySeal
	a := h.add("a/0")
	h.add("b/0") // silent, lag unknown: never idle; holds phase 20 open
	for i := range 5 {
		h.at(a, int64(100+i)*1000)
		h.clk.step(4 * time.Second)
		h.advance()
	}
	if got := h.tr.Snapshot().SealTimeout; got != 3*time.Second {
		t.Errorf("SealTimeout = %s after 5 timeouts, want 3s", got)
	}
	if got := strings.Join(h.seals[20:], " "); got != "20:timeout 100:timeout 101:timeout 102:timeout 103:timeout 104:timeout" {
		t.Errorf("seals = %q", got)
	}
}
