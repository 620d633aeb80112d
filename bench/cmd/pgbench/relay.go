package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// relayResult is one phasegate run over a pre-filled input.
type relayResult struct {
	Size         int
	Phase        time.Duration
	Records      int
	Seconds      float64 // sidecar exec → last phase's marker visible on every output partition
	StartupS     float64 // sidecar exec → first input record read
	CPU          float64 // utime+stime at that moment, seconds
	HWM          int64   // VmHWM at that moment
	RSSFile      int64   // RssFile at that moment: the binary's resident pages, outside Go's memory limit
	BrokerCPU    float64 // the broker's CPU seconds over the run
	Txns         float64
	TxnSeconds   float64 // phasegate_transaction_duration_seconds_sum: time the loop spent in commits
	Phases       int     // phases with a marker in the output
	PeakBuffered int64
	MaxBuffer    int64
	PausedS      float64 // phasegate_paused_seconds_total
	Rewinds      float64
	Fallbacks    float64 // phasegate_stream_fallbacks_total: phases that stopped streaming
	FirstS       float64 // sidecar exec → the group's first committed input offset (the first phase visible)
	Steady       float64 // records/s from the first commit to the last phase visible
	Starve       *starvation
	firstAt      time.Time
	firstOffsets int64 // input offsets committed at firstAt (records: trailers commit last)
	Check        error // the output's verification
	Err          error // the run itself
	Profiles     []string
	Runs         []float64 // records/s of every repetition (0: failed); this is the median
	Txn          *txnTrace // the first transactions one by one (relayInput.TraceTxns)
	Markers      float64   // phasegate_markers_out_total
	Streamed     float64   // phasegate_streamed_records_total
	Reports      int64     // records on the watermark topic (<group>.watermarks) at the end
}

// ok reports whether the run finished and its output verified.
func (r *relayResult) ok() bool { return r != nil && r.Err == nil && r.Check == nil && r.Seconds > 0 }

func (r *relayResult) rate() float64 {
	if !r.ok() {
		return 0
	}
	return float64(r.Records) / r.Seconds
}

// relayInput is an input written by fill.
type relayInput struct {
	Topics   []string
	Records  int
	LastMs   int64
	OutParts int32 // partitions of each output topic; 0: outputPartitions
	Watch    bool  // poll /phases for starving watermark holders
	// TraceTxns follows the sidecar's first transactions one by one
	// (txntrace.go) and reads its log for the slow-transaction warning.
	TraceTxns bool
}

func (in relayInput) outParts() int32 {
	if in.OutParts > 0 {
		return in.OutParts
	}
	return outputPartitions
}

// outputPartitions is the partition count of every output topic: input
// partition p goes to p mod 3, so fork A's 3 and fork B's 2 both spread.
const outputPartitions = 3

// runner holds what every step needs.
type runner struct {
	cfg   config
	log   *slog.Logger
	tools tools
	tag   string // makes this run's topic and group names unique
}

// relay runs the sidecar over in until the last phase is visible, then
// stops it and verifies the output. With e.Pprof it also saves profiles.
func (r *runner) relay(ctx context.Context, name string, in relayInput, size int, e sidecarEnv) *relayResult {
	res := &relayResult{Size: size, Phase: e.PhaseLength, Records: in.Records, MaxBuffer: e.MaxBuffer}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RunTimeout)
	defer cancel()
	e.Brokers, e.Inputs = r.cfg.Brokers, in.Topics
	e.Group = fmt.Sprintf("%s-%s", r.tag, name)
	e.Output, e.Quarantine = e.Group+"-out", e.Group+"-quarantine"
	e.Extra = append(e.Extra, r.cfg.SidecarEnv...)
	outParts := in.outParts()
	if err := createTopics(ctx, r.cfg.Brokers, topicSpec{e.Output, outParts}, topicSpec{e.Quarantine, 1}); err != nil {
		res.Err = err
		return res
	}
	last := uint64(in.LastMs / e.PhaseLength.Milliseconds())
	broker0 := r.brokerCPU()
	bin := r.cfg.Sidecar
	if e.Bin != "" {
		bin = e.Bin
	}
	sc, err := startSidecar(bin, r.cfg.WorkDir, e)
	if err != nil {
		res.Err = err
		return res
	}
	defer func() { _ = sc.p.stop(20 * time.Second) }()

	var profWG sync.WaitGroup
	var prof []string
	flowing := make(chan struct{})
	profCtx, stopProf := context.WithCancel(ctx)
	defer func() { stopProf(); profWG.Wait() }()
	if e.Pprof {
		profWG.Go(func() { prof = r.profileRun(ctx, profCtx, sc, e.Group, flowing) })
	}
	var watchWG sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer func() { stopWatch(); watchWG.Wait() }()
	if in.Watch {
		watchWG.Go(func() {
			st := watchStarvation(watchCtx, sc, r.cfg.PhasesPath)
			res.Starve = &st
		})
	}
	var traceWG sync.WaitGroup
	traceCtx, stopTrace := context.WithCancel(ctx)
	defer func() { stopTrace(); traceWG.Wait() }()
	if in.TraceTxns {
		traceWG.Go(func() { res.Txn = traceTxns(traceCtx, sc) })
	}
	if err := r.awaitRelayed(ctx, sc, res, in.Topics, e.Group, flowing); err != nil {
		res.Err = err
		return res
	}
	seen, err := awaitFinalMarkers(ctx, r.cfg.Brokers, e.Output, outParts, last)
	if err != nil {
		res.Err = err
		return res
	}
	stopWatch()
	watchWG.Wait()
	stopTrace()
	traceWG.Wait()
	res.Seconds = seen.Sub(sc.p.started).Seconds()
	if !res.firstAt.IsZero() && seen.After(res.firstAt) {
		res.Steady = (float64(in.Records) - float64(res.firstOffsets)) / seen.Sub(res.firstAt).Seconds()
	}
	if u, err := procUsage(sc.p.pid()); err == nil {
		res.CPU, res.HWM, res.RSSFile = u.CPU, u.HWM, u.RSSFile
	}
	res.BrokerCPU = r.brokerCPU() - broker0
	if m, err := sc.metrics(ctx); err == nil {
		res.Txns = m["phasegate_transactions_total"]
		res.TxnSeconds = m["phasegate_transaction_duration_seconds_sum"]
		res.PausedS = m["phasegate_paused_seconds_total"]
		res.Rewinds = m["phasegate_rewinds_total"]
		res.Fallbacks = m["phasegate_stream_fallbacks_total"]
		res.Markers = m["phasegate_markers_out_total"]
		res.Streamed = m["phasegate_streamed_records_total"]
	}
	res.Reports = topicEnd(ctx, r.cfg.Brokers, e.Group+".watermarks")
	if res.Txn != nil {
		text, _ := sc.get(ctx, "/metrics?name[]=phasegate_transaction_duration_seconds")
		res.Txn.finish(string(text), sc.p.log.Name(), txnTimeout(e.Extra))
	}
	if st, err := sc.phases(ctx); err == nil {
		res.PeakBuffered, res.MaxBuffer = st.PeakBufferedBytes, st.MaxBufferBytes
	}
	if e.Pprof {
		stopProf() // ends the heap sampler; the 10 s CPU profile runs to its end
		profWG.Wait()
		res.Profiles = prof
		if err := sc.profile(ctx, "/debug/pprof/allocs", filepath.Join(r.cfg.WorkDir, e.Group+".allocs.pb.gz")); err == nil {
			res.Profiles = append(res.Profiles, e.Group+".allocs.pb.gz")
		}
	}
	if err := sc.p.stop(20 * time.Second); err != nil && !isSignalExit(err) {
		r.log.Warn("sidecar did not stop cleanly", "err", err, "log", sc.p.log.Name())
	}
	if res.Txn != nil {
		if ph, at, ok := firstDataSeal(ctx, r.cfg.Brokers, e.Output, outParts); ok {
			res.Txn.FirstPhase, res.Txn.FirstSealS, res.Txn.FirstMarker = ph, at.Sub(sc.p.started).Seconds(), true
		}
	}
	chk := verifyOutput(ctx, r.cfg.Brokers, e.Output, e.Quarantine, outParts, last, in.Records)
	res.Check, res.Phases = chk.Err, chk.Phases
	r.log.Info("phasegate relay", "run", name, "records", in.Records, "seconds", res.Seconds,
		"records_per_s", res.rate(), "cpu_s", res.CPU, "hwm_mib", res.HWM>>20, "txns", res.Txns,
		"phases", res.Phases, "verified", res.Check == nil, "check", res.Check)
	return res
}

// awaitRelayed waits until the sidecar committed every input offset but
// the trailers'. It watches the group's committed offsets through the
// broker, as the Streams run does: phasegate commits them in the
// transaction that makes a phase visible, so the first commit is the first
// output. A trailer stays buffered in its phase, which seals only once
// every partition turned idle, so its offset commits
// PHASEGATE_IDLE_TIMEOUT later: each non-empty partition's target is its
// end offset - 1 (the trailer is its last record, fill). Until the first
// input record is read it also polls /metrics (the records-in counter; it
// closes flowing then) and stops: a scrape gathers every series, and at
// 2,048 partitions polls at 10 Hz took a quarter of the sidecar's CPU
// (BENCH_PROFILE=1, bench/results/2026-12-06-3d1219c7-20.md).
func (r *runner) awaitRelayed(ctx context.Context, sc *sidecar, res *relayResult, topics []string, group string, flowing chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.cfg.Brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := endOffsets(ctx, adm, topics)
	if err != nil {
		return fmt.Errorf("input end offsets: %w", err)
	}
	targets := withoutTrailers(ends)
	g, err := awaitGroup(ctx, adm, group, targets, sc.p, "the sidecar", r.cfg.StallTimeout, func() {
		if res.StartupS > 0 {
			return
		}
		if m, err := sc.metrics(ctx, "phasegate_records_in_total"); err == nil && m["phasegate_records_in_total"] > 0 {
			res.StartupS = time.Since(sc.p.started).Seconds()
			close(flowing)
		}
	})
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	res.firstAt, res.firstOffsets = g.firstAt, g.firstOffsets
	res.FirstS = g.firstAt.Sub(sc.p.started).Seconds()
	return nil
}

// withoutTrailers is ends with each non-empty partition's offset one lower:
// the offset of its trailer, the last record fill wrote to it.
func withoutTrailers(ends kadm.ListedOffsets) kadm.ListedOffsets {
	out := kadm.ListedOffsets{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			o.Offset--
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]kadm.ListedOffset{}
		}
		out[o.Topic][o.Partition] = o
	})
	return out
}

// profileRun takes a 10 s CPU profile once records flow and, until ctx
// ends, an in-use heap profile (after a GC: live objects) whenever the
// sidecar's heap in use, scraped every 2 s, grew 10 % past the largest
// seen, so the last one saved shows the live heap near its peak. It
// returns the files written under the work dir.
func (r *runner) profileRun(ctx, heapCtx context.Context, sc *sidecar, name string, flowing <-chan struct{}) []string {
	select {
	case <-flowing:
	case <-heapCtx.Done():
		return nil
	}
	var out []string
	var mu sync.Mutex
	save := func(path, file string) {
		if err := sc.profile(ctx, path, filepath.Join(r.cfg.WorkDir, file)); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("profile", "path", path, "err", err)
			}
			return
		}
		mu.Lock()
		if !slices.Contains(out, file) {
			out = append(out, file)
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() { save("/debug/pprof/profile?seconds=10", name+".cpu.pb.gz") })
	var peak float64
	// Every 2 s: a scrape gathers every series, filtered or not, and at
	// 2,048 partitions scrapes 4 times a second were 16 % of the CPU the
	// profile beside them showed.
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for heapCtx.Err() == nil {
		select {
		case <-heapCtx.Done():
		case <-tick.C:
		}
		m, err := sc.metrics(heapCtx)
		if err != nil {
			continue
		}
		if h := m["go_memstats_heap_inuse_bytes"]; h > 1.1*peak {
			peak = h
			save("/debug/pprof/heap?gc=1", name+".heap.pb.gz")
		}
	}
	wg.Wait()
	return out
}

// brokerCPU is the broker's CPU seconds so far, 0 when unknown.
func (r *runner) brokerCPU() float64 {
	pid, err := brokerPID(r.cfg.KafkaDir)
	if err != nil {
		return 0
	}
	u, err := procUsage(pid)
	if err != nil {
		return 0
	}
	return u.CPU
}

// isSignalExit reports whether err is the exit of a process we signalled.
func isSignalExit(err error) bool {
	var ee interface{ ExitCode() int }
	return errors.As(err, &ee) && ee.ExitCode() == -1
}
