package watermarks

import (
	"testing"
	"time"
)

// TestBackpressure: a (behind, holds the minimum) and b (ahead), bound 1000
// bytes: pause from 500, resume at 250.
func TestBackpressure(t *testing.T) {
	bounded := func(c *Config) { c.MaxBufferBytes = 1000 }
	tests := []struct {
		name string
		run  func(h *harness, a, b P)
	}{{
		name: "below half nothing is paused",
		run: func(h *harness, a, b P) {
			h.sized(a, 500, 100)
			h.sized(b, 3500, 399)
			h.advance()
			h.wantActions("")
		},
	}, {
		name: "at half the partition ahead is paused, never the minimum holder",
		run: func(h *harness, a, b P) {
			h.sized(a, 500, 400)
			h.sized(b, 3500, 100)
			h.advance()
			h.wantActions("1:pause[buffer]")
			if st := h.state(a); st.Paused || len(st.Reasons) != 0 {
				h.t.Errorf("a holds the minimum: Paused=%v Reasons=%v", st.Paused, st.Reasons)
			}
		},
	}, {
		name: "between a quarter and half the pause holds",
		run: func(h *harness, a, b P) {
			h.sized(a, 500, 240)
			h.sized(b, 3500, 260)
			h.advance()
			h.wantActions("1:pause[buffer]")
			h.sized(a, 1500, 0)
			h.advance() // phase 0 sealed: 260 bytes left, above a quarter
			h.wantGlobal(1)
			h.wantActions("")
			if !h.state(b).Paused {
				h.t.Errorf("b resumed at 260 bytes")
			}
		},
	}, {
		name: "held bytes of sealed phases count toward the bound until released",
		run: func(h *harness, a, b P) {
			h.sized(a, 500, 100)
			h.sized(b, 3500, 100)
			h.tr.Hold(300) // sealed phases waiting for or in a transaction
			h.advance()
			h.wantActions("1:pause[buffer]")
			h.tr.Hold(-300)
			h.advance()
			h.wantActions("1:resume[]")
		},
	}, {
		name: "at a quarter the partition ahead resumes",
		run: func(h *harness, a, b P) {
			h.sized(a, 500, 250)
			h.sized(b, 3500, 250)
			h.advance()
			h.wantActions("1:pause[buffer]")
			h.sized(a, 1500, 0)
			h.advance()
			h.wantActions("1:resume[]")
		},
	}, {
		name: "a paused partition that G reaches is resumed at once",
		run: func(h *harness, a, b P) {
			h.sized(a, 500, 100)
			h.sized(b, 3500, 900)
			h.advance()
			h.wantActions("1:pause[buffer]")
			h.sized(a, 3600, 0) // a passes b: G = 3 = Low(b)
			h.advance()
			h.wantGlobal(3)
			h.wantActions("1:resume[]") // still 900 bytes buffered
		},
	}, {
		name: "a formerly idle partition that comes back behind runs",
		run: func(h *harness, a, b P) {
			h.tr.Lag(a, 0)
			h.tr.Lag(b, 0)
			h.sized(a, 500, 10)
			h.clk.step(3 * time.Second)
			h.sized(b, 3500, 10)
			h.clk.step(3 * time.Second)
			h.advance() // a idle: G = 3
			h.wantGlobal(3)
			h.sized(b, 4500, 600) // b ahead while a was away
			h.wantVerdict(h.sized(a, 600, 10), Late)
			h.advance()
			h.wantActions("1:pause[buffer]")
			if st := h.state(a); st.Paused || st.Low > h.tr.Global() {
				h.t.Errorf("a behind at Low %d (G %d): Paused=%v", st.Low, h.tr.Global(), st.Paused)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, bounded, 0)
			tt.run(h, h.add("a/0"), h.add("b/0"))
		})
	}
}

func TestExternalPause(t *testing.T) {
	h := newHarness(t, nil, 0)
	a, b := h.add("a/0"), h.add("b/0")
	h.at(a, 500)
	h.at(b, 3500)
	h.advance()

	h.tr.Pause(a, "operator") // a holds the minimum: deferred
	h.wantActions("")
	if st := h.state(a); st.Paused || len(st.Reasons) != 1 {
		t.Errorf("a: Paused=%v Reasons=%v, want deferred operator request", st.Paused, st.Reasons)
	}
	h.tr.Pause(b, "rebalance")
	h.tr.Pause(b, "operator")
	h.tr.Pause(b, "operator")
	h.wantActions("1:pause[operator,rebalance]")
	h.tr.Resume(b, "rebalance")
	h.tr.Resume(b, "never-requested")
	h.wantActions("") // still paused by the operator

	h.clk.step(7 * time.Second)
	h.at(a, 5500) // a passes b: b holds the minimum, a is ahead
	h.advance()
	h.wantGlobal(3)
	h.wantActions("0:pause[operator] 1:resume[operator]")
	if got := h.state(b).PausedFor; got != 7*time.Second {
		t.Errorf("b PausedFor = %s, want 7s", got)
	}
	h.clk.step(2 * time.Second)
	if got := h.state(a).PausedFor; got != 2*time.Second {
		t.Errorf("a PausedFor = %s while paused, want 2s", got)
	}
	h.tr.Resume(a, "operator")
	h.tr.Pause(a, "operator")
	h.tr.Resume(a, "operator")
	h.wantActions("0:resume[]") // net change only
	h.tr.Pause(a, "operator")
	h.tr.Resume(a, "operator")
	h.wantActions("") // paused and resumed between calls: no net change
}
