package align

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/watermarks"
)

// The phase life, one case per path, with a fake clock and no broker.

func wantWrites(t *testing.T, b *Batch[string], want ...string) {
	t.Helper()
	if b == nil {
		t.Fatalf("no Batch; want %q", want)
	}
	if got := writes(b); !slices.Equal(got, want) {
		t.Fatalf("Batch writes:\n  got  %q\n  want %q", got, want)
	}
}

func wantNoBatch(t *testing.T, st Step[string]) {
	t.Helper()
	if st.Batch != nil {
		t.Fatalf("unexpected Batch: %q", writes(st.Batch))
	}
}

func wantOutcome(t *testing.T, got Outcome, kind Kind, reason markers.Reason) {
	t.Helper()
	if got.Kind != kind || got.Reason != reason {
		t.Fatalf("outcome = %s %q (%s), want %s %q", got.Kind, got.Reason, got.Why, kind, reason)
	}
}

func offsetOf(b *Batch[string], k TP) Offset {
	for _, o := range b.Offsets {
		if o.TP == k {
			return o
		}
	}
	return Offset{Offset: -99}
}

func TestPhaseLife(t *testing.T) {
	cases := []struct {
		name   string
		topics map[string]int32
		out    int32
		opts   []func(*Config)
		run    func(t *testing.T, h *harness)
	}{
		{
			name:   "a phase seals when every partition has passed it: data in read order, then a marker on every output partition",
			topics: map[string]int32{"a": 2, "b": 1}, out: 2,
			run: func(t *testing.T, h *harness) {
				for _, r := range []in{{topic: "a", part: 0, ms: 10}, {topic: "a", part: 1, ms: 20}, {topic: "b", part: 0, ms: 30}} {
					wantOutcome(t, h.feed(r), Buffered, "")
				}
				wantNoBatch(t, h.step())
				h.feed(in{topic: "a", part: 0, ms: 110})
				h.feed(in{topic: "a", part: 1, ms: 120})
				wantNoBatch(t, h.step()) // b/0 has not passed phase +0
				h.feed(in{topic: "b", part: 0, ms: 130})
				st := h.s.Step()
				wantWrites(t, st.Batch, "data a/0@0 ->0", "data a/1@0 ->1", "data b/0@0 ->0",
					"marker +0 ->0 count=2 watermark", "marker +0 ->1 count=1 watermark")
				if got := st.Batch.Seals[0].PerTopic; got["a"] != 2 || got["b"] != 1 {
					t.Errorf("PerTopic = %v", got)
				}
				// Committed offsets stop at the first record still buffered
				// (phase +1 at offset 1), never past it.
				for _, k := range []TP{tp("a", 0), tp("a", 1), tp("b", 0)} {
					o := offsetOf(st.Batch, k)
					want := fmt.Sprintf("pg1;g=%d;h=2;m=-", basePh+1)
					if o.Offset != 1 || o.Metadata != want {
						t.Errorf("%s: offset %d %q, want 1 %q", k, o.Offset, o.Metadata, want)
					}
				}
				h.commit(st.Batch)
				if got := h.phases(); len(got) != 1 || len(got[0]) != 3 {
					t.Errorf("phases read back: %v", got)
				}
			},
		},
		{
			name:   "a retried record (same phasegate.id, same phase) is a duplicate, counted in the Batch that commits its offset",
			topics: map[string]int32{"a": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				wantOutcome(t, h.feed(in{topic: "a", ms: 10, id: "x"}), Buffered, "")
				wantOutcome(t, h.feed(in{topic: "a", ms: 20, id: "x"}), Duplicate, "")
				wantOutcome(t, h.feed(in{topic: "a", ms: 30, id: "y"}), Buffered, "")
				h.feed(in{topic: "a", ms: 150, id: "x"}) // same id, another phase: not a duplicate
				st := h.s.Step()
				wantWrites(t, st.Batch, "data a/0@0 ->0", "data a/0@2 ->0", "marker +0 ->0 count=2 watermark")
				if st.Batch.Duplicates != (Duplicates{Records: 1}) {
					t.Errorf("Duplicates = %+v, want 1 record", st.Batch.Duplicates)
				}
			},
		},
		{
			name:   "a record of a sealed phase is quarantined as late, with its own partition's quarantine partition",
			topics: map[string]int32{"a": 2}, out: 2,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", part: 1, ms: 10})
				h.feed(in{topic: "a", part: 0, ms: 110})
				h.feed(in{topic: "a", part: 1, ms: 110})
				h.step() // seals +0
				wantOutcome(t, h.feed(in{topic: "a", part: 1, ms: 50}), Quarantined, markers.ReasonLate)
				h.clk.add(200 * time.Millisecond) // the quarantine delay
				st := h.s.Step()
				wantWrites(t, st.Batch, "quarantine late a/1@2 ->1")
				if st.Batch.Quarantined[markers.ReasonLate] != 1 {
					t.Errorf("Quarantined = %v", st.Batch.Quarantined)
				}
				if o := offsetOf(st.Batch, tp("a", 1)); o.Offset != 1 {
					t.Errorf("a/1 committed at %d, want 1 (first record of the open phase +1)", o.Offset)
				}
			},
		},
		{
			name:   "a malformed phase header is quarantined, never guessed at",
			topics: map[string]int32{"a": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				out := h.feed(in{topic: "a", ms: 10, phase: "12x"})
				wantOutcome(t, out, Quarantined, markers.ReasonMalformed)
				if !strings.Contains(out.Why, "phase") {
					t.Errorf("Why = %q, want it to name the phase header", out.Why)
				}
			},
		},
		{
			name:   "input markers seal a phase at once (sealed_by markers); a repeat is a duplicate; a stale one is quarantined",
			topics: map[string]int32{"a": 2}, out: 1,
			run: func(t *testing.T, h *harness) {
				ph := phaseAt(10)
				h.feed(in{topic: "a", part: 0, ms: 10})
				wantOutcome(t, h.feed(in{topic: "a", part: 0, marker: &markers.Marker{Phase: ph, Partition: 0, Count: 1, HasCount: true}}), Marker, "")
				wantNoBatch(t, h.step())
				wantOutcome(t, h.feed(in{topic: "a", part: 1, marker: &markers.Marker{Phase: ph, Partition: 1}}), Marker, "")
				wantWrites(t, h.s.Step().Batch, "data a/0@0 ->0", "marker +0 ->0 count=1 markers")
				h.s.Committed(h.s.inflight)
				wantOutcome(t, h.feed(in{topic: "a", part: 1, marker: &markers.Marker{Phase: ph, Partition: 1}}), Duplicate, "")
				wantOutcome(t, h.feed(in{topic: "a", part: 1, marker: &markers.Marker{Phase: ph - 1, Partition: 1}}), Quarantined, markers.ReasonStaleMarker)
				h.clk.add(time.Second)
				st := h.s.Step()
				if st.Batch.Duplicates != (Duplicates{Markers: 1}) {
					t.Errorf("Duplicates = %+v, want 1 marker", st.Batch.Duplicates)
				}
			},
		},
		{
			name:   "a marker whose count differs from the records read is honoured and quarantined as count-mismatch",
			topics: map[string]int32{"a": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 20, id: "r"})
				h.feed(in{topic: "a", ms: 30, id: "r"}) // a proven duplicate: not counted
				out := h.feed(in{topic: "a", marker: &markers.Marker{Phase: phaseAt(10), Partition: 0, Count: 3, HasCount: true}})
				wantOutcome(t, out, Quarantined, markers.ReasonCountMismatch)
				if !strings.Contains(out.Why, "counts 3 records, 2 were read") {
					t.Errorf("Why = %q", out.Why)
				}
				wantWrites(t, h.s.Step().Batch, "data a/0@0 ->0", "data a/0@1 ->0", "marker +0 ->0 count=2 markers",
					"quarantine count-mismatch a/0@3 ->0")
			},
		},
		{
			name:   "a marker naming another partition, or a phase other than its header's, is malformed",
			topics: map[string]int32{"a": 2}, out: 1,
			run: func(t *testing.T, h *harness) {
				wantOutcome(t, h.feed(in{topic: "a", part: 0, marker: &markers.Marker{Phase: 5, Partition: 1}}), Quarantined, markers.ReasonMalformed)
				rec := h.record(in{topic: "a", part: 1, marker: &markers.Marker{Phase: 5, Partition: 1}}, 0)
				rec.Meta.Phase = 6
				wantOutcome(t, h.s.Handle(&rec), Quarantined, markers.ReasonMalformed)
			},
		},
		{
			name:   "a silent partition with no lag goes idle after the idle timeout; phases seal without it (sealed_by idle); a record makes it live",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 150})
				h.caughtUp()
				h.clk.add(900 * time.Millisecond)
				st := h.step()
				wantNoBatch(t, st)
				if len(st.Idle) != 0 {
					t.Fatalf("idle before the timeout: %+v", st.Idle)
				}
				h.feed(in{topic: "a", ms: 950}) // a stays live
				h.caughtUp()
				h.clk.add(200 * time.Millisecond)
				st = h.s.Step()
				if len(st.Idle) != 1 || st.Idle[0].TP != tp("b", 0) || !st.Idle[0].Idle {
					t.Fatalf("Idle = %+v, want b/0 idle", st.Idle)
				}
				// Phases +0 to +8 seal; those without data are skipped.
				wantWrites(t, st.Batch, "data a/0@0 ->0", "marker +0 ->0 count=1 idle", "data a/0@1 ->0", "marker +1 ->0 count=1 idle")
				h.commit(st.Batch)
				if again := h.step(); len(again.Idle) != 0 {
					t.Errorf("idle reported twice: %+v", again.Idle)
				}
				h.feed(in{topic: "b", ms: 1500})
				if st := h.step(); len(st.Idle) != 1 || st.Idle[0].Idle {
					t.Errorf("Idle = %+v, want b/0 live again", st.Idle)
				}
			},
		},
		{
			name:   "Step reports the partitions that begin and stop holding the watermark back, once per change, and Handle the record that takes a holder past it; an idle partition holds nothing",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 350})
				h.feed(in{topic: "b", ms: 120})
				wantHolds(t, h.step(), "b/0 holds")
				wantHolds(t, h.step())
				wantPassed(t, h.feed(in{topic: "b", ms: 150}), false) // still in b's phase
				wantPassed(t, h.feed(in{topic: "a", ms: 500}), false) // a holds nothing
				wantPassed(t, h.feed(in{topic: "b", ms: 900}), true)  // b passes a
				wantPassed(t, h.feed(in{topic: "b", ms: 950}), false) // once
				wantHolds(t, h.step(), "a/0 holds")                   // b's release came with its record
				// Level: a passes the phase it held, and both hold the next.
				wantPassed(t, h.feed(in{topic: "a", ms: 900}), true)
				wantHolds(t, h.step(), "a/0 holds", "b/0 holds")
				h.caughtUp()
				h.clk.add(1100 * time.Millisecond)
				h.feed(in{topic: "a", ms: 905}) // a stays live in the same phase; b goes idle
				wantHolds(t, h.step(), "b/0 released")
				h.caughtUp()
				h.clk.add(2 * time.Second) // both idle
				wantHolds(t, h.step(), "a/0 released")
			},
		},
		{
			name:   "no partition is idle while its lag is unknown, non-zero, or in strict mode",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 150})
				h.clk.add(5 * time.Second) // never measured: unknown
				wantNoBatch(t, h.step())
				h.s.Lag(map[TP]int64{tp("a", 0): 2, tp("b", 0): 3}, nil) // b has 3 records to give
				h.clk.add(5 * time.Second)
				wantNoBatch(t, h.step())
				h.caughtUp()
				h.s.Lag(nil, errors.New("brokers unreachable")) // unknown again
				h.clk.add(5 * time.Second)
				wantNoBatch(t, h.step())
			},
		},
		{
			name:   "a gap of control records that an unpaused consumer does not close for 10 s counts as no lag",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 150})
				gap := map[TP]int64{tp("a", 0): 2, tp("b", 0): 1} // b/0: one offset unread (a commit marker)
				h.s.Lag(gap, nil)
				h.clk.add(9 * time.Second)
				h.s.Lag(gap, nil)
				wantNoBatch(t, h.step())
				h.clk.add(2 * time.Second)
				raw := h.s.Lag(gap, nil)
				if raw[tp("b", 0)] != 1 {
					t.Errorf("raw lag of b/0 = %d, want 1 (the gauge shows the gap)", raw[tp("b", 0)])
				}
				h.clk.add(1100 * time.Millisecond)
				// Every partition idle: every buffered phase seals.
				wantWrites(t, h.s.Step().Batch, "data a/0@0 ->0", "marker +0 ->0 count=1 idle", "data a/0@1 ->0", "marker +1 ->0 count=1 idle")
			},
		},
		{
			name:   "a gap whose records the caller says are on their way (Delivering) never counts as no lag",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 150})
				gap := map[TP]int64{tp("a", 0): 2, tp("b", 0): 1}
				h.s.Lag(gap, nil)
				for range 4 { // 20 s, twice gapSettle: b/0's record waits upstream all along
					h.clk.add(5 * time.Second)
					h.s.Delivering(tp("b", 0))
					h.s.Lag(gap, nil)
					wantNoBatch(t, h.step())
				}
				h.clk.add(gapSettle + time.Second) // no longer delivering: the gap settles
				h.s.Lag(gap, nil)
				h.clk.add(1100 * time.Millisecond)
				wantWrites(t, h.s.Step().Batch, "data a/0@0 ->0", "marker +0 ->0 count=1 idle", "data a/0@1 ->0", "marker +1 ->0 count=1 idle")
			},
		},
		{
			name:   "BatchBytes: a Batch takes the oldest sealed phases up to the bound (at least one), commits the first phase it leaves as the global watermark, and takes every phase up to a queued late record's",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			opts: []func(*Config){func(c *Config) { c.BatchBytes = 1 }},
			run: func(t *testing.T, h *harness) {
				for _, ms := range []int64{10, 110, 210, 310} {
					h.feed(in{topic: "a", ms: ms})
					h.feed(in{topic: "b", ms: ms})
				}
				st := h.s.Step() // +0 to +2 sealed; one phase per Batch
				wantWrites(t, st.Batch, "data a/0@0 ->0", "data b/0@0 ->0", "marker +0 ->0 count=2 watermark")
				if m, err := parseCommitMeta(offsetOf(st.Batch, tp("a", 0)).Metadata); err != nil || m.global != phaseAt(110) {
					t.Errorf("committed global = %d (%v), want %d (the first phase left for the next Batch)", m.global, err, phaseAt(110))
				}
				h.commit(st.Batch)
				h.feed(in{topic: "a", ms: 220}) // late: +2 is sealed, waiting; the next Batch takes +1 and +2
				st = h.s.Step()
				wantWrites(t, st.Batch, "data a/0@1 ->0", "data b/0@1 ->0", "marker +1 ->0 count=2 watermark",
					"data a/0@2 ->0", "data b/0@2 ->0", "marker +2 ->0 count=2 watermark", "quarantine late a/0@4 ->0")
				h.commit(st.Batch)
				wantNoBatch(t, h.s.Step())
			},
		},
		{
			name:   "strict mode (idle timeout 0) waits for a silent partition for ever",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			opts: []func(*Config){func(c *Config) { c.Watermarks.IdleTimeout = 0 }},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 150})
				h.caughtUp()
				h.clk.add(time.Hour)
				wantNoBatch(t, h.step())
			},
		},
		{
			name:   "over half the buffer bound the partitions ahead are paused (the slowest never); they resume once phases seal",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			opts: []func(*Config){func(c *Config) { c.Watermarks.MaxBufferBytes = 8 << 10 }},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "b", ms: 10, size: 100})
				for ms := int64(10); ms < 400; ms += 100 {
					h.feed(in{topic: "a", ms: ms, size: 1000})
				}
				st := h.step()
				if len(st.Actions) != 1 || st.Actions[0].TP != tp("a", 0) || !st.Actions[0].Pause ||
					!slices.Equal(st.Actions[0].Reasons, []string{watermarks.ReasonBuffer}) {
					t.Fatalf("Actions = %+v, want a/0 paused for buffer", st.Actions)
				}
				h.clk.add(250 * time.Millisecond)
				h.feed(in{topic: "b", ms: 450})
				st = h.step()
				if len(st.Actions) != 1 || st.Actions[0].Pause || st.Actions[0].Paused != 250*time.Millisecond {
					t.Fatalf("Actions = %+v, want a/0 resumed after 250ms", st.Actions)
				}
			},
		},
		{
			name:   "over the dedupe cache's identity bound the partitions ahead pause (reason dedupe) until a seal frees it",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			opts: []func(*Config){func(c *Config) { c.Dedupe.MaxIdentities = 3; c.Dedupe.MaxSealedPhases = 1 }},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "b", ms: 10})
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 110})
				if out := h.feed(in{topic: "a", ms: 210}); !out.DedupeFull || out.Kind != Buffered {
					t.Fatalf("outcome = %+v, want buffered with DedupeFull", out)
				}
				st := h.step()
				if len(st.Actions) != 1 || st.Actions[0].TP != tp("a", 0) || !slices.Equal(st.Actions[0].Reasons, []string{ReasonDedupe}) {
					t.Fatalf("Actions = %+v, want a/0 paused for dedupe (b/0 holds the watermark and runs)", st.Actions)
				}
				h.feed(in{topic: "b", ms: 250})
				st = h.step()
				if len(st.Actions) != 1 || st.Actions[0].Pause {
					t.Fatalf("Actions = %+v, want a/0 resumed once phases sealed", st.Actions)
				}
				if h.s.dedupe.Full() {
					t.Error("the cache is still over its bound")
				}
			},
		},
		{
			name:   "a late record of a phase evicted from the dedupe cache is quarantined, and the phase is sealed there again",
			topics: map[string]int32{"a": 1}, out: 1,
			opts: []func(*Config){func(c *Config) { c.Dedupe.MaxSealedPhases = 1 }},
			run: func(t *testing.T, h *harness) {
				for _, ms := range []int64{10, 110, 210, 310} {
					h.feed(in{topic: "a", ms: ms})
					h.step()
				}
				wantOutcome(t, h.feed(in{topic: "a", ms: 20}), Quarantined, markers.ReasonLate)
				if open := h.s.dedupe.Stats().OpenPhases; open != 1 {
					t.Errorf("dedupe holds %d open phases, want 1 (phase +3): a late record left its phase open", open)
				}
			},
		},
		{
			name:   "one Batch in flight at a time: the next waits for Committed and takes every phase sealed meanwhile",
			topics: map[string]int32{"a": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 110})
				first := h.s.Step().Batch
				wantWrites(t, first, "data a/0@0 ->0", "marker +0 ->0 count=1 watermark")
				h.feed(in{topic: "a", ms: 210})
				h.feed(in{topic: "a", ms: 310})
				wantNoBatch(t, h.s.Step())
				h.commit(first)
				wantWrites(t, h.s.Step().Batch, "data a/0@1 ->0", "marker +1 ->0 count=1 watermark",
					"data a/0@2 ->0", "marker +2 ->0 count=1 watermark")
			},
		},
		{
			name:   "key routing places records by murmur2 like Kafka's Java producer; a null key falls back to the partition",
			topics: map[string]int32{"a": 2}, out: 3,
			opts: []func(*Config){func(c *Config) { c.Routing = RouteKey }},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", part: 0, ms: 10, key: "a-little-bit-long-string"}) // murmur2 -985981536: 1161502112 mod 3 = 2
				h.feed(in{topic: "a", part: 1, ms: 10})
				h.feed(in{topic: "a", part: 0, ms: 110})
				h.feed(in{topic: "a", part: 1, ms: 110})
				wantWrites(t, h.s.Step().Batch, "data a/0@0 ->2", "data a/1@0 ->1",
					"marker +0 ->0 count=0 watermark", "marker +0 ->1 count=1 watermark", "marker +0 ->2 count=1 watermark")
			},
		},
		{
			name:   "a record of a partition outside the session is ignored",
			topics: map[string]int32{"a": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				wantOutcome(t, h.s.Handle(&Record[string]{Topic: "zzz", Offset: 3}), Ignored, "")
			},
		},
		{
			name:   "phases open longer than the seal timeout are counted once each; under policy seal they seal (sealed_by timeout)",
			topics: map[string]int32{"a": 1, "b": 1}, out: 1,
			opts: []func(*Config){func(c *Config) {
				c.Watermarks.SealTimeoutMin, c.Watermarks.SealTimeoutMax = time.Second, time.Second
				c.Watermarks.SealPolicy = watermarks.PolicySeal
			}},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				h.feed(in{topic: "a", ms: 150})
				h.clk.add(1100 * time.Millisecond)
				st := h.s.Step()
				// Both open phases opened 1.1 s ago: each is counted once and sealed.
				if st.Timeouts != 2 {
					t.Fatalf("Timeouts = %d, want 2", st.Timeouts)
				}
				wantWrites(t, st.Batch, "data a/0@0 ->0", "marker +0 ->0 count=1 timeout", "data a/0@1 ->0", "marker +1 ->0 count=1 timeout")
				h.commit(st.Batch)
				if again := h.step(); again.Timeouts != 0 {
					t.Errorf("the same timeout counted again: %d", again.Timeouts)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newHarness(t, c.topics, c.out, c.opts...))
		})
	}
}

// wantPassed checks an Outcome's Passed.
func wantPassed(t *testing.T, out Outcome, want bool) {
	t.Helper()
	if out.Passed != want {
		t.Errorf("Passed = %v, want %v (%+v)", out.Passed, want, out)
	}
}

// wantHolds checks a Step's HoldChanges, as "topic/partition holds" or
// "topic/partition released", in any order.
func wantHolds(t *testing.T, st Step[string], want ...string) {
	t.Helper()
	var got []string
	for _, c := range st.Holds {
		verb := "released"
		if c.Holds {
			verb = "holds"
		}
		got = append(got, c.TP.String()+" "+verb)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Holds = %q, want %q", got, want)
	}
}

// doc.go: Handle, the per-record path, allocates nothing per record once
// the phase's buffers have grown (proxy's BenchmarkHandle: 0 allocs/op).
func TestHandleDoesNotAllocate(t *testing.T) {
	h := newHarness(t, map[string]int32{"a": 2}, 2)
	h.caughtUp()
	recs := make([]Record[string], 4096)
	for i := range recs {
		recs[i] = h.record(in{topic: "a", part: int32(i % 2), ms: 10, key: "customer-42"}, int64(i/2))
	}
	i := 0
	next := func() {
		r := recs[i%len(recs)]
		r.Offset = int64(i / 2)
		h.s.Handle(&r)
		i++
	}
	for range 1024 { // the phase's buffers and the dedupe cache grow
		next()
	}
	avg := testing.AllocsPerRun(2048, next)
	t.Logf("%.4f allocations per record", avg)
	if avg > 0.05 {
		t.Fatalf("Handle allocates %.3f times per record, want none but amortized growth", avg)
	}
}
