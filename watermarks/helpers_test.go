package watermarks

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// clock is a fake clock that moves only when a test steps it.
type clock struct{ now time.Time }

func newClock() *clock                           { return &clock{now: time.Unix(1_700_000_000, 0)} }
func (c *clock) Now() time.Time                  { return c.now }
func (c *clock) step(d time.Duration)            { c.now = c.now.Add(d) }
func (c *clock) since(t time.Time) time.Duration { return c.now.Sub(t) }

// baseConfig is the configuration scenario tests start from: phases of one
// second, no out-of-orderness, idle after 5 s, and a seal timeout of 1 min
// (the maximum, until 20 phases were observed) that the scenarios only reach
// on purpose.
func baseConfig(c *clock) Config {
	return Config{
		PhaseLength:       time.Second,
		MaxOutOfOrderness: 0,
		IdleTimeout:       5 * time.Second,
		MaxBufferBytes:    1 << 30,
		SealTimeoutMin:    10 * time.Second,
		SealTimeoutMax:    time.Minute,
		SealPolicy:        PolicyWait,
		Now:               c.Now,
	}
}

// harness drives one tracker with a fake clock and collects what a scenario
// observes: the seals of every Advance as "phase:cause" words.
type harness struct {
	t     *testing.T
	clk   *clock
	tr    *Tracker
	seals []string
}

func newHarness(t *testing.T, mod func(*Config), sealedBelow uint64) *harness {
	t.Helper()
	clk := newClock()
	cfg := baseConfig(clk)
	if mod != nil {
		mod(&cfg)
	}
	tr, err := New(cfg, sealedBelow)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &harness{t: t, clk: clk, tr: tr}
}

// add registers "topic/partition" names like "a/0".
func (h *harness) add(name string) P {
	h.t.Helper()
	var topic string
	var part int32
	if _, err := fmt.Sscanf(strings.Replace(name, "/", " ", 1), "%s %d", &topic, &part); err != nil {
		h.t.Fatalf("bad partition name %q", name)
	}
	return h.tr.Add(topic, part)
}

// at records a timestamped record of 10 bytes at ms.
func (h *harness) at(p P, ms int64) Verdict {
	return h.tr.Record(p, Rec{Phase: uint64(ms / h.tr.phaseMs), EventMs: ms, Timed: true, Bytes: 10})
}

// sized records a timestamped record of the given size at ms.
func (h *harness) sized(p P, ms int64, bytes int) Verdict {
	return h.tr.Record(p, Rec{Phase: uint64(ms / h.tr.phaseMs), EventMs: ms, Timed: true, Bytes: bytes})
}

// hdr records a record whose phase came from the phasegate.phase header.
func (h *harness) hdr(p P, phase uint64) Verdict {
	return h.tr.Record(p, Rec{Phase: phase, EventMs: 1, Bytes: 10})
}

func (h *harness) advance() []Seal {
	seals := h.tr.Advance()
	for _, s := range seals {
		h.seals = append(h.seals, fmt.Sprintf("%d:%s", s.Phase, s.By))
	}
	return seals
}

// wantVerdict fails the test when a record's verdict is not want.
func (h *harness) wantVerdict(got, want Verdict) {
	h.t.Helper()
	if got != want {
		h.t.Errorf("verdict = %s, want %s", got, want)
	}
}

func (h *harness) wantGlobal(want uint64) {
	h.t.Helper()
	if got := h.tr.Global(); got != want {
		h.t.Errorf("Global() = %d, want %d", got, want)
	}
}

// actions renders Actions() as "p:pause[r1,r2] p:resume[]".
func (h *harness) actions() string {
	var out []string
	for _, a := range h.tr.Actions() {
		verb := "resume"
		if a.Pause {
			verb = "pause"
		}
		out = append(out, fmt.Sprintf("%d:%s[%s]", a.P, verb, strings.Join(a.Reasons, ",")))
	}
	return strings.Join(out, " ")
}

func (h *harness) wantActions(want string) {
	h.t.Helper()
	if got := h.actions(); got != want {
		h.t.Errorf("Actions() = %q, want %q", got, want)
	}
}

func (h *harness) state(p P) PartitionState {
	return h.tr.Snapshot().Partitions[p]
}
