package proxy_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/internal/inproc"
	"github.com/phasegate/phasegate/internal/verify"
	"github.com/phasegate/phasegate/markers"
)

// checkAligned fails unless every phase of the output holds exactly the
// records written for it on every fork: no phase was sealed early.
func checkAligned(t *testing.T, out *verify.Output, want map[uint64]map[string]int64) {
	t.Helper()
	for _, ph := range out.Sorted() {
		for topic, n := range want[ph.ID] {
			if ph.Sources[topic] != n {
				t.Errorf("phase %d: %s has %d records, %d were written: sealed without the whole branch", ph.ID, topic, ph.Sources[topic], n)
			}
		}
	}
	for id := range want {
		if out.Phases[id] == nil {
			t.Errorf("phase %d was written but never sealed", id)
		}
	}
}

// grid writes n phases of records: per phase, per partition of each fork,
// perPart records; it returns the per-phase expectation.
func grid(e *env, base time.Time, from, to int, forks map[string]int32, perPart int) map[uint64]map[string]int64 {
	want := map[uint64]map[string]int64{}
	var recs []rec
	for ph := from; ph < to; ph++ {
		phase := uint64(at(base, ph, 0).UnixMilli() / phaseLen.Milliseconds())
		want[phase] = map[string]int64{}
		for topic, parts := range forks {
			for p := range parts {
				for i := range perPart {
					recs = append(recs, rec{topic: topic, partition: p, ts: at(base, ph, i*3)})
					want[phase][topic]++
				}
			}
		}
	}
	e.write(recs...)
	return want
}

func TestThreeForksDifferentPartitionCounts(t *testing.T) {
	forks := map[string]int32{"a": 1, "b": 3, "c": 5}
	e := newEnv(t, forks, 3)
	want := grid(e, phaseBase(), 0, 6, forks, 4)
	e.start()
	out, acc := e.settle(20 * time.Second)
	checkAligned(t, out, want)
	if acc.Out != len(e.inputs) {
		t.Fatalf("published %d of %d", acc.Out, len(e.inputs))
	}
}

// One branch delivers 200 ms after the other: no phase is sealed before the
// slow branch's records of that phase are in.
func TestDelayedBranchStaysAligned(t *testing.T) {
	forks := map[string]int32{"fast": 2, "slow": 3}
	e := newEnv(t, forks, 2)
	e.cfg.Watermarks.IdleTimeout = 2 * time.Second
	base := phaseBase()
	e.start()
	want := map[uint64]map[string]int64{}
	for ph := range 5 {
		w := grid(e, base, ph, ph+1, map[string]int32{"fast": 2}, 3)
		time.Sleep(200 * time.Millisecond) // the slow branch is 200 ms behind
		ws := grid(e, base, ph, ph+1, map[string]int32{"slow": 3}, 3)
		for phase, m := range w {
			m["slow"] = ws[phase]["slow"]
			want[phase] = m
		}
	}
	out, _ := e.settle(20 * time.Second)
	checkAligned(t, out, want)
}

// A silent partition is idle after the idle timeout: the others' phases
// seal with sealed_by idle instead of waiting for it.
func TestIdlePartitionSealedByIdleTimeout(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 2, "b": 1}, 2)
	base := phaseBase()
	var recs []rec
	for ph := range 4 {
		recs = append(recs, rec{topic: "a", partition: 0, ts: at(base, ph, 1)}, rec{topic: "b", partition: 0, ts: at(base, ph, 2)})
	}
	e.write(recs...) // a/1 never gets a record
	e.start()
	out, acc := e.settle(15 * time.Second)
	if acc.Out != len(recs) {
		t.Fatalf("published %d of %d", acc.Out, len(recs))
	}
	for _, ph := range out.Sorted() {
		if ph.SealedBy != markers.SealedByIdle {
			t.Errorf("phase %d sealed_by %s, want idle (a/1 is silent)", ph.ID, ph.SealedBy)
		}
	}
}

// Strict mode (idle timeout 0): a silent partition holds every phase back.
func TestStrictModeWaitsForSilentPartition(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 2}, 1)
	e.cfg.Watermarks.IdleTimeout = 0
	base := phaseBase()
	e.write(rec{topic: "a", partition: 0, ts: at(base, 0, 1)}, rec{topic: "a", partition: 0, ts: at(base, 5, 1)})
	e.start()
	waitFor(t, 10*time.Second, "the pipeline to read both records", func() bool {
		st := e.sidecar.Pipeline.Status()
		return len(st.OpenPhases) == 2
	})
	time.Sleep(time.Second) // several idle timeouts of the default mode: nothing may seal
	if out, _ := e.read(); len(out.Phases) != 0 || out.Data != 0 {
		t.Fatalf("strict mode sealed %d phases while a/1 is silent", len(out.Phases))
	}
	// a/1 speaks and passes phase 5; markers close phase 7 on both.
	e.write(rec{topic: "a", partition: 1, ts: at(base, 7, 0)}, rec{topic: "a", partition: 0, ts: at(base, 7, 0)})
	e.closeAll(map[string]int32{"a": 2}, phaseOf(at(base, 7, 0)))
	out, _ := e.settle(10 * time.Second)
	if out.Phases[e.inputs[0].Phase] == nil || out.Phases[e.inputs[1].Phase] == nil {
		t.Fatalf("phases not sealed after the silent partition spoke: %v", out.Sorted())
	}
}

// A record of an already sealed phase goes to the quarantine with reason
// late, with its input offset.
func TestLateRecordQuarantined(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 1}, 1)
	base := phaseBase()
	e.write(rec{topic: "a", ts: at(base, 0, 1)}, rec{topic: "a", ts: at(base, 3, 1)})
	e.start()
	waitFor(t, 10*time.Second, "phase 0 to seal", func() bool { return e.sidecar.Pipeline.Status().LastSealed != nil })
	e.write(rec{topic: "a", ts: at(base, 0, 50)}) // phase 0 again: late
	_, acc := e.settle(10 * time.Second)
	if acc.Reasons[markers.ReasonLate] != 1 {
		t.Fatalf("quarantined %v, want one late record", acc.Reasons)
	}
}

// A malformed phase header is never guessed at: quarantined as malformed.
func TestMalformedPhaseHeaderQuarantined(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 1}, 1)
	base := phaseBase()
	for _, bad := range []string{"-1", "+5", " 5", "12a", "184467440737095516160", "0x10"} {
		e.write(rec{topic: "a", ts: at(base, 0, 1), phaseHdr: bad})
	}
	e.write(rec{topic: "a", ts: at(base, 0, 2)})
	e.start()
	_, acc := e.settle(10 * time.Second)
	if acc.Reasons[markers.ReasonMalformed] != 6 || acc.Out != 1 {
		t.Fatalf("got %s, want 6 malformed quarantined and 1 published", acc)
	}
}

// Retried records (same phasegate.id, same phase) are dropped and counted.
func TestRetriedDuplicatesDropped(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 2}, 2)
	base := phaseBase()
	var recs []rec
	for i := range 10 {
		r := rec{topic: "a", partition: int32(i % 2), ts: at(base, 0, i), id: "order-" + strconv.Itoa(i)}
		recs = append(recs, r, r) // every record retried once
	}
	recs = append(recs, rec{topic: "a", partition: 0, ts: at(base, 0, 3), id: "order-3"}) // a retry on another partition
	e.write(recs...)
	e.start()
	_, acc := e.settle(10 * time.Second)
	if acc.Out != 10 || acc.Duplicates != 11 {
		t.Fatalf("got %s, want 10 published and 11 duplicates", acc)
	}
	waitFor(t, 5*time.Second, "the duplicates metric", func() bool {
		return counter(t, e, "phasegate_duplicates_dropped_total", "kind", "record") == 11
	})
}

// Input markers seal a phase at once (sealed_by markers), without waiting
// for the watermark or the idle timeout.
func TestInputMarkersSealEarly(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 2}, 1)
	e.cfg.Watermarks.IdleTimeout = 0 // only markers can seal
	var recs []rec
	for p := range int32(2) {
		recs = append(recs, rec{topic: "a", partition: p, phaseHdr: "7", id: fmt.Sprint("x", p)},
			rec{topic: "a", partition: p, marker: &markers.Marker{Phase: 7, Partition: p, Count: 1, HasCount: true}})
	}
	e.write(recs...)
	e.start()
	out, acc := e.settle(10 * time.Second)
	if ph := out.Phases[7]; ph == nil || ph.SealedBy != markers.SealedByMarkers || acc.Out != 2 || acc.Markers != 2 {
		t.Fatalf("phase 7 = %+v, %s; want 2 records sealed by markers", ph, acc)
	}
}

// Repeated, stale and miscounting input markers (MARKERS.md 3.1).
func TestInputMarkerRules(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 1}, 1)
	e.cfg.Watermarks.IdleTimeout = 0
	mk := func(phase uint64, count int64) rec {
		return rec{topic: "a", marker: &markers.Marker{Phase: phase, Partition: 0, Count: count, HasCount: count >= 0}}
	}
	e.write(
		rec{topic: "a", phaseHdr: "3", id: "r1"},
		mk(3, 1), mk(3, 1), // a retry: dropped
		rec{topic: "a", phaseHdr: "4", id: "r2"},
		mk(4, 5),  // count differs: honoured, and quarantined as count-mismatch
		mk(2, -1), // below 4: stale
	)
	e.start()
	out, acc := e.settle(10 * time.Second)
	if acc.Reasons[markers.ReasonCountMismatch] != 1 || acc.Reasons[markers.ReasonStaleMarker] != 1 {
		t.Fatalf("quarantine %v, want one count-mismatch and one stale-marker", acc.Reasons)
	}
	if out.Phases[3] == nil || out.Phases[4] == nil {
		t.Fatalf("phases 3 and 4 not sealed by their markers")
	}
	waitFor(t, 5*time.Second, "the repeated marker to be counted", func() bool {
		return counter(t, e, "phasegate_duplicates_dropped_total", "kind", "marker") == 1
	})
}

// A sidecar stopped in the middle, with a phase still open, and started
// again: nothing lost (the open phase's records are read again from the
// committed offsets), nothing published twice, no sealed phase reopened.
func TestRestartInTheMiddle(t *testing.T) {
	forks := map[string]int32{"a": 2, "b": 3}
	e := newEnv(t, forks, 2)
	e.cfg.Watermarks.IdleTimeout = 0 // strict: the last phase stays open until more data comes
	base := phaseBase()
	want := grid(e, base, 0, 4, forks, 5)
	e.start()
	waitFor(t, 10*time.Second, "phases 0-2 to commit with phase 3 open", func() bool {
		st := e.sidecar.Pipeline.Status()
		return len(st.OpenPhases) == 1 && st.OpenPhases[0].Records == 25 && len(st.Sealed) == 3
	})
	e.stop()
	for phase, m := range grid(e, base, 4, 8, forks, 5) {
		want[phase] = m
	}
	e.closeAll(forks, phaseOf(at(base, 7, 0)))
	e.start()
	out, acc := e.settle(20 * time.Second)
	checkAligned(t, out, want)
	if acc.Out != len(e.inputs)-acc.Markers {
		t.Fatalf("published %d of %d after a restart", acc.Out, len(e.inputs)-acc.Markers)
	}
}

// Key routing sends a record where Kafka's Java producer would (murmur2),
// also with a hot key holding 70 % of a branch.
func TestHotKeyRouting(t *testing.T) {
	forks := map[string]int32{"a": 2, "b": 2}
	e := newEnv(t, forks, 3)
	e.cfg.Routing = align.RouteKey
	base := phaseBase()
	var recs []rec
	for i := range 100 {
		key := "hot"
		if i%10 >= 7 {
			key = "k" + strconv.Itoa(i)
		}
		ts := at(base, i*3/100, i%30) // three phases, in time order
		recs = append(recs, rec{topic: "a", partition: int32(i % 2), ts: ts, key: key},
			rec{topic: "b", partition: int32(i % 2), ts: ts, key: "b" + strconv.Itoa(i)})
	}
	e.write(recs...)
	e.start()
	e.settle(15 * time.Second)
	parts := readOutput(t, e)
	part := kgo.StickyKeyPartitioner(nil).ForTopic("out")
	hot := 0
	for q, recs := range parts {
		for _, r := range recs {
			if r.Key == nil {
				continue
			}
			if want := part.Partition(&kgo.Record{Key: r.Key}, 3); want != q {
				t.Fatalf("key %q on partition %d, the Java partitioner puts it on %d", r.Key, q, want)
			}
			if string(r.Key) == "hot" {
				hot++
			}
		}
	}
	if hot != 70 {
		t.Fatalf("hot key records = %d, want 70", hot)
	}
}

// With a small buffer and one branch far ahead, the fast partitions are
// paused and the buffer stays under its bound; everything is published.
func TestBufferBoundUnderSkew(t *testing.T) {
	e := newEnv(t, map[string]int32{"fast": 2, "slow": 1}, 1)
	// 800 records of ~1.3 KiB (payload + recordOverhead) are 1 MiB ahead:
	// twice the bound. The bound holds while the records in flight when a
	// pause is decided fit in the half above the pause threshold (see
	// doc.go); a 256 KiB bound was too tight for that on a loaded machine.
	const bound = 512 << 10
	e.cfg.Watermarks.MaxBufferBytes = bound
	e.cfg.Watermarks.IdleTimeout = 0
	base := phaseBase()
	var recs []rec
	for ph := range 40 {
		for i := range 20 {
			recs = append(recs, rec{topic: "fast", partition: int32(i % 2), ts: at(base, ph, i), pad: 1024})
		}
	}
	e.write(recs...) // the fast branch is 40 phases ahead, ~1 KiB a record
	e.start()
	peak := int64(0)
	paused := false
	for ph := range 41 {
		e.write(rec{topic: "slow", ts: at(base, ph, 1)})
		for range 5 {
			st := e.sidecar.Pipeline.Status()
			peak = max(peak, st.PeakBufferedBytes)
			for _, p := range st.Partitions {
				paused = paused || p.Paused
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	e.closeAll(map[string]int32{"fast": 2, "slow": 1}, phaseOf(at(base, 40, 0)))
	_, acc := e.settle(20 * time.Second)
	if peak > bound {
		t.Fatalf("buffered %d bytes at peak, bound %d", peak, bound)
	}
	if !paused {
		t.Fatalf("no partition was paused although the fast branch ran 40 phases ahead")
	}
	t.Logf("peak buffered %d of %d bytes; %s", peak, bound, acc)
}

// Two static members of one group share the work: the second to join
// takes one of the two tasks (partitions a/1 | a/0, b/0), both seal the
// same phases through the watermark topic, and every output partition gets
// every phase. A requested shutdown of one leaves the group explicitly (a
// static member does not leave on close, KIP-345), so the other owns every
// partition again long before the session timeout, and the output stays
// whole across the hand-over.
func TestTwoInstancesShareThenHandOver(t *testing.T) {
	forks := map[string]int32{"a": 2, "b": 1}
	e := newEnv(t, forks, 2)
	// No partition turns idle between the bursts: an idle partition's
	// burst that comes after the other branch's is late (the price of
	// idleness, DESIGN.md invariant 5), and since a partition idle at the
	// hand-over is idle at once for its new owner (commit metadata i),
	// that would be this test's race. Input markers seal each burst's end.
	e.cfg.Watermarks.IdleTimeout = time.Minute
	k := inproc.KafkaFor(e.brokers)
	k.SessionTimeout = 20 * time.Second
	start := func(name string) *inproc.Sidecar { return e.startMember(k, name) }
	owned := partitionsOwned
	base := phaseBase()
	first := start("first")
	t.Cleanup(func() { _ = first.Stop() })
	waitFor(t, 15*time.Second, "the first instance to own every partition", func() bool { return owned(first) == 3 })
	second := start("second")
	waitFor(t, 15*time.Second, "the two instances to own one task each", func() bool {
		return owned(first) > 0 && owned(second) > 0 && owned(first)+owned(second) == 3
	})
	want := grid(e, base, 0, 3, forks, 4)
	e.closeAll(forks, phaseOf(at(base, 2, 0)))
	waitFor(t, 15*time.Second, "phases 0-2 committed by both", func() bool {
		return len(first.Pipeline.Status().Sealed) >= 3 && len(second.Pipeline.Status().Sealed) >= 3
	})
	for _, s := range []*inproc.Sidecar{first, second} {
		st := s.Pipeline.Status()
		mine := 0
		for _, ts := range st.Tasks {
			if ts.Mine {
				mine++
			}
		}
		if len(st.Tasks) != 2 || mine != 1 {
			t.Fatalf("%s: tasks %+v, want 2 tasks of which 1 is its own", st.Instance, st.Tasks)
		}
	}
	stopped := time.Now()
	if err := second.Stop(); err != nil {
		t.Fatalf("second instance stopped with: %v", err)
	}
	waitFor(t, 10*time.Second, "the first instance to own every partition again (session timeout 20s)", func() bool { return owned(first) == 3 })
	t.Logf("first instance owned every partition %s after the second's shutdown began", time.Since(stopped).Round(time.Millisecond))
	for phase, m := range grid(e, base, 3, 6, forks, 4) {
		want[phase] = m
	}
	e.closeAll(forks, phaseOf(at(base, 5, 0)))
	e.settleWhole(want, "the hand-over")
}

// MARKERS.md 2 and 3.3: an input's own phasegate.task (an input that is
// another phasegate's output) never reaches the output; phasegate sets it
// on the data records of a partition with several writers only, to the
// record's writer. Partition routing: one writer, no header. Key routing
// over 2 tasks: the header names the task that holds the input partition.
func TestTaskHeaderIsPhasegatesOwn(t *testing.T) {
	tests := []struct {
		name    string
		routing align.Routing
		tasks   int32
		want    func(inputPartition int32) string // "" = no header
	}{
		{"partition routing writes none", align.RoutePartition, 0, func(int32) string { return "" }},
		{"key routing over 2 tasks writes the lane", align.RouteKey, 2, func(p int32) string { return strconv.Itoa(int(p % 2)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forks := map[string]int32{"a": 2}
			e := newEnv(t, forks, 2)
			e.cfg.Routing, e.cfg.Tasks = tt.routing, tt.tasks
			base := phaseBase()
			var recs []rec
			for i := range 40 {
				recs = append(recs, rec{topic: "a", partition: int32(i % 2), ts: at(base, i/10, i%10), key: "k" + strconv.Itoa(i), task: "7"})
			}
			e.write(recs...)
			e.start()
			e.settle(15 * time.Second)
			data := 0
			for _, part := range readOutput(t, e) {
				for _, r := range part {
					meta, err := markers.Inspect(r.Headers)
					if err != nil {
						t.Fatal(err)
					}
					if meta.Marker {
						continue
					}
					data++
					_, from, _, err := markers.ParseSource(meta.Source)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := string(meta.Task), tt.want(from); got != want {
						t.Fatalf("record from %s: phasegate.task %q, want %q", meta.Source, got, want)
					}
				}
			}
			if data != len(recs) {
				t.Fatalf("read %d data records, want %d", data, len(recs))
			}
		})
	}
}
