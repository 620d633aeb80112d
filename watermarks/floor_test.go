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
		{"every local partition idle: Local stays past the phases it sealed", func(t *testing.T, h *harness) {
			a := h.add("a/0")
			h.tr.Lag(a, 0)
			h.at(a, 500)
			h.clk.step(6 * time.Second)
			for i := range 2 {
				h.advance()
				if got := h.tr.Local(); !got.Idle || got.Phase != 1 {
					t.Fatalf("Advance %d: Local = %+v, want idle past phase 0, which it sealed", i+1, got)
				}
			}
			if !slices.Equal(h.seals, []string{"0:idle"}) {
				t.Fatalf("seals = %v, want phase 0 by idle", h.seals)
			}
		}},
		{"every local partition idle: Global follows the floor (nothing to give)", func(t *testing.T, h *harness) {
			a := h.add("a/0")
			h.tr.Lag(a, 0)
			h.at(a, 500)
			h.clk.step(6 * time.Second)
			h.tr.Floor(Mark{Phase: 7, Ms: 7000}, true)
			h.advance()
			h.wantGlobal(7)
			if got := h.tr.Local(); !got.Idle || got.Phase != 1 {
				t.Errorf("Local = %+v, want idle at 1: what it reports stays its own", got)
			}
			h.wantVerdict(h.at(a, 3500), Late)
			h.tr.Floor(Mark{Phase: 9, Ms: 9000}, true) // a/0 is live again: its own low holds
			h.advance()
			h.wantGlobal(7)
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

// MarkEvery (MARKERS.md 3.3, liveness): when Global moves past phases
// without a Seal, the highest sealed phase is sealed, with no records, at
// most MarkEvery after the last Seal, and never twice; never below the
// phase the tracker started at, nor while a phase is open at Global. (An
// input marker passes phases without opening one, as an idle partition
// following the floor does.)
func TestMarkEvery(t *testing.T) {
	every := func(c *Config) { c.MarkEvery = 2 * time.Second }
	cases := []struct {
		name        string
		mod         func(*Config)
		sealedBelow uint64
		run         func(h *harness)
		want        []string
	}{
		{"global passes phases silently: Global-1 after MarkEvery, once", every, 0, func(h *harness) {
			a := h.add("a/0")
			h.tr.Marker(a, 4) // 0 to 4 pass with no record
			h.advance()
			h.clk.step(2 * time.Second)
			h.advance()
			h.clk.step(2 * time.Second)
			h.advance()
		}, []string{"4:markers"}},
		{"a Seal of data restarts the clock", every, 0, func(h *harness) {
			a := h.add("a/0")
			h.at(a, 500)
			h.at(a, 1500)
			h.tr.Marker(a, 4)
			h.advance() // seals 0 and 1
			h.clk.step(time.Second)
			h.advance()
			h.clk.step(time.Second)
			h.advance()
		}, []string{"0:markers", "1:markers", "4:markers"}},
		{"an Expected phase's Seal counts too", every, 0, func(h *harness) {
			a := h.add("a/0")
			h.tr.Marker(a, 4)
			h.tr.Expect(3)
			h.advance()
			h.clk.step(2 * time.Second)
			h.advance()
		}, []string{"3:markers", "4:markers"}},
		{"nothing below the start: a task's earlier owner marked those", every, 10, func(h *harness) {
			a := h.add("a/0")
			h.tr.Marker(a, 9)
			h.clk.step(5 * time.Second)
			h.advance()
			h.tr.Marker(a, 11)
			h.advance()
			h.clk.step(2 * time.Second)
			h.advance()
		}, []string{"11:markers"}},
		{"an idle partition below: the cause is idle", every, 0, func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.tr.Lag(b, 0)
			h.tr.Marker(a, 6)
			h.clk.step(6 * time.Second) // b idle at phase 0
			h.advance()
		}, []string{"6:idle"}},
		{"none while a phase is open at Global (it may be streaming)", every, 0, func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.at(a, 5500)
			h.at(b, 5600)
			h.at(b, 6100) // a holds Global at 5, where b's record waits
			h.advance()
			h.clk.step(3 * time.Second)
			h.advance()
			h.at(a, 6500)
			h.advance()
		}, []string{"5:watermark"}},
		{"off when MarkEvery is 0", nil, 0, func(h *harness) {
			a := h.add("a/0")
			h.tr.Marker(a, 4)
			h.advance()
			h.clk.step(time.Minute)
			h.advance()
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, c.mod, c.sealedBelow)
			c.run(h)
			if !slices.Equal(h.seals, c.want) {
				t.Fatalf("seals = %v, want %v", h.seals, c.want)
			}
		})
	}
}
