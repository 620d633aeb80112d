package watermarks

import (
	"strings"
	"testing"
	"time"
)

// TestSealing runs one scenario per rule of doc.go invariants 1-3 and checks
// every seal Advance returned ("phase:cause") and the final global watermark.
// Scenarios check intermediate states with h.want* where the rule is about
// what must not happen yet.
func TestSealing(t *testing.T) {
	tests := []struct {
		name       string
		cfg        func(*Config)
		sealed     uint64 // sealedBelow given to New
		run        func(h *harness)
		wantSeals  string
		wantGlobal uint64
	}{{
		name: "watermark seals what every partition passed",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.at(a, 500)
			h.at(b, 700)
			h.at(a, 1500)
			h.advance()
			h.wantGlobal(0) // b has not passed phase 0
			h.at(b, 2100)
			h.advance()
		},
		wantSeals:  "0:watermark",
		wantGlobal: 1, // phase 1 stays open: a is still in it
	}, {
		name: "out-of-orderness holds the partition watermark back",
		cfg:  func(c *Config) { c.MaxOutOfOrderness = 200 * time.Millisecond },
		run: func(h *harness) {
			a := h.add("a/0")
			h.at(a, 500)
			h.at(a, 1100) // time watermark 900: phase 0 not yet passed
			h.advance()
			h.wantGlobal(0)
			h.wantVerdict(h.at(a, 950), Accepted) // still in the bound
			h.at(a, 1200)                         // time watermark 1000 passes phase 0
			h.advance()
		},
		wantSeals:  "0:watermark",
		wantGlobal: 1,
	}, {
		name: "idle partition is sealed past after the idle timeout",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.tr.Lag(a, 0)
			h.tr.Lag(b, 0)
			h.at(b, 100)
			h.at(a, 200)
			h.at(a, 3500)
			h.clk.step(4 * time.Second)
			h.at(a, 4500)
			h.advance()
			h.wantGlobal(0) // b quiet for 4s only
			h.clk.step(time.Second)
			h.advance() // b quiet for 5s: idle; a has Low 4
		},
		wantSeals:  "0:idle 3:idle",
		wantGlobal: 4,
	}, {
		name: "strict mode waits forever for a silent partition",
		cfg:  func(c *Config) { c.IdleTimeout = 0 },
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.tr.Lag(a, 0)
			h.tr.Lag(b, 0)
			h.at(b, 100)
			for i := range 100 {
				h.clk.step(time.Minute)
				h.at(a, int64(i)*1000+500)
				h.advance()
			}
		},
		wantSeals:  "",
		wantGlobal: 0,
	}, {
		name: "partition with lag above zero is never idle",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.tr.Lag(a, 0)
			h.tr.Lag(b, 3)
			h.at(b, 100)
			h.at(a, 3500)
			h.clk.step(time.Hour)
			h.advance()
		},
		wantSeals:  "",
		wantGlobal: 0,
	}, {
		name: "partition with unknown lag is never idle",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.tr.Lag(a, 0)
			h.at(b, 100)
			h.at(a, 3500)
			h.clk.step(time.Hour)
			h.advance()
			h.tr.Lag(b, -1) // unknown again
			h.clk.step(time.Hour)
			h.advance()
		},
		wantSeals:  "",
		wantGlobal: 0,
	}, {
		name: "paused time does not count toward idleness",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.tr.Lag(a, 0)
			h.tr.Lag(b, 0)
			h.at(b, 5500) // b ahead: Low 5
			h.at(a, 500)
			h.advance()
			h.tr.Pause(b, "operator")
			h.clk.step(20 * time.Second)
			h.at(a, 9500) // a passes b; G reaches b, which is resumed
			h.advance()
			h.wantGlobal(5)
			if st := h.state(b); st.Paused || st.PausedFor != 20*time.Second {
				h.t.Errorf("b: Paused=%v PausedFor=%s, want running after 20s paused", st.Paused, st.PausedFor)
			}
			h.clk.step(4 * time.Second)
			h.at(a, 9600)
			h.advance()
			h.wantGlobal(5) // b quiet for 4s of unpaused time only
			h.clk.step(time.Second)
			h.at(a, 9700)
			h.advance()
		},
		wantSeals:  "0:watermark 5:idle",
		wantGlobal: 9,
	}, {
		name: "record after idle is late and makes the partition live",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.tr.Lag(a, 0)
			h.tr.Lag(b, 0)
			h.at(b, 100)
			h.at(a, 300)
			h.at(a, 3500)
			h.clk.step(5 * time.Second)
			h.at(a, 4100)
			h.advance()
			h.wantGlobal(4)
			if !h.state(b).Idle {
				h.t.Errorf("b not idle after 5s quiet")
			}
			h.wantVerdict(h.at(b, 200), Late)
			if h.state(b).Idle {
				h.t.Errorf("b still idle after a record")
			}
			h.wantVerdict(h.at(b, 4200), Accepted)
			h.at(a, 6000)
			h.advance() // b is live again with Low 0: G holds at 4
		},
		wantSeals:  "0:idle 3:idle",
		wantGlobal: 4,
	}, {
		name: "when every partition is idle every open phase seals, the newest too",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.tr.Lag(a, 0)
			h.tr.Lag(b, 0)
			h.at(a, 2500)
			h.at(b, 4500)
			h.clk.step(5 * time.Second)
			h.advance()
		},
		wantSeals:  "2:idle 4:idle", // no partition has a record to give
		wantGlobal: 5,
	}, {
		name: "markers seal before the watermark",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.at(a, 500)
			h.at(b, 600)
			h.tr.Marker(a, 0)
			h.advance()
			h.wantGlobal(0)
			h.tr.Marker(b, 0)
			h.tr.Marker(b, 0) // a repeat changes nothing
			h.advance()
		},
		wantSeals:  "0:markers",
		wantGlobal: 1,
	}, {
		name: "marker on one partition and watermark on another is cause watermark",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.at(a, 500)
			h.at(b, 600)
			h.at(a, 1500)
			h.tr.Marker(b, 0)
			h.advance()
		},
		wantSeals:  "0:watermark",
		wantGlobal: 1,
	}, {
		name: "header phases pass lower phases and leave the time watermark alone",
		run: func(h *harness) {
			a, b := h.add("a/0"), h.add("b/0")
			h.hdr(a, 7)
			h.hdr(b, 7)
			h.advance()
			h.wantGlobal(7)
			h.tr.Record(a, Rec{Phase: 8, EventMs: 10_000_000, Bytes: 10})
			if got := h.tr.Low(a); got != 8 {
				h.t.Errorf("Low(a) = %d after header phase 8 with a large timestamp, want 8", got)
			}
			h.hdr(b, 9)
			h.advance()
			h.wantVerdict(h.hdr(a, 3), Late)
		},
		wantSeals:  "7:watermark",
		wantGlobal: 8,
	}, {
		name:   "restart from sealedBelow",
		sealed: 100,
		run: func(h *harness) {
			a := h.add("a/0")
			if got := h.tr.Low(a); got != 100 {
				h.t.Errorf("Low(a) = %d, want 100", got)
			}
			h.wantVerdict(h.at(a, 50_500), Late)
			h.wantVerdict(h.at(a, 100_500), Accepted)
			h.advance()
			h.wantGlobal(100)
			h.at(a, 101_500)
			h.advance()
		},
		wantSeals:  "100:watermark",
		wantGlobal: 101,
	}, {
		name:   "no partitions: Advance changes nothing",
		sealed: 5,
		run: func(h *harness) {
			h.clk.step(time.Hour)
			h.advance()
		},
		wantSeals:  "",
		wantGlobal: 5,
	}, {
		name: "empty phases are sealed silently",
		run: func(h *harness) {
			a := h.add("a/0")
			h.at(a, 500)
			h.at(a, 7500)
			h.advance()
		},
		wantSeals:  "0:watermark",
		wantGlobal: 7,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.cfg, tt.sealed)
			tt.run(h)
			if got := strings.Join(h.seals, " "); got != tt.wantSeals {
				t.Errorf("seals = %q, want %q", got, tt.wantSeals)
			}
			h.wantGlobal(tt.wantGlobal)
		})
	}
}

func TestAddIsIdempotent(t *testing.T) {
	h := newHarness(t, nil, 3)
	a := h.add("a/0")
	b := h.add("a/1")
	if again := h.add("a/0"); again != a || a == b {
		t.Fatalf("Add handles: a=%d b=%d a again=%d", a, b, again)
	}
	if topic, part := h.tr.Partition(b); topic != "a" || part != 1 {
		t.Errorf("Partition(b) = %s/%d, want a/1", topic, part)
	}
	if h.tr.Len() != 2 {
		t.Errorf("Len() = %d, want 2", h.tr.Len())
	}
}

func TestLateAddStartsAtGlobal(t *testing.T) {
	h := newHarness(t, nil, 0)
	a := h.add("a/0")
	h.at(a, 500)
	h.at(a, 4700)
	h.advance()
	b := h.add("b/0")
	st := h.state(b)
	if st.Low != 4 || st.TimeWatermarkMs != 4700 || st.LagKnown {
		t.Errorf("new partition: Low=%d TimeWatermarkMs=%d LagKnown=%v, want 4, 4700, false",
			st.Low, st.TimeWatermarkMs, st.LagKnown)
	}
}

func TestSealContents(t *testing.T) {
	h := newHarness(t, nil, 0)
	a, b := h.add("a/0"), h.add("b/0")
	opened := h.clk.Now()
	h.sized(a, 100, 7)
	h.clk.step(time.Second)
	h.sized(b, 200, 5)
	h.sized(b, 300, 6)
	h.at(a, 1100)
	h.at(b, 1200)
	h.clk.step(time.Second)
	seals := h.advance()
	if len(seals) != 1 {
		t.Fatalf("got %d seals, want 1", len(seals))
	}
	s := seals[0]
	if s.Phase != 0 || s.Records != 3 || s.Bytes != 18 || !s.Opened.Equal(opened) ||
		!s.Sealed.Equal(h.clk.Now()) || s.WatermarkMs != 1100 {
		t.Errorf("seal = %+v", s)
	}
	snap := h.tr.Snapshot()
	if snap.BufferedBytes != 20 || len(snap.Open) != 1 || snap.Open[0].Phase != 1 || snap.Open[0].Records != 2 {
		t.Errorf("after seal: BufferedBytes=%d Open=%+v, want 20 bytes in phase 1", snap.BufferedBytes, snap.Open)
	}
	if pa := snap.Partitions[a]; pa.BufferedRecords != 1 || pa.BufferedBytes != 10 {
		t.Errorf("a buffers %d records, %d bytes; want 1, 10", pa.BufferedRecords, pa.BufferedBytes)
	}
}

// WasIdle: a partition that was idle when its position was committed is
// idle again as soon as its lag is known to be zero, not IdleTimeout
// later; not while its lag is unknown or above zero, nor once a record
// came (issue 34: a restart waited the whole idle timeout again).
func TestWasIdle(t *testing.T) {
	h := newHarness(t, nil, 0)
	a, b, c := h.add("a/0"), h.add("a/1"), h.add("a/2")
	for _, p := range []P{a, b, c} {
		h.tr.WasIdle(p)
	}
	h.advance()
	if h.tr.Idle(a) {
		t.Fatal("idle before its lag is known")
	}
	h.tr.Lag(a, 0)
	h.tr.Lag(b, 3)
	h.at(c, 500)
	h.tr.Lag(c, 0)
	h.advance()
	if !h.tr.Idle(a) || h.tr.Idle(b) || h.tr.Idle(c) {
		t.Fatalf("idle: a %v (lag 0), b %v (lag 3), c %v (a record came); want true, false, false", h.tr.Idle(a), h.tr.Idle(b), h.tr.Idle(c))
	}
	h.clk.step(5 * time.Second)
	h.advance()
	if !h.tr.Idle(c) {
		t.Fatal("c not idle after IdleTimeout of quiet")
	}
}
