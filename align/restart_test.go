package align

import (
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/markers"
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
		{
			name:   "a session taking over two tasks with different histories starts each where its last transaction left it",
			topics: map[string]int32{"a": 2}, out: 2,
			run: func(t *testing.T, h *harness) {
				h.cfg.Outputs = []Output{{Partition: 0, Inputs: []TP{tp("a", 0)}}, {Partition: 1, Inputs: []TP{tp("a", 1)}}}
				h.committed[tp("a", 0)] = Offset{Metadata: commitMeta{global: phaseAt(100)}.String()}
				h.committed[tp("a", 1)] = Offset{Metadata: commitMeta{global: phaseAt(300)}.String()}
				h.restart() // task a/0 marked phases below +1, task a/1 below +3
				if got := h.s.Marked(); got != phaseAt(100) {
					t.Fatalf("Marked() = %d after the restart, want the lower task's %d", got, phaseAt(100))
				}
				h.feed(in{topic: "a", part: 0, ms: 150}) // a/0@0 +1
				h.feed(in{topic: "a", part: 1, ms: 250}) // a/1@0 +2: sealed by a/1's task already
				h.clk.add(time.Second)
				st := h.step()
				wantWrites(t, st.Batch, "quarantine late a/1@0 ->1")
				if cm, err := parseCommitMeta(offsetOf(st.Batch, tp("a", 1)).Metadata); err != nil || cm.global != phaseAt(300) {
					t.Fatalf("a/1 committed global %d (%v), want its task's %d", cm.global, err, phaseAt(300))
				}
				h.feed(in{topic: "a", part: 1, ms: 350}) // a/1@1 +3
				h.feed(in{topic: "a", part: 0, ms: 450}) // a/0@1 +4
				h.feed(in{topic: "a", part: 1, ms: 460}) // a/1@2 +4: both passed +1 to +3
				wantWrites(t, h.step().Batch, "data a/0@0 ->0", "marker +1 ->0 count=1 watermark",
					"data a/1@1 ->1", "marker +3 ->0 count=0 watermark", "marker +3 ->1 count=1 watermark")
				if got := h.s.Marked(); got != phaseAt(400) {
					t.Fatalf("Marked() = %d once +1 to +3 committed, want %d", got, phaseAt(400))
				}
			},
		},
		{
			name:   "an input marker read before the restart takes effect only once the records before it are read again",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "b", ms: 10})                                                     // b@0 +0
				h.feed(in{topic: "a", ms: 150})                                                    // a@0 +1, buffered
				h.feed(in{topic: "a", marker: &markers.Marker{Phase: phaseAt(150), Partition: 0}}) // a@1: a passed +1
				h.feed(in{topic: "b", ms: 150})                                                    // b@1 +1: seals +0
				wantWrites(t, h.step().Batch, "data b/0@0 ->0", "marker +0 ->0 count=1 watermark")
				h.restart()                     // a/0 from 0 with m=+1; b/0 from 1
				h.read(tp("b", 0))              // b@1 +1 again
				h.feed(in{topic: "b", ms: 250}) // b@2 +2: b passed +1
				h.clk.add(time.Second)
				wantNoBatch(t, h.s.Step()) // a is read again first...
				h.read(tp("a", 0))         // ...and its +1 record is not late
				wantWrites(t, h.step().Batch, "data b/0@1 ->0", "data a/0@0 ->0", "marker +1 ->0 count=2 watermark")
			},
		},
		{
			name:   "a partition idle at the last commit is idle again once its lag is known to be zero, without a second idle timeout",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10}) // b never gets a record
				h.caughtUp()
				h.clk.add(time.Second) // b idle (the harness's idle timeout), and a too
				wantWrites(t, h.step().Batch, "data a/0@0 ->0", "marker +0 ->0 count=1 idle")
				if o := h.committed[tp("b", 0)]; !strings.HasSuffix(o.Metadata, ";i=0") {
					t.Fatalf("b/0 committed %q, want i=0 (idle at last stable offset 0)", o.Metadata)
				}
				h.restart()
				h.feed(in{topic: "a", ms: 110}) // a@1 +1
				h.feed(in{topic: "a", ms: 210}) // a@2 +2: a passed +1
				h.caughtUp()
				// At once: b holds nothing back. Before, it waited a whole
				// idle timeout (issue 34: 5.6 s after a kill with 3 s).
				wantWrites(t, h.step().Batch, "data a/0@1 ->0", "marker +1 ->0 count=1 idle")
			},
		},
		{
			name:   "a transactional input idle at the last commit: the gap of its commit record is not waited for again",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				lso := func(b int64) {
					h.s.Lag(map[TP]int64{tp("a", 0): int64(len(h.log[tp("a", 0)])), tp("b", 0): b}, nil)
				}
				h.feed(in{topic: "b", ms: 10}) // b@0; b's commit record at 1: its last stable offset is 2
				h.feed(in{topic: "a", ms: 10})
				lso(2)
				h.clk.add(11 * time.Second) // the gap settles (align gapSettle), then b is idle
				lso(2)
				h.clk.add(time.Second)
				wantWrites(t, h.step().Batch, "data b/0@0 ->0", "data a/0@0 ->0", "marker +0 ->0 count=2 idle")
				if o := h.committed[tp("b", 0)]; !strings.HasSuffix(o.Metadata, ";h=1;m=-;i=2") {
					t.Fatalf("b/0 committed %q, want h=1 and i=2", o.Metadata)
				}
				h.restart()
				h.feed(in{topic: "a", ms: 110})
				h.feed(in{topic: "a", ms: 210})
				lso(2) // the same gap at the same position: no lag, idle at once
				wantWrites(t, h.step().Batch, "data a/0@1 ->0", "marker +1 ->0 count=1 idle")
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newHarness(t, c.topics, c.out))
		})
	}
}
