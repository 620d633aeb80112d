package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The instances step (issue 11): one input, relayed by 1, 2 and 3 sidecars
// of one consumer group (partition routing, a transactional ID each). The
// forks have 6 + 6 partitions and the output 6, so there are
// min(6, 6) = 6 tasks and each of 3 instances owns 2.
const (
	instancesForkParts = 6
	instancesOutParts  = 6
)

// instancesRun is one relay of the input by N instances.
type instancesRun struct {
	N       int
	Records int
	Seconds float64 // first record in (any instance) → last phase's marker visible on every output partition
	Steady  float64 // records/s from the first commit (any instance) to the last phase visible
	CPU     float64 // utime+stime summed over the instances (a killed one's up to its death)
	Phases  int
	Recover *recovery // with a SIGKILL mid-way: the restart's recovery
	Check   error
	Err     error
}

// recovery is what a SIGKILL and immediate restart of one instance cost.
type recovery struct {
	Instance string  // the transactional ID (= static instance ID) restarted
	FleetS   float64 // restart → the output's last stable offsets next move (any instance commits)
	// StallS is the longest the output's last stable offsets stood still
	// between the kill and the run's end: survivors may still seal up to
	// the killed tasks' last report, so FleetS alone can hide the outage.
	StallS float64
	OwnS   float64 // restart → the restarted instance's first committed data records
}

func (r *instancesRun) ok() bool { return r != nil && r.Err == nil && r.Check == nil && r.Seconds > 0 }

func (r *instancesRun) rate() float64 {
	if !r.ok() {
		return 0
	}
	return float64(r.Records) / r.Seconds
}

// instances writes the step's input and relays it with each instance count
// of BENCH_INSTANCES; the runs of BENCH_INSTANCES_KILL instances SIGKILL the
// last instance once half the records are out and restart it at once.
func (r *runner) instances(ctx context.Context) []*instancesRun {
	c := r.cfg
	size, n := c.InstancesSize, c.Records
	name := fmt.Sprintf("%s-inst", r.tag)
	rate := c.InputRate
	if rate == 0 {
		rate = fallbackRate
	}
	spec := inputSpec{
		Topics:  []topicSpec{{name + "-a", instancesForkParts}, {name + "-b", instancesForkParts}},
		Records: n, Size: size, Rate: rate, Trailer: trailerGap,
	}
	spec.Start = time.Now().Add(-time.Duration(float64(n)/rate*float64(time.Second)) - time.Minute).Truncate(time.Second)
	sctx, cancel := r.stepCtx(ctx)
	err := createTopics(sctx, c.Brokers, spec.Topics...)
	var f *fillResult
	if err == nil {
		f, err = fill(sctx, c.Brokers, spec)
	}
	cancel()
	if err != nil {
		return []*instancesRun{{Err: fmt.Errorf("fill: %w", err)}}
	}
	in := relayInput{Topics: []string{spec.Topics[0].Name, spec.Topics[1].Name}, Records: n, LastMs: f.LastMs, OutParts: instancesOutParts}
	var out []*instancesRun
	for _, k := range c.Instances {
		if ctx.Err() != nil {
			break
		}
		res := r.fleetRelay(ctx, fmt.Sprintf("inst-%d", k), in, k, k == c.InstancesKill)
		r.log.Info("instances", "n", k, "seconds", res.Seconds, "records_per_s", res.rate(), "cpu_s", res.CPU,
			"verified", res.Check == nil, "err", res.Err, "recovery", res.Recover)
		out = append(out, res)
	}
	return out
}

// fleetRelay runs k sidecars of one group over in until the last phase is
// visible, then stops them and verifies the output.
func (r *runner) fleetRelay(ctx context.Context, name string, in relayInput, k int, kill bool) *instancesRun {
	res := &instancesRun{N: k, Records: in.Records}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RunTimeout)
	defer cancel()
	e := sidecarEnv{Brokers: r.cfg.Brokers, Inputs: in.Topics, PhaseLength: r.cfg.InstancesPhase, Routing: "partition",
		Extra: r.cfg.SidecarEnv}
	e.Group = fmt.Sprintf("%s-%s", r.tag, name)
	e.Output, e.Quarantine = e.Group+"-out", e.Group+"-quarantine"
	if err := createTopics(ctx, r.cfg.Brokers, topicSpec{e.Output, in.OutParts}, topicSpec{e.Quarantine, 1}); err != nil {
		res.Err = err
		return res
	}
	last := uint64(in.LastMs / e.PhaseLength.Milliseconds())
	scs := make([]*sidecar, k)
	envs := make([]sidecarEnv, k)
	for i := range scs {
		envs[i] = e
		envs[i].TxnID = fmt.Sprintf("%s-%d", e.Group, i+1)
		sc, err := startSidecar(r.cfg.Sidecar, r.cfg.WorkDir, envs[i])
		if err != nil {
			res.Err = err
			return res
		}
		scs[i] = sc
	}
	var killedCPU float64
	var mu sync.Mutex // mu guards scs[k-1] (replaced by the restart) and killedCPU
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, sc := range scs {
			_ = sc.p.stop(20 * time.Second)
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.cfg.Brokers...))
	if err != nil {
		res.Err = err
		return res
	}
	defer cl.Close()

	var firstIn, firstOut time.Time
	var outAtFirst float64
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var restartAt, lastMove time.Time
		var lsoAtRestart, lastLSO int64
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			mu.Lock()
			cur := append([]*sidecar(nil), scs...)
			mu.Unlock()
			var sumIn, sumOut, ownOut float64
			for i, sc := range cur {
				m, err := sc.metrics(wctx)
				if err != nil {
					continue
				}
				sumIn += m["phasegate_records_in_total"]
				sumOut += m["phasegate_records_out_total"]
				if i == k-1 {
					ownOut = m["phasegate_records_out_total"]
				}
			}
			now := time.Now()
			if sumIn > 0 && firstIn.IsZero() {
				firstIn = now
			}
			if sumOut > 0 && firstOut.IsZero() {
				firstOut, outAtFirst = now, sumOut
			}
			switch {
			case kill && restartAt.IsZero() && sumOut >= float64(in.Records)/2:
				lso, err := committedEnd(wctx, cl, e.Output)
				if err != nil {
					continue
				}
				victim := cur[k-1]
				victim.p.kill()
				<-victim.p.done
				sc, err := startSidecar(r.cfg.Sidecar, r.cfg.WorkDir, envs[k-1])
				if err != nil {
					r.log.Error("restarting the killed instance", "err", err)
					return
				}
				restartAt, lsoAtRestart = sc.p.started, lso
				lastMove, lastLSO = time.Now(), lso // the kill; the SIGKILL itself is instant
				mu.Lock()
				killedCPU += victim.p.cpuSeconds()
				scs[k-1] = sc
				mu.Unlock()
				res.Recover = &recovery{Instance: envs[k-1].TxnID}
			case !restartAt.IsZero():
				if lso, err := committedEnd(wctx, cl, e.Output); err == nil && lso > lastLSO {
					if res.Recover.FleetS == 0 && lso > lsoAtRestart {
						res.Recover.FleetS = now.Sub(restartAt).Seconds()
					}
					res.Recover.StallS = max(res.Recover.StallS, now.Sub(lastMove).Seconds())
					lastMove, lastLSO = now, lso
				}
				if res.Recover.OwnS == 0 && ownOut > 0 {
					res.Recover.OwnS = now.Sub(restartAt).Seconds()
				}
			}
		}
	})
	seen, err := awaitFinalMarkers(ctx, r.cfg.Brokers, e.Output, in.OutParts, last)
	stopWatch()
	wg.Wait()
	if err != nil {
		res.Err = err
		return res
	}
	if firstIn.IsZero() {
		firstIn = scs[0].p.started
	}
	res.Seconds = seen.Sub(firstIn).Seconds()
	if !firstOut.IsZero() && seen.After(firstOut) {
		res.Steady = (float64(in.Records) - outAtFirst) / seen.Sub(firstOut).Seconds()
	}
	res.CPU = killedCPU
	for _, sc := range scs {
		if u, err := procUsage(sc.p.pid()); err == nil {
			res.CPU += u.CPU
		}
	}
	for _, sc := range scs {
		if err := sc.p.stop(20 * time.Second); err != nil && !isSignalExit(err) {
			r.log.Warn("sidecar did not stop cleanly", "err", err, "log", sc.p.log.Name())
		}
	}
	chk := verifyOutput(ctx, r.cfg.Brokers, e.Output, e.Quarantine, in.OutParts, last, in.Records)
	res.Check, res.Phases = chk.Err, chk.Phases
	return res
}
