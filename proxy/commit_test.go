package proxy_test

import (
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/phasegate/phasegate/internal/inproc"
)

// While a transaction is in flight the loop keeps reading, deduping and
// buffering: the broker holds the first EndTxn until every record written
// after it has been read, and the output is whole once it lets go.
func TestRecordsAreReadWhileACommitIsInFlight(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 2}, 2)
	release := holdFirstEndTxn(t, e)
	base := phaseBase()
	phases := func(from, to int) []rec {
		var recs []rec
		for ph := from; ph < to; ph++ {
			for p := range int32(2) {
				recs = append(recs, rec{topic: "a", partition: p, ts: at(base, ph, 10)})
			}
		}
		return recs
	}
	e.write(phases(0, 2)...) // phase 1 seals phase 0: the first transaction
	e.start()
	release.wait()
	later := phases(2, 12)
	e.write(later...)
	want := float64(2*2 + len(later))
	waitFor(t, 3*time.Second, "every record written during the held commit to be read", func() bool {
		return counter(t, e, "phasegate_records_in_total", "topic", "a") >= want
	})
	release.let()
	_, acc := e.settle(15 * time.Second)
	if acc.Out != int(want) {
		t.Fatalf("published %d of %d records", acc.Out, int(want))
	}
}

// A rebalance while a transaction is in flight: the first instance's
// session ends only once its commit has finished (a task moves only
// between transactions), so the second instance starts from offsets that
// include it and nothing is published twice. kfake also refuses a session's
// offset fetch while transactional offsets are pending
// (UNSTABLE_OFFSET_COMMIT), so here the output would stay whole even if the
// session did not wait; a real broker answers such a fetch with the offsets
// from before the commit, which is why the session waits.
func TestRebalanceWaitsForTheCommitInFlight(t *testing.T) {
	forks := map[string]int32{"a": 2, "b": 1}
	e := newEnv(t, forks, 2)
	k := inproc.KafkaFor(e.brokers)
	base := k.Base
	k.Base = func() *sarama.Config {
		c := base()
		c.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond // a rebalance is noticed at once
		return c
	}
	start := func(name string) *inproc.Sidecar {
		s := e.startMember(k, name)
		t.Cleanup(func() { _ = s.Stop() })
		return s
	}
	owned := partitionsOwned
	first := start("first")
	waitFor(t, 15*time.Second, "the first instance to own every partition", func() bool { return owned(first) == 3 })

	release := holdFirstEndTxn(t, e)
	t0 := phaseBase()
	want := grid(e, t0, 0, 3, forks, 4)
	release.wait()
	second := start("second")
	// The commit is let go once the second instance owns a task, or after
	// 3 s: a session that started before the commit finished would have
	// read the offsets from before it, and published its phases again.
	for deadline := time.Now().Add(3 * time.Second); owned(second) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("second instance owned %d partitions when the commit was let go", owned(second))
	release.let()
	waitFor(t, 20*time.Second, "the two instances to own one task each", func() bool {
		return owned(first) > 0 && owned(second) > 0
	})
	for phase, m := range grid(e, t0, 3, 6, forks, 4) {
		want[phase] = m
	}
	e.settleWhole(want, "the rebalance")
}

// What the loop reads while a transaction is in flight goes into the next
// one, so it is bounded: with the commit held and twice the bound written
// (one partition, which holds the watermark and is never paused), the loop
// goes on taking the holder's records past half the bound (the next seals
// wait for them), stops once the buffer holds the whole bound, and takes
// the rest once the commit returns.
func TestReadingDuringACommitIsBounded(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 1}, 1)
	e.cfg.Watermarks.MaxBufferBytes = 1 << 20
	release := holdFirstEndTxn(t, e)
	base := phaseBase()
	e.write(rec{topic: "a", ts: at(base, 0, 10)}, rec{topic: "a", ts: at(base, 1, 10)})
	e.start()
	release.wait()
	const n, pad = 200, 10 << 10 // 2 MiB in all, twice the bound
	var later []rec
	for i := range n {
		later = append(later, rec{topic: "a", ts: at(base, 2+i/20, 10), pad: pad})
	}
	e.write(later...)
	bound := e.cfg.Watermarks.MaxBufferBytes
	waitFor(t, 5*time.Second, "the buffer to reach the bound", func() bool {
		return e.sidecar.Pipeline.Status().BufferedBytes >= bound
	})
	// Give the loop time to read on if it did not stop; it must not.
	time.Sleep(500 * time.Millisecond)
	in := counter(t, e, "phasegate_records_in_total", "topic", "a")
	buffered := e.sidecar.Pipeline.Status().BufferedBytes
	// The loop checks the bound before each record: it overshoots by one.
	if in >= 2+n || buffered > bound+2*pad {
		t.Fatalf("read %v of %d records, %d bytes buffered, while the commit was held: want the loop to stop once the buffer holds the bound (%d bytes)", in, 2+n, buffered, bound)
	}
	t.Logf("while the commit was held: read %v of %d records, %d bytes buffered (bound %d)", in, 2+n, buffered, bound)
	release.let()
	_, acc := e.settle(20 * time.Second)
	if acc.Out != 2+n {
		t.Fatalf("published %d of %d records", acc.Out, 2+n)
	}
}

// heldCommit is the first EndTxn, held at the broker until let go.
type heldCommit struct {
	t       *testing.T
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

// holdFirstEndTxn makes kfake hold the first EndTxn (the first commit) until
// let is called (at the latest at cleanup); later ones pass.
func holdFirstEndTxn(t *testing.T, e *env) *heldCommit {
	t.Helper()
	h := &heldCommit{t: t, held: make(chan struct{}), release: make(chan struct{})}
	var first sync.Once
	e.cluster.ControlKey(kmsg.EndTxn.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		hold := false
		first.Do(func() { hold = true })
		if hold {
			close(h.held)
			e.cluster.SleepControl(func() { <-h.release })
		} else {
			e.cluster.KeepControl()
		}
		return nil, nil, false // the broker then handles it as usual
	})
	t.Cleanup(h.let)
	return h
}

// wait waits until the first EndTxn is held.
func (h *heldCommit) wait() {
	h.t.Helper()
	select {
	case <-h.held:
	case <-time.After(20 * time.Second):
		h.t.Fatal("no EndTxn reached the broker")
	}
}

// let lets the held EndTxn go; safe to call twice.
func (h *heldCommit) let() { h.once.Do(func() { close(h.release) }) }
