//go:build e2e

package e2e

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// F1: SIGKILL the sidecar three times, each after at least 20 % more of the
// input was committed; the supervisor restarts it.
func TestF1SigkillSidecar(t *testing.T) {
	sc := newScenario(t, "F1")
	sc.start(newPlan(sc.topo, 1, nil), nil)
	sc.bounce(syscall.SIGKILL, 3)
	sc.finish()
	sc.check()
}

// F2: SIGTERM the sidecar three times: each clean shutdown exits 0 within
// its grace period, and the restarted sidecar goes on. Output routed by
// key, so the Java partitioner's agreement is checked on a real broker too.
func TestF2SigtermSidecar(t *testing.T) {
	sc := newScenario(t, "F2")
	sc.env["PHASEGATE_ROUTING"] = "key"
	sc.start(newPlan(sc.topo, 2, nil), nil)
	sc.bounce(syscall.SIGTERM, 3)
	sc.finish()
	r := sc.check()
	// Key routing runs one task by default: version 1, as before several
	// tasks existed.
	checkVersion1(t, r.outRecs)
	part := kgo.StickyKeyPartitioner(nil).ForTopic(sc.topo.out)
	wrong := 0
	for q, recs := range r.outRecs {
		for _, rec := range recs {
			if rec.Key != nil && part.Partition(&kgo.Record{Key: rec.Key}, outParts) != q {
				wrong++
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d output records are not on the partition Kafka's Java partitioner picks for their key", wrong)
	}
}

// F3: SIGKILL the broker mid-run, keep it down, restart it on the same
// ports and data. Needs the broker the suite started itself.
func TestF3BrokerKill(t *testing.T) {
	b := needBroker(t)
	if !b.canRestart() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("F3 needs a broker started by e2e/kafka/kafka.sh; this one came from %s (CI=true: not skipped)", b.source)
		}
		t.Skipf("F3 kills and restarts the broker, which only works for the one kafka.sh started; this one came from %s", b.source)
	}
	sc := newScenario(t, "F3")
	sc.start(newPlan(sc.topo, 3, nil), nil)
	got := sc.waitProgress(0.3)
	before, err := sc.adm.ListEndOffsets(sc.ctx, sc.topo.inputs()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.kill(sc.ctx); err != nil {
		t.Fatalf("kill the broker: %v", err)
	}
	downAt := time.Now()
	t.Logf("broker killed at %.0f %% progress", got*100)
	// The outage lasts longer than the transaction timeout and the idle
	// timeout, so both the sidecar and the producer must ride it out.
	hold(sc, brokerDowntime)
	if err := b.restart(sc.ctx); err != nil {
		t.Fatalf("restart the broker: %v", err)
	}
	t.Logf("broker back after %s", time.Since(downAt).Round(100*time.Millisecond))
	// A record already in the broker before the kill was there to give
	// when the sidecar came back: it must be published (DESIGN.md
	// invariant 5). One the producer could only deliver after the restart
	// may arrive after its partition was judged idle (no record for
	// PHASEGATE_IDLE_TIMEOUT, no lag) and so be late, which is the
	// documented price of a short idle timeout.
	inBroker := func(in input) bool {
		o, ok := before.Lookup(in.rec.Topic, in.rec.Partition)
		return ok && in.rec.Offset < o.Offset
	}
	sc.lateOK = func(in input) bool { return !inBroker(in) }
	sc.finish()
	r := sc.check()
	late, lateInBroker := 0, 0
	for _, in := range r.inputs {
		if r.reasons[in.Source] == markers.ReasonLate {
			late++
			if inBroker(in) {
				lateInBroker++
			}
		}
	}
	t.Logf("%d records quarantined as late; %d of them were in the broker before the kill (must be 0)", late, lateInBroker)
}

// brokerDowntime is how long F3 keeps the broker down before restarting
// it (the restart itself adds the broker's start-up time).
const brokerDowntime = 6 * time.Second

// hold keeps a fault in place for d: the fault's duration is what is being
// tested, not a guess at when something else is ready.
func hold(sc *scenario, d time.Duration) {
	select {
	case <-time.After(d):
	case <-sc.ctx.Done():
		sc.t.Fatalf("scenario timed out while holding a fault: %v", sc.ctx.Err())
	}
}

// bounce sends sig to the supervised sidecar rounds times, each once at
// least 20 % more of the input has been committed since the last round,
// and waits until the supervisor has restarted it.
func (sc *scenario) bounce(sig syscall.Signal, rounds int) {
	sc.t.Helper()
	last := 0.0
	for round := 1; round <= rounds; round++ {
		got := sc.waitProgress(last + 0.2)
		in := sc.sup.current()
		if in == nil || in.exited() {
			sc.t.Fatalf("round %d: no sidecar running to signal", round)
		}
		sigAt := time.Now()
		if err := in.signal(sig); err != nil {
			sc.t.Fatalf("round %d: %v", round, err)
		}
		sc.t.Logf("round %d: %s to instance %d at %.0f %% committed", round, sig, in.n, got*100)
		if !in.wait(40 * time.Second) {
			sc.t.Fatalf("round %d: instance %d still running 40 s after %s", round, in.n, sig)
		}
		if sig == syscall.SIGTERM {
			if code := in.state.ExitCode(); code != 0 {
				sc.t.Errorf("round %d: instance %d exited %d after SIGTERM, want 0:\n%s", round, in.n, code, in.excerpt(20))
			}
			// Two-phase shutdown must fit Kubernetes' 30 s grace period.
			if d := in.exitAt.Sub(sigAt); d > 30*time.Second {
				sc.t.Errorf("round %d: instance %d took %s to shut down, more than 30 s", round, in.n, d)
			}
		}
		sc.poll(time.Minute, "the supervisor to restart the sidecar", func() bool {
			cur := sc.sup.current()
			return cur != nil && cur != in
		})
		last = got
	}
}
