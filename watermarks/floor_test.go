package watermarks

import (
	"slices"
	"testing"
	"time"
)

// Floor: trackers that share one global watermark cap each other.
func TestFloor(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"nothing at or above the floor seals; Local shows the uncapped candidate", func(t *testing.T, h *harness) {
			a := h.add("a/0")
			h.at(a, 500)
			h.at(a, 3500) // passes phases 0..2
			h.tr.Floor(Mark{Phase: 1, Ms: 1000}, true)
			h.advance()
			if !slices.Equal(h.seals, []string{"0:watermark"}) {
				t.Fatalf("seals = %v, want only phase 0 (the floor is 1)", h.seals)
			}
			h.wantGlobal(1)
			if got := h.tr.GlobalMs(); got != 1000 {
				t.Errorf("GlobalMs = %d, want the floor's 1000", got)
			}
			if got := h.tr.Local(); got != (Mark{Phase: 3, Ms: 3500}) {
				t.Errorf("Local = %+v, want {3 3500 false}", got)
			}
			h.tr.Floor(Mark{}, false)
			h.advance()
			h.wantGlobal(3)
		}},
		{"a floor below Global never lowers it", func(t *testing.T, h *harness) {
			a := h.add("a/0")
			h.at(a, 2500)
			h.advance()
			h.wantGlobal(2)
			h.tr.Floor(Mark{Phase: 0, Ms: 0}, true)
			h.advance()
			h.wantGlobal(2)
			h.wantVerdict(h.at(a, 1500), Late)
		}},
		{"all local partitions idle: Local says so and the floor still caps the last phases", func(t *testing.T, h *harness) {
			a := h.add("a/0")
			h.tr.Lag(a, 0)
			h.at(a, 500)
			h.at(a, 1500)
			h.clk.step(6 * time.Second)
			h.tr.Floor(Mark{Phase: 1, Ms: 1000}, true)
			h.advance()
			if got := h.tr.Local(); !got.Idle || got.Phase != 2 {
				t.Errorf("Local = %+v, want idle past the newest open phase (2)", got)
			}
			if !slices.Equal(h.seals, []string{"0:watermark"}) {
				t.Fatalf("seals = %v, want phase 0 only (1 is held by the floor)", h.seals)
			}
		}},
		{"backpressure pauses every local partition ahead of the capped global watermark", func(t *testing.T, h *harness) {
			a, b := h.add("a/0"), h.add("a/1")
			h.sized(a, 1500, 600)
			h.sized(b, 2500, 600)
			h.tr.Floor(Mark{Phase: 0, Ms: 0}, true) // another tracker's partition holds phase 0
			h.advance()
			h.wantActions("0:pause[buffer] 1:pause[buffer]")
			h.tr.Floor(Mark{}, false)
			h.advance()
			h.wantActions("0:resume[]") // a/0 holds the minimum now
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newHarness(t, func(cfg *Config) { cfg.MaxBufferBytes = 2000 }, 0))
		})
	}
}

// Expect: a phase another tracker holds data of seals here too, with no
// records, in order with this tracker's own phases.
func TestExpect(t *testing.T) {
	h := newHarness(t, nil, 0)
	a := h.add("a/0")
	h.at(a, 2500) // phase 2, passes 0 and 1
	h.tr.Expect(1)
	h.tr.Expect(1) // idempotent
	if got := h.tr.DataPhases(nil, 10); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("DataPhases = %v, want [2] (1 is only expected)", got)
	}
	seals := h.advance()
	if len(seals) != 1 || seals[0].Phase != 1 || seals[0].Records != 0 {
		t.Fatalf("seals = %+v, want phase 1 with no records", seals)
	}
	h.tr.Expect(0) // below Global: already sealed, ignored
	h.at(a, 3500)
	h.advance()
	if !slices.Equal(h.seals, []string{"1:watermark", "2:watermark"}) {
		t.Fatalf("seals = %v", h.seals)
	}
}
