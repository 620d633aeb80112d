//go:build e2e

package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// F8: SIGKILL the sidecar once; the supervisor restarts it 0.5 s later
// with the same transactional ID, hence the same static group member name
// (PHASEGATE_INSTANCE_ID's default). The session timeout is 30 s, as by
// default: a dynamic member would wait for the dead one's session to
// expire before anything is consumed again. The time from the new
// process's start to the next committed transaction is measured and
// printed; it must stay below half the session timeout: a dynamic member
// waits for the dead one's session to expire, at least the session timeout
// less one heartbeat interval (session/5) less the restart delay, so about
// 23 s here (24.5 s measured with the build before static membership),
// where the static member took 0.3 s. Then the usual check.
func TestF8FastRestart(t *testing.T) {
	const session = 30 * time.Second
	sc := newScenario(t, "F8")
	sc.env["PHASEGATE_SESSION_TIMEOUT"] = "30s"
	sc.start(newPlan(sc.topo, 8, nil), nil)
	sc.waitProgress(0.3)
	in := sc.sup.current()
	if in == nil {
		t.Fatal("no sidecar running")
	}
	if err := in.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !in.wait(40 * time.Second) {
		t.Fatal("the killed sidecar did not exit")
	}
	before, _, err := sc.committed()
	if err != nil {
		t.Fatal(err)
	}
	var next *instance
	sc.poll(time.Minute, "the supervisor to restart the sidecar", func() bool {
		next = sc.sup.current()
		return next != nil && next != in
	})
	var resumed time.Time
	sc.poll(2*session, "a transaction committed by the restarted sidecar", func() bool {
		c, _, err := sc.committed()
		if err == nil && c > before {
			resumed = time.Now()
			return true
		}
		return false
	})
	took := resumed.Sub(next.started)
	fmt.Printf("F8 restart: next committed transaction %s after the restarted process started (session timeout %s)\n",
		took.Round(10*time.Millisecond), session)
	if took >= session/2 {
		t.Errorf("the restarted sidecar waited %s, not less than half the session timeout %s: static membership did not give its partitions back", took, session)
	}
	sc.finish()
	sc.check()
}
