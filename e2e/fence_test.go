//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phasegate/phasegate/markers"
)

// F4: a zombie. Instance A is stopped (SIGSTOP) with a transaction open;
// instance B starts with the same transactional ID and takes over; A is
// continued (SIGCONT). A must commit nothing after B started, and exit
// non-zero (fenced).
func TestF4Zombie(t *testing.T) {
	sc := newScenario(t, "F4")
	sc.start(newPlan(sc.topo, 4, nil), nil)
	sc.waitProgress(0.25)
	a := sc.sup.detach() // A is not restarted from here on
	open := sc.stopInTransaction(a)
	before := sc.committedPhases()
	bStart := time.Now()
	b := sc.sup.start()
	t.Logf("A (instance %d) stopped with its transaction %s; B (instance %d) started; %d phases committed before B",
		a.n, map[bool]string{true: "open", false: "not caught open"}[open], b.n, len(before))

	// B must own the partitions and commit before A comes back.
	p0 := sc.progress()
	sc.waitProgress(p0 + 0.05)
	if err := a.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	contAt := time.Now()
	if !a.wait(60 * time.Second) {
		t.Errorf("A (the zombie) still runs 60 s after SIGCONT; it should have found itself fenced and exited non-zero:\n%s", a.excerpt(15))
		_ = a.signal(syscall.SIGKILL)
		a.wait(10 * time.Second)
	} else if code := a.state.ExitCode(); code == 0 {
		t.Errorf("A (the zombie) exited 0 after SIGCONT; want non-zero (fenced):\n%s", a.excerpt(15))
	} else {
		t.Logf("A exited %d, %s after SIGCONT", code, a.exitAt.Sub(contAt).Round(time.Millisecond))
	}
	sc.checkZombieLog(a, bStart, before)
	sc.finish()
	sc.check()
}

// checkZombieLog fails when A logged a committed phase after B started,
// unless that phase was already committed before B started (A logs a
// commit just after it happened; the stop can fall in between).
func (sc *scenario) checkZombieLog(a *instance, bStart time.Time, before map[uint64]bool) {
	sc.t.Helper()
	lines, err := a.lines()
	if err != nil {
		sc.t.Fatal(err)
	}
	sealed := 0
	for _, l := range lines {
		if l.Msg != "phase sealed" {
			continue
		}
		sealed++
		if l.Time.After(bStart) && (l.Phase == nil || !before[*l.Phase]) {
			sc.t.Errorf("A (the zombie) committed after B started at %s:\n%s", bStart.Format(time.RFC3339Nano), l.raw)
		}
	}
	if sealed == 0 {
		sc.t.Errorf("A logged no \"phase sealed\" line at all: the log check would prove nothing (is PHASEGATE_LOG_LEVEL=debug?)")
	}
}

// committedPhases is the set of phases with a marker in the output, read
// with read_committed.
func (sc *scenario) committedPhases() map[uint64]bool {
	sc.t.Helper()
	parts, err := readAll(sc.ctx, sc.b.addrs, sc.topo.out, true)
	if err != nil {
		sc.t.Fatal(err)
	}
	out := map[uint64]bool{}
	for _, r := range flatten(parts) {
		if header(r, markers.HeaderMarker) == "1" {
			ph, err := markers.ParsePhase([]byte(header(r, markers.HeaderPhase)))
			if err == nil {
				out[ph] = true
			}
		}
	}
	return out
}

// F5: the sidecar is paused (SIGSTOP) with a transaction open, longer than
// its transaction timeout, until the broker has aborted that transaction
// itself; then it is continued. The session timeout is raised above the
// pause, so the group does not move on: only the transaction times out.
func TestF5PauseBeyondTransactionTimeout(t *testing.T) {
	sc := newScenario(t, "F5")
	sc.env["PHASEGATE_SESSION_TIMEOUT"] = "30s"
	sc.start(newPlan(sc.topo, 5, nil), nil)
	sc.waitProgress(0.3)
	in := sc.sup.current()
	open := sc.stopInTransaction(in)
	pausedAt := time.Now()
	state := "not caught open"
	if open {
		// The broker aborts a timed-out transaction on its next check
		// (transaction.abort.timed.out.transaction.cleanup.interval.ms,
		// 10 s by default), so wait for that rather than guess.
		sc.poll(time.Minute, "the broker to abort the paused sidecar's transaction", func() bool {
			state = sc.txnState()
			return state != "Ongoing" && time.Since(pausedAt) > 5*time.Second
		})
	} else {
		hold(sc, 6*time.Second)
	}
	paused := time.Since(pausedAt)
	if err := in.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("instance %d paused %s with its transaction %s (broker state at SIGCONT: %s)",
		in.n, paused.Round(100*time.Millisecond), map[bool]string{true: "open", false: "not caught open"}[open], state)
	if paused < 5*time.Second {
		t.Errorf("paused %s, not longer than the 5 s transaction timeout", paused)
	}
	sc.finish()
	sc.check()
	if in.exited() {
		t.Logf("the paused instance %s; the supervisor restarted it %d times", in.describe(), sc.restarts())
		sc.checkTimeoutNamed(in)
	} else {
		t.Logf("the paused instance recovered without exiting")
	}
}

// checkTimeoutNamed fails unless in, which exited after its transaction
// outlived the transaction timeout, said so: the broker answers with the
// same old-epoch error as when another instance takes over, and an
// operator must not be sent looking for one.
func (sc *scenario) checkTimeoutNamed(in *instance) {
	sc.t.Helper()
	lines, err := in.lines()
	if err != nil {
		sc.t.Fatal(err)
	}
	want := "PHASEGATE_TRANSACTION_TIMEOUT=" + sc.env["PHASEGATE_TRANSACTION_TIMEOUT"]
	for _, l := range lines {
		if l.Level == "ERROR" && strings.Contains(l.Msg, "fenced") {
			if !strings.Contains(l.Msg, want) {
				sc.t.Errorf("the paused instance exited with %q: it was open past the transaction timeout, so the message should name %s", l.Msg, want)
			}
			return
		}
	}
	sc.t.Errorf("the paused instance exited without a fenced error line; the log:\n%s", in.excerpt(10))
}

// stopInTransaction sends SIGSTOP to in at a moment when the broker
// shows its transaction Ongoing: it stops and looks, and continues and
// tries again, up to 200 times. It returns whether it caught one open; the
// instance is stopped either way.
func (sc *scenario) stopInTransaction(in *instance) bool {
	sc.t.Helper()
	return sc.stopInTransactionOf(in, sc.txnID)
}

// stopInTransactionOf is stopInTransaction for an instance whose
// transactional ID is id.
func (sc *scenario) stopInTransactionOf(in *instance, id string) bool {
	sc.t.Helper()
	tick := time.NewTicker(23 * time.Millisecond)
	defer tick.Stop()
	for range 200 {
		if err := in.signal(syscall.SIGSTOP); err != nil {
			sc.t.Fatal(err)
		}
		if sc.txnStateOf(id) == "Ongoing" {
			return true
		}
		if err := in.signal(syscall.SIGCONT); err != nil {
			sc.t.Fatal(err)
		}
		<-tick.C
	}
	if err := in.signal(syscall.SIGSTOP); err != nil {
		sc.t.Fatal(err)
	}
	sc.t.Logf("did not catch instance %d with a transaction open in 200 tries; stopped it anyway", in.n)
	return false
}

// txnState is the broker's state of the sidecar's transactional ID.
func (sc *scenario) txnState() string { return sc.txnStateOf(sc.txnID) }

// txnStateOf is the broker's state of transactional ID id.
func (sc *scenario) txnStateOf(id string) string {
	ctx, cancel := context.WithTimeout(sc.ctx, 5*time.Second)
	defer cancel()
	d, err := sc.adm.DescribeTransactions(ctx, id)
	if err != nil {
		return fmt.Sprintf("error: %v", err)
	}
	tx, ok := d[id]
	if !ok || tx.Err != nil {
		return fmt.Sprintf("error: %v", tx.Err)
	}
	return tx.State
}
