//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// R2's base records per sub-run, sized so that the whole of R2 fits CI in
// a few minutes (PHASEGATE_E2E_RECORDS lowers them further): paced, the
// sidecars follow the producer for 20 s; up front, they need a backlog
// that lasts beyond the faults (3 instances committed 100,000 in 2 to 3 s).
const (
	r2PacedRecords   = 30_000
	r2UpfrontRecords = 200_000
)

// r2Tasks is R2's PHASEGATE_TASKS: every output partition has 3 writers.
const r2Tasks = 3

// R2: the layout issue 32's silent partial phases were seen on (three
// sidecars in one group, PHASEGATE_ROUTING=key, PHASEGATE_TASKS=3, forks
// of 7, 3 and 1 partitions, an output of 7), once with the input paced
// over event time and once with all of it written before the sidecars
// start. One sidecar is SIGSTOPped while the broker shows its transaction
// Ongoing, kept stopped until the group evicted it (longer than the
// session timeout) and the others committed more, then SIGCONTed: it must
// be fenced (exit non-zero, or rewind and rejoin) and commit nothing
// first. Then one is SIGKILLed (its supervisor restarts it). Each fault
// goes to the instance with the most input left on its partitions.
//
// Meanwhile the Go, Java and Python readers each read the output in a
// group of their own from offset 0, and are each SIGKILLed and restarted
// in that group after a third, half and two thirds of the phases; the
// group's commit is read right after each kill. After the sidecars
// stopped, each reader also reads once in a new group whose offsets were
// set by hand, with no metadata, in the middle of every partition.
//
// The check: the scenario's usual one (every input in the output or the
// quarantine exactly once, MARKERS.md 3.2 and 3.3 on the output, no open
// transaction, ...), the output is version 2 of 3 writers, and each
// reader's lines against the output read from offset 0 by markers.Reader
// (judge): every phase printed whole, none short, none missing; a
// repeat only of a phase above the "done" committed before the kill;
// skips only from the hand-set offsets.
func TestR2FleetReaders(t *testing.T) {
	b := needBroker(t)
	for _, c := range []struct {
		name    string
		upfront bool
	}{{"paced", false}, {"upfront", true}} {
		t.Run(c.name, func(t *testing.T) { runR2(t, b, "R2-"+c.name, c.upfront) })
	}
}

func runR2(t *testing.T, b *broker, name string, upfront bool) {
	sc := newShapedScenario(t, b, name, fleetShape)
	sc.env["PHASEGATE_ROUTING"] = "key"
	sc.env["PHASEGATE_TASKS"] = fmt.Sprint(r2Tasks)
	var faults []string
	verdicts := map[string]string{}
	var vmu sync.Mutex // guards verdicts: the readers are judged in parallel
	sc.note = func() string {
		vmu.Lock()
		defer vmu.Unlock()
		var rs []string
		for _, n := range readerNames {
			if v, ok := verdicts[n]; ok {
				rs = append(rs, n+": "+v)
			}
		}
		return fmt.Sprintf("faults: %s; readers: %s;", strings.Join(faults, ", "), strings.Join(rs, "; "))
	}
	cmd := buildReaders(t, strings.Join(b.addrs, ","), sc.topo.orders, sc.topo.payments)
	n := r2PacedRecords
	if upfront {
		n = r2UpfrontRecords
	}
	if os.Getenv("PHASEGATE_E2E_RECORDS") != "" {
		n = min(n, records())
	}
	p := newPlanN(sc.topo, 32, n, nil)
	p.upfront = upfront
	expected := expectedLines(p, sc.topo.outParts)

	// The readers start with the sidecars, each in its own group; a
	// failed scenario ends them.
	rctx, stopReaders := context.WithCancel(sc.ctx)
	var wg sync.WaitGroup
	groups := map[string]*readerGroup{}
	finals := map[string]chan map[phaseKey]truePhase{}
	for _, n := range readerNames {
		g := &readerGroup{name: n, group: sc.group + "-" + n, dir: sc.dir, printed: map[phaseKey]bool{}}
		g.args = cmd(n, sc.topo.out, g.group, 0)
		final := make(chan map[phaseKey]truePhase, 1)
		groups[n], finals[n] = g, final
		kills := []int{expected / 3, expected / 2, expected * 2 / 3}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.follow(rctx, t, sc.cl, sc.topo.out, kills, final)
		}()
	}
	defer func() { stopReaders(); wg.Wait() }()

	// Up front: every record is written before the first sidecar starts,
	// which then takes every task until the others join. Paced: the
	// three share the tasks before the first record is written, so that
	// the faults below land where they say.
	sc.plan = p
	if upfront {
		sc.startProducer(p)
		if err := sc.prod.wait(sc.ctx); err != nil {
			t.Fatalf("producing the input: %v", err)
		}
	}
	sc.startSidecar()
	sc.addInstance("b")
	sc.addInstance("c")
	sc.waitShared(3)
	if !upfront {
		sc.startProducer(p)
	}
	// Each fault goes to the instance with the most input left to commit
	// (with all input up front, an instance whose tasks are done has
	// nothing open to lose). Paced, the pause comes at 15 % and the kill
	// at 35 %. Up front, the three commit 100,000 records in 2 to 3 s
	// once they share the tasks: both faults come at once, the kill while
	// the other instance is stopped (its tasks hold the fleet's watermark,
	// F3, so the backlog waits for the eviction).
	var ps *pause
	if upfront {
		ps = sc.pauseInTransaction(sc.busiest(nil))
		faults = append(faults, sc.killAndRejoin(sc.busiest(ps.s)))
		faults = append([]string{sc.resumeFenced(ps)}, faults...)
	} else {
		sc.waitProgress(0.15)
		ps = sc.pauseInTransaction(sc.busiest(nil))
		faults = append(faults, sc.resumeFenced(ps))
		sc.waitProgress(0.35)
		faults = append(faults, sc.killAndRejoin(sc.busiest(ps.s)))
	}

	sc.finish()
	r := sc.check()
	checkWriters(t, r.outRecs, r2Tasks)
	truth, last, err := truthOf(r.outRecs)
	if err != nil {
		t.Errorf("the output read from offset 0 by markers.Reader: %v", err)
	}
	t.Logf("the output holds %d phase-partitions (expected about %d from the plan)", len(truth), expected)
	for _, n := range readerNames {
		finals[n] <- truth
	}
	wg.Wait()

	// Each reader once more, in a new group set by hand mid-partition.
	mids := map[string]*readerRun{}
	starts := map[string]map[int32]int64{}
	var mmu sync.Mutex // guards mids and starts
	var mwg sync.WaitGroup
	for _, n := range readerNames {
		mwg.Add(1)
		go func() {
			defer mwg.Done()
			group := sc.group + "-" + n + "-mid"
			at, err := setMidOffsets(sc.ctx, sc.adm, sc.topo.out, group)
			if err != nil {
				t.Errorf("reader %s: set the offsets of %s by hand: %v", n, group, err)
				return
			}
			run := &readerRun{}
			var lmu sync.Mutex
			p, err := startReaderProc(cmd(n, sc.topo.out, group, 10), filepath.Join(sc.dir, n+"-mid.stderr"), run,
				func(l string) { lmu.Lock(); run.lines = append(run.lines, l); lmu.Unlock() })
			if err != nil {
				t.Errorf("reader %s: %v", n, err)
				return
			}
			select {
			case <-p.done:
			case <-time.After(3 * time.Minute):
				_ = p.cmd.Process.Signal(syscall.SIGKILL)
				<-p.done
				t.Errorf("reader %s in %s still ran after 3 minutes", n, group)
			}
			run.ok = run.code == 0
			mmu.Lock()
			mids[n], starts[n] = run, at
			mmu.Unlock()
		}()
	}
	mwg.Wait()

	for _, n := range readerNames {
		g := groups[n]
		v := judge(truth, g.runs, nil)
		line := v.summary()
		if run, ok := mids[n]; ok {
			mv := judge(truth, []*readerRun{run}, &midStart{at: starts[n], last: last})
			line += fmt.Sprintf(" mid_lines=%d mid_skips=%d mid_unreported=%d mid_errors=%d", mv.lines, mv.skips, mv.pending, len(mv.errs))
			for _, e := range mv.errs {
				v.errs = append(v.errs, "hand-set offsets "+fmt.Sprint(starts[n])+": "+e)
			}
		}
		if v.kills < 3 {
			v.errorf("killed %d times, want 3", v.kills)
		}
		vmu.Lock()
		verdicts[n] = line
		vmu.Unlock()
		if len(v.errs) > 0 {
			t.Errorf("reader %s (%s): %d problems (stderr of each run in %s):\n%s", n, line, len(v.errs), sc.dir,
				strings.Join(v.errs[:min(len(v.errs), maxShown)], "\n"))
		}
	}
}

// startProducer writes p in the background (paced, or all at once when
// p.upfront).
func (sc *scenario) startProducer(p *plan) {
	sc.t.Helper()
	pr, err := produce(sc.ctx, sc.b.addrs, p, nil)
	if err != nil {
		sc.t.Fatal(err)
	}
	sc.prod = pr
}

// startSidecar starts the scenario's first supervised sidecar.
func (sc *scenario) startSidecar() {
	sc.t.Helper()
	var env []string
	for k, v := range sc.env {
		env = append(env, k+"="+v)
	}
	sc.sup = newSupervisor(sc.t, sc.dir, env)
	sc.sup.start()
}

// expectedLines is about how many phase lines a reader prints for p: a
// marker on every output partition for every phase that holds data.
func expectedLines(p *plan, outParts int32) int {
	phases := map[uint64]bool{}
	for _, r := range p.records {
		phases[phaseOf(r.rec.Timestamp)] = true
	}
	return len(phases) * int(outParts)
}

// busiest returns the supervisor, other than not, whose instance has the
// most input left to commit on the partitions it holds.
func (sc *scenario) busiest(not *supervisor) *supervisor {
	sc.t.Helper()
	ctx, cancel := context.WithTimeout(sc.ctx, 10*time.Second)
	defer cancel()
	offs, err := sc.adm.FetchOffsets(ctx, sc.group)
	if err != nil {
		sc.t.Fatal(err)
	}
	ends, err := sc.adm.ListEndOffsets(ctx, sc.topo.inputs()...)
	if err != nil {
		sc.t.Fatal(err)
	}
	var best *supervisor
	most := int64(-1)
	for _, s := range sc.supervisors() {
		in := s.current()
		if in == nil || s == not { // not may be stopped: it would not answer
			continue
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := in.phases(pctx)
		pcancel()
		if err != nil {
			continue
		}
		left := int64(0)
		for _, p := range st.Partitions {
			end, _ := ends.Lookup(p.Topic, p.Partition)
			c, ok := offs.Lookup(p.Topic, p.Partition)
			if !ok || c.At < 0 {
				c.At = 0
			}
			left += max(0, end.Offset-c.At)
		}
		if left > most {
			best, most = s, left
		}
	}
	if best == nil {
		sc.t.Fatal("no instance but the excluded one answers /phases")
	}
	return best
}

// idOf is the transactional ID of s's instances.
func (sc *scenario) idOf(s *supervisor) string {
	for i, x := range sc.supervisors() {
		if x == s {
			return sc.txnIDs[i]
		}
	}
	sc.t.Fatal("not a supervisor of the scenario")
	return ""
}

// instanceName is "a" for the scenario's first instance (transactional
// ID base), else the name addInstance gave it.
func instanceName(base, id string) string {
	if n := strings.TrimPrefix(strings.TrimPrefix(id, base), "-"); n != "" {
		return n
	}
	return "a"
}

// killAndRejoin SIGKILLs s's instance, waits for the supervisor's restart
// to own tasks again and then for its first committed phase unless every
// input is committed by then, and says what happened.
func (sc *scenario) killAndRejoin(s *supervisor) string {
	sc.t.Helper()
	in := s.current()
	if in == nil {
		sc.t.Fatal("no instance to kill")
	}
	at := sc.progress()
	if err := in.signal(syscall.SIGKILL); err != nil {
		sc.t.Fatal(err)
	}
	var next *instance
	sc.poll(time.Minute, "the supervisor to restart the killed instance", func() bool {
		next = s.current()
		return next != nil && next != in
	})
	how := "owned no task before the end"
	sc.poll(time.Minute, "the restarted instance to own tasks and commit, or every input committed", func() bool {
		ctx, cancel := context.WithTimeout(sc.ctx, time.Second)
		defer cancel()
		if st, err := next.phases(ctx); err == nil && st.owned() > 0 && st.LastSealed != nil {
			how = fmt.Sprintf("its first phase %s after its restart", time.Since(next.started).Round(10*time.Millisecond))
			return true
		}
		c, e, err := sc.committed()
		return err == nil && c == e
	})
	return fmt.Sprintf("SIGKILL %s at %.0f %% (%s)", instanceName(sc.txnID, sc.idOf(s)), at*100, how)
}

// pause is an instance SIGSTOPped by pauseInTransaction.
type pause struct {
	s       *supervisor
	in      *instance
	id      string
	at      float64 // the committed share of the input when it stopped
	open    bool    // caught with its transaction Ongoing
	stopped time.Time
}

// pauseInTransaction SIGSTOPs s's instance while the broker shows its
// transaction Ongoing (stopInTransactionOf).
func (sc *scenario) pauseInTransaction(s *supervisor) *pause {
	sc.t.Helper()
	p := &pause{s: s, id: sc.idOf(s), in: s.current(), at: sc.progress()}
	if p.in == nil {
		sc.t.Fatal("no instance to pause")
	}
	p.open = sc.stopInTransactionOf(p.in, p.id)
	p.stopped = time.Now()
	if !p.open {
		sc.t.Errorf("instance %s was never caught with its transaction Ongoing (200 tries); paused anyway", p.id)
	}
	return p
}

// resumeFenced keeps p's instance stopped until the group has evicted it,
// for longer than the session timeout, and until the others committed
// more (or everything), then SIGCONTs it. It must then be fenced before it
// commits anything: it exits non-zero, or it logs a rewind or a rejoin
// before any "phase sealed" (fencedHow). It returns what happened, for the
// scenario's line.
func (sc *scenario) resumeFenced(p *pause) string {
	sc.t.Helper()
	poll(sc.t, time.Minute, "the group to evict the paused instance", func() bool {
		ctx, cancel := context.WithTimeout(sc.ctx, 5*time.Second)
		defer cancel()
		dg, err := sc.adm.DescribeGroups(ctx, sc.group)
		if err != nil || dg[sc.group].Err != nil {
			return false
		}
		for _, m := range dg[sc.group].Members {
			if m.InstanceID != nil && *m.InstanceID == p.id {
				return false
			}
		}
		return true
	})
	evicted := time.Since(p.stopped)
	// The coordinator counts the session from the last heartbeat, which
	// can come up to a heartbeat interval before the stop.
	session, _ := time.ParseDuration(sc.env["PHASEGATE_SESSION_TIMEOUT"])
	before, _, _ := sc.committed()
	sc.poll(time.Minute, "the other instances to commit while one is paused", func() bool {
		c, e, err := sc.committed()
		return err == nil && (c > before || c == e) && time.Since(p.stopped) > session+500*time.Millisecond
	})
	if err := p.in.signal(syscall.SIGCONT); err != nil {
		sc.t.Fatal(err)
	}
	cont := time.Now()
	paused := cont.Sub(p.stopped)
	var how string
	poll(sc.t, time.Minute, "the resumed instance to find itself fenced (exit, rewind or rejoin)", func() bool {
		how = fencedHow(sc.t, p.in, cont)
		return how != ""
	})
	if p.in.exited() {
		// The supervisor starts it again, as an orchestrator would; up front
		// the run could end first and find no instance running (CI, once the
		// paused instance was caught producing and exited fenced).
		poll(sc.t, time.Minute, "the fenced instance to be started again", func() bool {
			return p.s.current() != p.in
		})
	}
	return fmt.Sprintf("SIGSTOP %s at %.0f %% (transaction %s) for %s (evicted after %s), then %s",
		instanceName(sc.txnID, p.id), p.at*100, map[bool]string{true: "Ongoing", false: "not caught open"}[p.open],
		paused.Round(100*time.Millisecond), evicted.Round(100*time.Millisecond), how)
}

// fencedHow is how in showed, after cont, that it was fenced: its exit, or
// its first log line of a rewind or a new session; "" while neither
// happened. A "phase sealed" line before that is a commit of the paused
// instance after its group moved on: an error.
func fencedHow(t *testing.T, in *instance, cont time.Time) string {
	t.Helper()
	lines, err := in.lines()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if l.Time.Before(cont) {
			continue
		}
		switch {
		case l.Msg == "phase sealed":
			t.Errorf("the paused instance committed a phase after SIGCONT before it rewound or rejoined:\n%s", l.raw)
			return "committed before it was fenced"
		case strings.HasPrefix(l.Msg, "transaction not committed; rewinding"),
			strings.HasPrefix(l.Msg, "consumer group session failed"),
			strings.HasPrefix(l.Msg, "tasks assigned"),
			strings.HasPrefix(l.Msg, "partitions revoked"):
			return fmt.Sprintf("%q after %s", l.Msg[:min(len(l.Msg), 40)], l.Time.Sub(cont).Round(10*time.Millisecond))
		}
	}
	if in.exited() {
		code := in.state.ExitCode()
		if code == 0 {
			t.Errorf("the paused instance exited 0 after SIGCONT; want non-zero (fenced) or a rewind:\n%s", in.excerpt(10))
		}
		return fmt.Sprintf("exit %d after %s", code, in.exitAt.Sub(cont).Round(10*time.Millisecond))
	}
	return ""
}
