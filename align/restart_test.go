package align

import (
	"strings"
	"testing"
	"time"
)

// Restarts: a new session from the committed offsets and their metadata,
// as after a crash, a rewind or a rebalance.
func TestRestart(t *testing.T) {
	cases := []struct {
		name   string
		topics map[string]int32
		out    int32
		run    func(t *testing.T, h *harness)
	}{
		{
			name:   "after a restart from the committed offsets, records read again are resolved once: published, quarantined, markers, malformed",
			topics: map[string]int32{"a": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 150})      // @0 phase +1: stays buffered
				h.feed(in{topic: "a", ms: 10})       // @1 phase +0
				h.feed(in{topic: "a", phase: "bad"}) // @2 malformed
				h.feed(in{topic: "a", ms: 160})      // @3 phase +1
				h.feed(in{topic: "a", ms: 210})      // @4 phase +2: the partition passes +0 and +1
				st := h.step()
				wantWrites(t, st.Batch, "data a/0@1 ->0", "marker +0 ->0 count=1 watermark",
					"data a/0@0 ->0", "data a/0@3 ->0", "marker +1 ->0 count=2 watermark", "quarantine malformed a/0@2 ->0")
				if o := offsetOf(st.Batch, tp("a", 0)); o.Offset != 4 {
					t.Fatalf("committed %d, want 4 (phase +2 still buffered)", o.Offset)
				}
				h.feed(in{topic: "a", ms: 20}) // @5 late
				h.clk.add(time.Second)
				wantWrites(t, h.step().Batch, "quarantine late a/0@5 ->0")
				h.restart() // from offset 4, h=6, g=+2
				h.readAll()
				h.feed(in{topic: "a", ms: 310})
				wantWrites(t, h.step().Batch, "data a/0@4 ->0", "marker +2 ->0 count=1 watermark")
				if got := h.phases(); len(got) != 3 || len(got[1]) != 2 {
					t.Errorf("phases: %v", got)
				}
				if len(h.quar) != 2 {
					t.Errorf("quarantined %q, want the malformed and the late record once each", h.quar)
				}
			},
		},
		{
			name:   "a restarted session commits nothing before it has read again up to the last committed position",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "b", ms: 10})  // b@0 phase +0
				h.feed(in{topic: "a", ms: 150}) // a@0 phase +1, buffered
				h.feed(in{topic: "a", ms: 10})  // a@1 phase +0
				h.feed(in{topic: "b", ms: 150}) // seals +0
				st := h.step()
				if o := offsetOf(st.Batch, tp("a", 0)); o.Offset != 0 || !strings.HasSuffix(o.Metadata, ";h=2;m=-") {
					t.Fatalf("a/0 committed at %d %q", o.Offset, o.Metadata)
				}
				h.restart()                   // a/0 from 0: a@1 is to be read again
				h.read(tp("b", 0))            // b is caught up
				h.feed(in{topic: "b", ms: 5}) // b@2: late, quarantined...
				h.clk.add(time.Second)
				wantNoBatch(t, h.s.Step()) // ...but not committed before a/0 is read again up to 2
				h.read(tp("a", 0))
				st = h.s.Step()
				wantWrites(t, st.Batch, "quarantine late b/0@2 ->0")
				if o := offsetOf(st.Batch, tp("a", 0)); !strings.HasSuffix(o.Metadata, ";h=2;m=-") {
					t.Errorf("a/0 metadata %q: the consumed position went back", o.Metadata)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newHarness(t, c.topics, c.out))
		})
	}
}
