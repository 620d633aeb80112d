package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The recovery step (issue 34 item 2): live input paced over forks of 3 +
// 3 partitions with one fork partition left empty, an output of 3
// (partition routing: 3 tasks), the sidecar's default idle timeout; one
// instance is SIGKILLed once the fleet is steady and restarted
// BENCH_RECOVERY_DOWN later with the same transactional ID. The same with
// the Kafka Streams pass-through (its JVM SIGKILLed and restarted with
// its state directory).
const (
	recoveryForkParts = 3
	recoveryOutParts  = 3
)

// recoveryRun is one SIGKILL and restart.
type recoveryRun struct {
	Who    string // "phasegate" or "Kafka Streams"
	N      int    // instances
	Rep    int
	Rate   float64
	Empty  string // the fork partition left empty
	Victim string // the instance killed (its transactional ID, or its log name)
	// The kill, from the producer's start; the restart's exec, from the kill.
	KillS, DownS float64
	// phasegate: the output's complete phases (every lane of every
	// partition has a marker at or past them, MARKERS.md M8).
	Through   uint64  // complete through this phase at the kill
	NextPhase uint64  // the next one: the first phase above Through to complete
	NextS     float64 // kill → NextPhase complete; 0: never
	// Both: every record produced before the kill visible to read_committed
	// (phasegate: its phase complete).
	CatchS float64
	// Both: the first data record visible after the kill (any partition;
	// survivors may write one at once).
	NextOutS float64
	// The restarted sidecar's log, from its exec: "phasegate started",
	// "tasks assigned", the empty partition logged idle. Kafka Streams:
	// StartedS is exec → its first "state RUNNING".
	StartedS, AssignedS, IdleS float64
	// phasegate, from the watermark topic and the markers, from the exec:
	// the restarted instance's first report, its first report past
	// NextPhase (low above it, or idle), and the seal of NextPhase (the
	// last lane's marker timestamp).
	FirstRepS, PassRepS, NextSealS float64
	Seq                            seqCheck // every record produced, once
	Err                            error
}

// execS is an interval from the kill restated from the restart's exec.
func (r *recoveryRun) execS(fromKill float64) float64 {
	if fromKill <= 0 {
		return 0
	}
	return fromKill - r.DownS
}

// recovery runs phasegate and Kafka Streams, for each instance count of
// BENCH_RECOVERY_INSTANCES, BENCH_RECOVERY_REPEAT times, alternating.
func (r *runner) recovery(ctx context.Context) []*recoveryRun {
	var out []*recoveryRun
	whos := []string{"phasegate"}
	for _, v := range r.cfg.RecoveryStreams {
		if w, ok := map[string]string{"default": streamsDefault, "static": streamsStatic}[v]; ok {
			whos = append(whos, w)
		}
	}
	for rep := 1; rep <= r.cfg.RecoveryRepeat; rep++ {
		for _, n := range r.cfg.RecoveryInstances {
			for _, who := range whos {
				if ctx.Err() != nil {
					return out
				}
				res := r.recoveryOnce(ctx, who, n, rep)
				r.log.Info("recovery", "who", who, "instances", n, "rep", rep, "kill_to_next_phase_s", res.NextS,
					"exec_to_next_phase_s", res.execS(res.NextS), "kill_to_caught_up_s", res.CatchS, "idle_after_exec_s", res.IdleS,
					"lost", res.Seq.Lost, "dups", res.Seq.Dups, "err", res.Err)
				out = append(out, res)
			}
		}
	}
	return out
}

// The Kafka Streams variants of the recovery step: as a user would run it
// (a dynamic member: a restarted instance joins as a new member, and the
// group waits for the dead one's session timeout), and as a static member
// (group.instance.id, as phasegate runs by default).
const (
	streamsDefault = "Kafka Streams"
	streamsStatic  = "Kafka Streams, static member"
)

// recoveryOnce is one run: fresh topics, the relay (k instances), the
// paced producer, the kill and the restart, then the output's analysis.
func (r *runner) recoveryOnce(ctx context.Context, who string, k, rep int) *recoveryRun {
	c := r.cfg
	res := &recoveryRun{Who: who, N: k, Rep: rep, Rate: c.RecoveryRate}
	ctx, cancel := context.WithTimeout(ctx, c.RunTimeout)
	defer cancel()
	name := fmt.Sprintf("%s-rec-%s-%d-r%d", r.tag, map[string]string{"phasegate": "pg", streamsDefault: "ks", streamsStatic: "kss"}[who], k, rep)
	a, b := topicSpec{name + "-a", recoveryForkParts}, topicSpec{name + "-b", recoveryForkParts}
	out, quar := name+"-out", name+"-quarantine"
	if err := createTopics(ctx, c.Brokers, a, b, topicSpec{out, recoveryOutParts}, topicSpec{quar, 1}); err != nil {
		res.Err = err
		return res
	}
	slots := inputSpec{Topics: []topicSpec{a, b}}.slots()
	// The instance to kill, its restart, and what the producer leaves empty.
	var kill func() (stopped time.Time, err error)
	var restart func() (exec time.Time, logPath string, err error)
	var cleanup func()
	var restarted *streamsApp
	empty := slot{topic: b.Name, part: recoveryForkParts - 1}
	switch who {
	case "phasegate":
		e := sidecarEnv{Brokers: c.Brokers, Inputs: []string{a.Name, b.Name}, Output: out, Quarantine: quar, Group: name,
			PhaseLength: c.RecoveryPhase, Routing: "partition", Extra: c.SidecarEnv}
		scs, envs, err := r.startFleet(ctx, e, k, recoveryOutParts)
		if err != nil {
			res.Err = err
			return res
		}
		cleanup = func() { stopFleet(scs) }
		victim := k - 1
		res.Victim = envs[victim].TxnID
		if k > 1 {
			owned, err := ownedPartitions(ctx, scs[victim])
			if err != nil {
				cleanup()
				res.Err = fmt.Errorf("the victim's partitions: %w", err)
				return res
			}
			for _, s := range owned {
				if s.topic == b.Name {
					empty = s
				}
			}
		}
		kill = func() (time.Time, error) {
			scs[victim].p.kill()
			<-scs[victim].p.done
			return time.Now(), nil
		}
		restart = func() (time.Time, string, error) {
			sc, err := startSidecar(c.Sidecar, c.WorkDir, envs[victim])
			if err != nil {
				return time.Time{}, "", err
			}
			scs[victim] = sc
			return sc.p.started, sc.p.log.Name(), nil
		}
	default:
		apps := make([]*streamsApp, k)
		cleanup = func() {
			for _, x := range apps {
				if x != nil {
					x.stop()
				}
			}
		}
		instanceID := func(i int) string {
			if who == streamsStatic {
				return fmt.Sprintf("%s-%d", name, i+1)
			}
			return ""
		}
		for i := range k {
			x, err := r.startStreams(name, fmt.Sprintf("%s-%d", name, i+1), []string{a.Name, b.Name}, out, 1, instanceID(i))
			if err != nil {
				cleanup()
				res.Err = err
				return res
			}
			apps[i] = x
		}
		if err := awaitSettled(ctx, apps, 5*time.Second); err != nil {
			cleanup()
			res.Err = err
			return res
		}
		victim := k - 1
		res.Victim = fmt.Sprintf("%s-%d", name, k)
		kill = func() (time.Time, error) {
			apps[victim].p.kill()
			<-apps[victim].p.done
			return time.Now(), nil
		}
		restart = func() (time.Time, string, error) {
			x, err := r.startStreams(name, res.Victim, []string{a.Name, b.Name}, out, 1, instanceID(victim))
			if err != nil {
				return time.Time{}, "", err
			}
			apps[victim] = x
			restarted = x
			return x.p.started, x.p.log.Name(), nil
		}
	}
	defer cleanup()
	res.Empty = empty.topic + "/" + strconv.Itoa(int(empty.part))
	var live []slot
	for _, s := range slots {
		if s != empty {
			live = append(live, s)
		}
	}

	w, err := watchOutput(ctx, c.Brokers, out)
	if err != nil {
		res.Err = err
		return res
	}
	var reps *reportWatch
	if who == "phasegate" {
		if reps, err = watchReports(ctx, c.Brokers, name+".watermarks"); err != nil {
			w.stop()
			res.Err = err
			return res
		}
		defer reps.stop()
	}
	pc := newPacer(live, false)
	type pacedEnd struct {
		start time.Time
		err   error
	}
	ended := make(chan pacedEnd, 1)
	started := make(chan time.Time, 1)
	go func() {
		st, _, _, err := pc.run(ctx, c.Brokers, c.RecoverySize, c.RecoveryRate, c.RecoveryWarm+c.RecoveryDown+c.RecoveryAfter, started)
		ended <- pacedEnd{st, err}
	}()
	t0 := <-started
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t0.Add(c.RecoveryWarm))):
	}
	target := pc.counts()
	killedAt, err := kill()
	if err == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(killedAt.Add(c.RecoveryDown))):
		}
	}
	var execAt time.Time
	var logPath string
	if err == nil {
		execAt, logPath, err = restart()
	}
	pe := <-ended
	if err == nil {
		err = pe.err
	}
	if err != nil {
		w.stop()
		res.Err = err
		return res
	}
	res.KillS = killedAt.Sub(t0).Seconds()
	res.DownS = execAt.Sub(killedAt).Seconds()
	final := pc.counts()
	// Wait until every record produced is visible (phasegate: the last
	// phases seal once the partitions turn idle, PHASEGATE_IDLE_TIMEOUT
	// after the producer's end), and its phase complete.
	deadline := time.Now().Add(c.RecoveryDrain)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		marks, data, _ := w.snapshot()
		if sc := checkSeqs(data, final); sc.Lost == 0 {
			if who != "phasegate" || allComplete(newLaneView(marks, data, w.visible), data) {
				break
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	w.stop()
	marks, data, werr := w.snapshot()
	res.Seq = checkSeqs(data, final)
	if werr != nil {
		res.Err = werr
	}
	analyseRecovery(res, w, marks, data, target, killedAt)
	if reps != nil {
		reps.stop()
		res.restartSplit(reps, marks, execAt)
	}
	if restarted != nil {
		if t, ok := restarted.runningAfter(execAt); ok {
			res.StartedS = t.Sub(execAt).Seconds()
		}
	}
	if who == "phasegate" && logPath != "" {
		if lines, err := readLog(logPath, execAt.Truncate(time.Millisecond)); err == nil {
			if l, ok := firstLine(lines, `msg="phasegate started"`); ok {
				res.StartedS = l.at.Sub(execAt).Seconds()
			}
			if l, ok := firstLine(lines, `msg="tasks assigned"`); ok {
				res.AssignedS = l.at.Sub(execAt).Seconds()
			}
			if l, ok := firstLine(lines, `msg="partitions idle`, res.Empty); ok {
				res.IdleS = l.at.Sub(execAt).Seconds()
			}
		}
	}
	return res
}

// restartSplit times, from the restart's exec, the restarted instance's
// first report on the watermark topic, its first report past NextPhase,
// and NextPhase's seal.
func (res *recoveryRun) restartSplit(reps *reportWatch, marks []markEv, execAt time.Time) {
	reps.mu.Lock()
	for _, r := range reps.reps {
		at := time.UnixMilli(r.AtMs)
		if r.Owner != res.Victim || at.Before(execAt.Truncate(time.Millisecond)) {
			continue
		}
		if res.FirstRepS == 0 {
			res.FirstRepS = at.Sub(execAt).Seconds()
		}
		if res.PassRepS == 0 && res.NextS > 0 && (r.Low > res.NextPhase || r.Idle) {
			res.PassRepS = at.Sub(execAt).Seconds()
		}
	}
	reps.mu.Unlock()
	var last time.Time
	for _, m := range marks {
		if res.NextS > 0 && m.phase == res.NextPhase {
			last = maxTime(last, m.sealed)
		}
	}
	if !last.IsZero() {
		res.NextSealS = last.Sub(execAt).Seconds()
	}
}

// allComplete reports whether every data record's phase is complete on
// its partition.
func allComplete(v *laneView, data []dataEv) bool {
	for _, d := range data {
		if d.hasPhase {
			if _, ok := v.completeAt(d.part, d.phase); !ok {
				return false
			}
		}
	}
	return true
}

// analyseRecovery fills res's times from the output read.
func analyseRecovery(res *recoveryRun, w *outWatch, marks []markEv, data []dataEv, target []int64, killedAt time.Time) {
	v := newLaneView(marks, data, w.visible)
	if len(marks) > 0 {
		if at, base, ok := v.nextGlobal(killedAt); ok {
			res.Through = base
			res.NextS = at.Sub(killedAt).Seconds()
			res.NextPhase, _ = v.globalThrough(at)
		}
	}
	// Every record produced before the kill: when it (phasegate: its
	// phase) became visible; the latest of them.
	var last time.Time
	found := 0
	for _, d := range data {
		if d.slot < 0 || int(d.slot) >= len(target) || d.seq >= target[d.slot] {
			continue
		}
		at := w.visible(d.part, d.off, d.recv)
		if d.hasPhase {
			c, ok := v.completeAt(d.part, d.phase)
			if !ok {
				continue
			}
			at = c
		}
		found++
		if at.After(last) {
			last = at
		}
	}
	var want int64
	for _, t := range target {
		want += t
	}
	if int64(found) >= want && last.After(killedAt) {
		res.CatchS = last.Sub(killedAt).Seconds()
	}
	var next time.Time
	for _, d := range data {
		if at := w.visible(d.part, d.off, d.recv); at.After(killedAt) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if !next.IsZero() {
		res.NextOutS = next.Sub(killedAt).Seconds()
	}
}

// awaitSettled waits until every JVM is RUNNING and none printed a state
// for quiet: a group of several instances rebalances a few times as they
// join.
func awaitSettled(ctx context.Context, apps []*streamsApp, quiet time.Duration) error {
	if err := awaitRunning(ctx, apps); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		var last time.Time
		running := true
		for _, a := range apps {
			a.mu.Lock()
			if n := len(a.states); n > 0 {
				last = maxTime(last, a.states[n-1].at)
			}
			running = running && a.state == "RUNNING"
			a.mu.Unlock()
		}
		if running && time.Since(last) >= quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("streams did not settle in RUNNING: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitRunning waits until every JVM printed "state RUNNING" and is in
// that state.
func awaitRunning(ctx context.Context, apps []*streamsApp) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		all := true
		for _, a := range apps {
			if a.p.exited() {
				return fmt.Errorf("streams: the JVM exited: %v (log %s)", a.p.err, a.p.log.Name())
			}
			if a.current() != "RUNNING" {
				all = false
			}
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("streams never all RUNNING: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
