package proxy_test

import (
	"testing"
	"time"

	"github.com/phasegate/phasegate/internal/inproc"
)

// heldPhase writes phase 0 on both partitions of a and phase 5 on a/0 only
// (strict mode: no idle timeout), so that a/1 holds phase 0 open, and
// returns the environment, not started, and the phases' base time.
func heldPhase(t *testing.T) (*env, time.Time) {
	e := newEnv(t, map[string]int32{"a": 2}, 1)
	e.cfg.Watermarks.IdleTimeout = 0
	base := phaseBase()
	e.write(rec{topic: "a", partition: 0, ts: at(base, 0, 1)}, rec{topic: "a", partition: 1, ts: at(base, 0, 2)},
		rec{topic: "a", partition: 0, ts: at(base, 5, 1)})
	return e, base
}

// The oldest open phase streams into the open transaction, invisible to
// read_committed until its seal commits it with its markers and offsets.
func TestAPhaseStreamsBeforeItsSeal(t *testing.T) {
	e, base := heldPhase(t)
	k := inproc.KafkaFor(e.brokers)
	k.TransactionTimeout = time.Minute // StreamFor 15 s: no fallback within the test
	s, err := inproc.StartSidecar(k, e.cfg, e.logger())
	if err != nil {
		t.Fatal(err)
	}
	e.sidecar = s
	t.Cleanup(func() { _ = s.Stop() })
	waitFor(t, 10*time.Second, "phase 0's two records streamed", func() bool {
		return counter(t, e, "phasegate_streamed_records_total") >= 2
	})
	if out := readOutput(t, e); len(out[0]) != 0 {
		t.Fatalf("read_committed sees %d records before the seal, want 0", len(out[0]))
	}
	e.write(rec{topic: "a", partition: 1, ts: at(base, 5, 2)}) // seals 0
	e.closeAll(map[string]int32{"a": 2}, phaseOf(at(base, 5, 0)))
	_, acc := e.settle(15 * time.Second)
	if acc.Out != 4 {
		t.Fatalf("published %d records, want 4", acc.Out)
	}
	if n := counter(t, e, "phasegate_transactions_total", "result", "aborted"); n != 0 {
		t.Errorf("%v transactions aborted, want 0", n)
	}
}

// A straggler holding the streaming phase past StreamFor (a quarter of the
// inproc transaction timeout of 5 s) makes it fall back: the transaction is
// aborted and counted, and the phase's seal writes every record once.
func TestAStragglerMakesThePhaseFallBack(t *testing.T) {
	e, base := heldPhase(t)
	e.start()
	// The fallback is counted when the session decides it; the abort when
	// the committer goroutine has carried it out, a moment later.
	waitFor(t, 10*time.Second, "phase 0 to fall back and its transaction to be aborted", func() bool {
		return counter(t, e, "phasegate_stream_fallbacks_total") == 1 &&
			counter(t, e, "phasegate_transactions_total", "result", "aborted") >= 1
	})
	e.write(rec{topic: "a", partition: 1, ts: at(base, 0, 3)}, rec{topic: "a", partition: 1, ts: at(base, 5, 2)})
	e.closeAll(map[string]int32{"a": 2}, phaseOf(at(base, 5, 0)))
	_, acc := e.settle(15 * time.Second)
	if acc.Out != 5 {
		t.Fatalf("published %d records, want 5", acc.Out)
	}
	if n := counter(t, e, "phasegate_stream_fallbacks_total"); n != 1 {
		t.Errorf("%v fallbacks, want 1 (the phase does not stream again)", n)
	}
	if n := counter(t, e, "phasegate_transactions_total", "result", "aborted"); n != 1 {
		t.Errorf("%v transactions aborted, want the fallback's 1", n)
	}
}

// A shutdown while a phase streams aborts the open transaction, so that it
// holds no reader back, and the next instance publishes the phase once.
func TestShutdownAbortsTheStreamingTransaction(t *testing.T) {
	e, base := heldPhase(t)
	e.start()
	waitFor(t, 10*time.Second, "phase 0 streamed", func() bool {
		return counter(t, e, "phasegate_streamed_records_total") >= 2
	})
	first := e.sidecar
	e.stop()
	e.sidecar = first // its registry, for the counter
	if n := counter(t, e, "phasegate_transactions_total", "result", "aborted"); n != 1 {
		t.Fatalf("%v transactions aborted at shutdown, want 1", n)
	}
	e.start()
	e.write(rec{topic: "a", partition: 1, ts: at(base, 5, 2)})
	e.closeAll(map[string]int32{"a": 2}, phaseOf(at(base, 5, 0)))
	_, acc := e.settle(15 * time.Second)
	if acc.Out != 4 {
		t.Fatalf("published %d records, want 4", acc.Out)
	}
}
