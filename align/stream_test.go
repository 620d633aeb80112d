package align

import (
	"slices"
	"testing"
	"time"

	"github.com/phasegate/phasegate/markers"
)

// streaming streams the oldest open phase for up to a second.
func streaming(c *Config) { c.StreamFor = time.Second }

func wantKind(t *testing.T, st Step[string], kind BatchKind) {
	t.Helper()
	if st.Batch == nil || st.Batch.Kind != kind {
		var got any = "no Batch"
		if st.Batch != nil {
			got = st.Batch.Kind
		}
		t.Fatalf("Batch = %v, want kind %d", got, kind)
	}
}

// One rule per case (docs/DESIGN.md, "Latency"; stream.go).
func TestStreaming(t *testing.T) {
	cases := []struct {
		name   string
		topics map[string]int32
		out    int32
		opts   []func(*Config)
		run    func(t *testing.T, h *harness)
	}{
		{
			name:   "the oldest open phase streams as it arrives; its seal commits the rest and markers that count every record",
			topics: map[string]int32{"a": 2}, out: 2, opts: []func(*Config){streaming},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", part: 0, ms: 10})
				h.feed(in{topic: "a", part: 1, ms: 20})
				st := h.s.Step()
				wantKind(t, st, StreamBatch)
				wantWrites(t, st.Batch, "data a/0@0 ->0", "data a/1@0 ->1")
				if len(st.Batch.Offsets) != 0 || st.Batch.Records != 0 {
					t.Errorf("a StreamBatch commits nothing: offsets %v, records %d", st.Batch.Offsets, st.Batch.Records)
				}
				wantNoBatch(t, h.s.Step()) // the StreamBatch is in flight
				h.commit(st.Batch)
				if n := len(h.out[0]) + len(h.out[1]); n != 0 {
					t.Fatalf("%d records visible before the seal", n)
				}
				h.feed(in{topic: "a", part: 0, ms: 30})
				st = h.s.Step()
				wantWrites(t, st.Batch, "data a/0@1 ->0")
				h.commit(st.Batch)
				h.feed(in{topic: "a", part: 1, ms: 40})
				h.feed(in{topic: "a", part: 0, ms: 110})
				h.feed(in{topic: "a", part: 1, ms: 120})
				st = h.s.Step()
				wantKind(t, st, CommitBatch)
				wantWrites(t, st.Batch, "data a/1@1 ->1", "marker +0 ->0 count=2 watermark", "marker +0 ->1 count=2 watermark")
				if st.Batch.Records != 4 || st.Batch.Seals[0].PerTopic["a"] != 4 {
					t.Errorf("Records %d, PerTopic %v: want the phase's 4, streamed ones included", st.Batch.Records, st.Batch.Seals[0].PerTopic)
				}
				h.commit(st.Batch)
				if got := h.phases(); len(got[0]) != 4 {
					t.Fatalf("phases read back: %v", got)
				}
				st = h.s.Step() // +1 is the oldest open phase now
				wantWrites(t, st.Batch, "data a/0@2 ->0", "data a/1@2 ->1")
			},
		},
		{
			name:   "records of later phases buffer while the oldest streams",
			topics: map[string]int32{"a": 2}, out: 1, opts: []func(*Config){streaming},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", part: 0, ms: 10})
				h.feed(in{topic: "a", part: 0, ms: 150}) // a/0 is at +1; a/1 holds +0
				h.feed(in{topic: "a", part: 1, ms: 20})
				st := h.step()
				wantWrites(t, st.Batch, "data a/0@0 ->0", "data a/1@0 ->0")
			},
		},
		{
			name:   "a phase not sealed within StreamFor falls back: the transaction aborts, the holders are named, and its seal writes it whole",
			topics: map[string]int32{"a": 2}, out: 1, opts: []func(*Config){streaming},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", part: 0, ms: 10})
				h.feed(in{topic: "a", part: 1, ms: 20})
				h.feed(in{topic: "a", part: 0, ms: 150})
				wantKind(t, h.step(), StreamBatch)
				h.clk.add(999 * time.Millisecond)
				wantNoBatch(t, h.step()) // a/1 holds +0, within StreamFor
				h.clk.add(time.Millisecond)
				st := h.s.Step()
				wantKind(t, st, AbortBatch)
				f := st.Fallback
				if f == nil || f.Phase != basePh || f.Streamed != 2 || f.Open != time.Second || !slices.Equal(f.Holders, []TP{tp("a", 1)}) {
					t.Fatalf("Fallback = %+v, want phase +0, 2 streamed, open 1s, held by a/1", f)
				}
				h.commit(st.Batch)
				h.feed(in{topic: "a", part: 1, ms: 30})
				wantNoBatch(t, h.step()) // +0 does not stream again
				h.feed(in{topic: "a", part: 1, ms: 160})
				st = h.s.Step()
				wantWrites(t, st.Batch, "data a/0@0 ->0", "data a/1@0 ->0", "data a/1@1 ->0", "marker +0 ->0 count=3 watermark")
				h.commit(st.Batch)
				wantWrites(t, h.s.Step().Batch, "data a/0@1 ->0", "data a/1@2 ->0") // +1 streams
			},
		},
		{
			name:   "quarantine records wait for the streaming phase's seal, then go in its commit",
			topics: map[string]int32{"a": 2}, out: 1, opts: []func(*Config){streaming},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", part: 0, ms: 10, phase: "x"}) // malformed
				h.feed(in{topic: "a", part: 0, ms: 20})
				h.feed(in{topic: "a", part: 1, ms: 20})
				wantKind(t, h.step(), StreamBatch)
				h.clk.add(300 * time.Millisecond) // past the quarantine delay, within StreamFor
				wantNoBatch(t, h.step())
				h.feed(in{topic: "a", part: 0, ms: 150})
				h.feed(in{topic: "a", part: 1, ms: 150})
				st := h.s.Step()
				wantWrites(t, st.Batch, "marker +0 ->0 count=2 watermark", "quarantine malformed a/0@0 ->0")
			},
		},
		{
			name:   "a session sharing an output partition with another instance's writer streams a phase once every writer marked the phases below it",
			topics: map[string]int32{"a": 2}, out: 1, opts: []func(*Config){streaming, func(c *Config) {
				c.Routing = RouteKey
				c.Outputs = []Output{{Partition: 0, Task: 0, Writers: 2}}
			}},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", part: 0, ms: 110, key: "k"})
				h.feed(in{topic: "a", part: 1, ms: 110, key: "k"})
				wantNoBatch(t, h.step())
				g := h.s.Global() // +1
				h.s.FleetMarked(g - 1)
				wantNoBatch(t, h.step()) // another writer may still mark +0
				h.s.FleetMarked(g)
				wantKind(t, h.step(), StreamBatch)
				h.feed(in{topic: "a", part: 0, ms: 250, key: "k"})
				h.feed(in{topic: "a", part: 1, ms: 250, key: "k"})
				wantWrites(t, h.s.Step().Batch, "marker +1 ->0 count=2 watermark")
			},
		},
		{
			name:   "a session owning every writer of its partitions streams, with several lanes",
			topics: map[string]int32{"a": 2}, out: 1, opts: []func(*Config){streaming, func(c *Config) {
				c.Routing = RouteKey
				c.Outputs = []Output{{Partition: 0, Task: 0, Writers: 2, Inputs: []TP{tp("a", 0)}}, {Partition: 0, Task: 1, Writers: 2, Inputs: []TP{tp("a", 1)}}}
			}},
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", part: 0, ms: 10, key: "k"})
				h.feed(in{topic: "a", part: 1, ms: 10, key: "k"})
				st := h.step()
				wantKind(t, st, StreamBatch)
				if got := []string{string(st.Batch.Task(st.Batch.Writes[0])), string(st.Batch.Task(st.Batch.Writes[1]))}; !slices.Equal(got, []string{"0", "1"}) {
					t.Fatalf("phasegate.task of the streamed records = %q, want each lane's", got)
				}
				h.feed(in{topic: "a", part: 0, ms: 150, key: "k"})
				h.feed(in{topic: "a", part: 1, ms: 150, key: "k"})
				h.step()
				if got := h.phases(); len(got[0]) != 2 {
					t.Fatalf("phases read back: %v", got)
				}
			},
		},
		{
			name:   "StreamFor 0 never streams",
			topics: map[string]int32{"a": 1}, out: 1,
			run: func(t *testing.T, h *harness) {
				h.feed(in{topic: "a", ms: 10})
				wantNoBatch(t, h.step())
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newHarness(t, c.topics, c.out, c.opts...))
		})
	}
}

// A crash while a phase streams loses nothing and writes nothing twice: the
// open transaction is aborted, and the next session reads the phase again
// from the committed offsets and streams it anew.
func TestStreamingCrashRebuilds(t *testing.T) {
	h := newHarness(t, map[string]int32{"a": 1}, 1, streaming)
	h.feed(in{topic: "a", ms: 10})
	h.feed(in{topic: "a", ms: 20})
	wantKind(t, h.step(), StreamBatch)
	h.restart()
	h.read(tp("a", 0))
	st := h.step()
	wantWrites(t, st.Batch, "data a/0@0 ->0", "data a/0@1 ->0")
	h.feed(in{topic: "a", ms: 150})
	wantWrites(t, h.s.Step().Batch, "marker +0 ->0 count=2 "+string(markers.SealedByWatermark))
}
