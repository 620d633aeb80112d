package proxy_test

import (
	"errors"
	"testing"
	"time"

	"github.com/phasegate/phasegate/internal/inproc"
	"github.com/phasegate/phasegate/tasks"
)

// An instance that joins a running group with another phase length is
// refused: it stops with a *tasks.SettingsError naming the phase length,
// whoever leads the group, and the running instance keeps every task and
// goes on sealing whole phases. (Before, the layout fingerprint left the
// phase length out and both worked side by side, each judging the other's
// phase IDs in its own unit.)
func TestMixedSettingsRefused(t *testing.T) {
	forks := map[string]int32{"a": 2, "b": 1}
	e := newEnv(t, forks, 2)
	k := inproc.KafkaFor(e.brokers)
	first := e.startMember(k, "first")
	t.Cleanup(func() { _ = first.Stop() })
	waitFor(t, 15*time.Second, "the first instance to own every partition", func() bool { return partitionsOwned(first) == 3 })

	cfg := e.cfg
	cfg.TransactionalID, cfg.InstanceID = "phasegate-second", "second"
	cfg.Watermarks.PhaseLength = 2 * phaseLen
	second, err := inproc.StartSidecar(k, cfg, e.logger())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second.Done():
		var se *tasks.SettingsError
		if !errors.As(err, &se) {
			t.Fatalf("the second instance stopped with %v, want a SettingsError", err)
		}
		d := se.Differences()
		if len(d) != 1 || d[0].Key != "phase" || d[0].Mine != "200ms" || d[0].Group != "100ms" {
			t.Fatalf("differences %+v, want the phase length only (200ms here, 100ms in the group)", d)
		}
	case <-time.After(30 * time.Second):
		_ = second.Stop()
		t.Fatal("the second instance, with another phase length, was not refused within 30 s")
	}
	waitFor(t, 15*time.Second, "the first instance to own every partition", func() bool { return partitionsOwned(first) == 3 })
	e.settleWhole(grid(e, phaseBase(), 0, 3, forks, 4), "the refusal")
}
