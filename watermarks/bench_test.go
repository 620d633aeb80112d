package watermarks

import (
	"fmt"
	"testing"
	"time"
)

func benchTracker(b *testing.B, n int) (*Tracker, *clock, []P) {
	b.Helper()
	clk := newClock()
	return benchTrackerClock(b, n, clk.Now), clk, benchParts(n)
}

func benchParts(n int) []P {
	ps := make([]P, n)
	for i := range ps {
		ps[i] = P(i)
	}
	return ps
}

func benchTrackerClock(b *testing.B, n int, now func() time.Time) *Tracker {
	b.Helper()
	cfg := baseConfig(newClock())
	cfg.Now = now
	cfg.IdleTimeout = 0
	tr, err := New(cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		tr.Add(fmt.Sprintf("t%d", i%3), int32(i))
	}
	return tr
}

// BenchmarkRecord is the steady state of the per-record path: records go
// round-robin over the partitions, each partition's timestamps advance 50 ms
// per round (20 rounds per 1 s phase), and every 4096 records the clock
// steps and Advance seals what passed, outside the timed region.
func BenchmarkRecord(b *testing.B) {
	for _, n := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			tr, clk, ps := benchTracker(b, n)
			var sealed int
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%4096 == 4095 {
					b.StopTimer()
					clk.step(100 * time.Millisecond)
					sealed += len(tr.Advance())
					b.StartTimer()
				}
				ms := int64(i/n) * 50
				tr.Record(ps[i%n], Rec{Phase: uint64(ms / 1000), EventMs: ms, Timed: true, Bytes: 100})
			}
			b.StopTimer()
			if b.N > 100_000 && sealed == 0 {
				b.Fatalf("no phase sealed in %d records: not a steady state", b.N)
			}
		})
	}
}

// BenchmarkRecordWallClock is BenchmarkRecord with time.Now as the clock,
// as in production: Record reads the clock once per record.
func BenchmarkRecordWallClock(b *testing.B) {
	tr, ps := benchTrackerClock(b, 64, time.Now), benchParts(64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%4096 == 4095 {
			b.StopTimer()
			tr.Advance()
			b.StartTimer()
		}
		ms := int64(i/64) * 50
		tr.Record(ps[i%64], Rec{Phase: uint64(ms / 1000), EventMs: ms, Timed: true, Bytes: 100})
	}
}

// BenchmarkAdvance measures one Advance: "scan" finds nothing to seal (the
// ticker's common case); "seal" seals one phase holding a record from every
// partition, with its straggler statistics.
func BenchmarkAdvance(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprintf("partitions=%d/scan", n), func(b *testing.B) {
			tr, clk, ps := benchTracker(b, n)
			for _, p := range ps {
				tr.Record(p, Rec{Phase: 0, EventMs: 500, Timed: true, Bytes: 100})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				clk.step(time.Millisecond)
				if len(tr.Advance()) != 0 {
					b.Fatal("sealed a phase")
				}
			}
		})
		b.Run(fmt.Sprintf("partitions=%d/seal", n), func(b *testing.B) {
			tr, clk, ps := benchTracker(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				for _, p := range ps {
					tr.Record(p, Rec{Phase: uint64(i + 1), EventMs: int64(i+1)*1000 + 500, Timed: true, Bytes: 100})
				}
				clk.step(time.Millisecond)
				b.StartTimer()
				if i > 0 && len(tr.Advance()) != 1 {
					b.Fatal("did not seal one phase")
				}
			}
		})
	}
}
