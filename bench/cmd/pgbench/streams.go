package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// streamsMain is the pass-through's main class (bench/streams).
const streamsMain = "io.github.phasegate.bench.PassThrough"

// streamsResult is one run of the Kafka Streams pass-through over a
// pre-filled input.
type streamsResult struct {
	Threads   int
	Size      int
	Records   int     // input records counted (trailers not)
	InOffsets int64   // the input's end offsets, summed (trailers included)
	Seconds   float64 // JVM exec → every input offset committed (its output visible)
	RunningS  float64 // JVM exec → Streams state RUNNING
	FirstS    float64 // JVM exec → the first offsets committed (first output visible)
	Steady    float64 // records/s from the first commit to the last
	CPU       float64 // utime+stime of the JVM at that moment
	HWM       int64   // its VmHWM at that moment
	BrokerCPU float64
	Out       int64 // records read back from the output with read_committed
	Check     error // the output's count
	Err       error // the run itself
	Runs      []float64
}

func (r *streamsResult) ok() bool { return r != nil && r.Err == nil && r.Check == nil && r.Seconds > 0 }

func (r *streamsResult) rate() float64 {
	if !r.ok() {
		return 0
	}
	return float64(r.Records) / r.Seconds
}

// streamsApp is a running pass-through JVM.
type streamsApp struct {
	p        *proc
	mu       sync.Mutex
	running  time.Time // first "state RUNNING" line
	state    string    // the latest state printed ("RUNNING", "REBALANCING", ...)
	states   []stateAt // every state printed, in order
	stateDir string
}

// stateAt is a state the JVM printed and when.
type stateAt struct {
	state string
	at    time.Time
}

// runningAfter is the first "state RUNNING" printed after t.
func (a *streamsApp) runningAfter(t time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.states {
		if s.state == "RUNNING" && s.at.After(t) {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// current is the latest state the JVM printed, "" before the first.
func (a *streamsApp) current() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state
}

func (a *streamsApp) runningAt() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}

// startStreams execs the pass-through with its application ID app (also
// its consumer group and the prefix of its transactional IDs); name names
// its log and state directory (app, or one instance of several of one app;
// a restart with the same name finds its state directory again).
// A non-empty instanceID makes it a static member of its group
// (group.instance.id).
func (r *runner) startStreams(app, name string, inputs []string, output string, threads int, instanceID string) (*streamsApp, error) {
	a := &streamsApp{stateDir: filepath.Join(r.cfg.WorkDir, name+".state")}
	args := append([]string{}, r.cfg.StreamsJVM...)
	args = append(args, "-cp", r.cfg.StreamsClasspath, streamsMain,
		strings.Join(r.cfg.Brokers, ","), app, strings.Join(inputs, ","), output, strconv.Itoa(threads), a.stateDir)
	if instanceID != "" {
		args = append(args, instanceID)
	}
	java := "java"
	if h := os.Getenv("JAVA_HOME"); h != "" {
		java = filepath.Join(h, "bin", "java")
	}
	p, err := startProc(java, args, nil, filepath.Join(r.cfg.WorkDir, name+".log"), func(line string, at time.Time) {
		st, ok := strings.CutPrefix(strings.TrimSpace(line), "state ")
		if !ok {
			return
		}
		a.mu.Lock()
		a.state = st
		a.states = append(a.states, stateAt{st, at})
		if st == "RUNNING" && a.running.IsZero() {
			a.running = at
		}
		a.mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	a.p = p
	return a, nil
}

func (a *streamsApp) stop() {
	_ = a.p.stop(40 * time.Second)
	_ = os.RemoveAll(a.stateDir)
}

// streamsRuns runs the pass-through BENCH_REPEAT times with threads stream
// threads and returns the median run (as relayRuns does for phasegate).
func (r *runner) streamsRuns(ctx context.Context, name string, in relayInput, size, threads int) *streamsResult {
	var runs []*streamsResult
	for i := range r.cfg.Repeat {
		if ctx.Err() != nil {
			break
		}
		runs = append(runs, r.streamsRelay(ctx, fmt.Sprintf("%s-r%d", name, i+1), in, size, threads))
	}
	if len(runs) == 0 {
		return &streamsResult{Threads: threads, Size: size, Err: errors.New("not run")}
	}
	med, rates := medianRun(runs)
	med.Runs = rates
	return med
}

// streamsRelay runs the pass-through over in until its consumer group has
// committed every input offset. With exactly_once_v2 the offsets commit in
// the transaction that wrote the output, so that moment is the moment the
// last output record became visible to read_committed. The output is then
// counted (untimed): every input record, trailers included, exactly once.
func (r *runner) streamsRelay(ctx context.Context, name string, in relayInput, size, threads int) *streamsResult {
	res := &streamsResult{Threads: threads, Size: size, Records: in.Records}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RunTimeout)
	defer cancel()
	app := fmt.Sprintf("%s-%s", r.tag, name)
	out := app + "-out"
	if err := createTopics(ctx, r.cfg.Brokers, topicSpec{out, in.outParts()}); err != nil {
		res.Err = err
		return res
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.cfg.Brokers...))
	if err != nil {
		res.Err = err
		return res
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := endOffsets(ctx, adm, in.Topics)
	if err != nil {
		res.Err = fmt.Errorf("input end offsets: %w", err)
		return res
	}
	res.InOffsets = sumOffsets(ends)
	broker0 := r.brokerCPU()
	a, err := r.startStreams(app, app, in.Topics, out, threads, "")
	if err != nil {
		res.Err = err
		return res
	}
	defer a.stop()
	g, err := awaitGroup(ctx, adm, app, ends, a.p, "the JVM", r.cfg.StallTimeout, nil)
	if err != nil {
		res.Err = fmt.Errorf("streams: %w", err)
		return res
	}
	res.FirstS = g.firstAt.Sub(a.p.started).Seconds()
	res.Seconds = g.doneAt.Sub(a.p.started).Seconds()
	if g.doneAt.After(g.firstAt) && res.InOffsets > g.firstOffsets {
		res.Steady = float64(res.InOffsets-g.firstOffsets) / g.doneAt.Sub(g.firstAt).Seconds()
	}
	if u, err := procUsage(a.p.pid()); err == nil {
		res.CPU, res.HWM = u.CPU, u.HWM
	}
	res.BrokerCPU = r.brokerCPU() - broker0
	if t := a.runningAt(); !t.IsZero() {
		res.RunningS = t.Sub(a.p.started).Seconds()
	}
	a.stop()
	res.Out, err = countRecords(ctx, r.cfg.Brokers, out, res.InOffsets)
	switch {
	case err != nil:
		res.Check = err
	case res.Out != res.InOffsets:
		res.Check = fmt.Errorf("%d records in the output, want %d (every input record once, trailers included)", res.Out, res.InOffsets)
	}
	r.log.Info("streams pass-through", "run", name, "threads", threads, "records", in.Records, "seconds", res.Seconds,
		"records_per_s", res.rate(), "first_output_s", res.FirstS, "cpu_s", res.CPU, "hwm_mib", res.HWM>>20, "check", res.Check)
	return res
}

// endOffsets lists the end offsets of topics' partitions.
// sumOffsets is the sum of end offsets: the records of an input (written
// without transactions, so it holds no control records).
func sumOffsets(ends kadm.ListedOffsets) int64 {
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

func endOffsets(ctx context.Context, adm *kadm.Client, topics []string) (kadm.ListedOffsets, error) {
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	return ends, err
}

// groupRun is what awaitGroup saw of a group's committed offsets.
type groupRun struct {
	firstAt      time.Time // the first poll that found an offset committed
	firstOffsets int64     // the offsets committed then
	doneAt       time.Time // the first poll that found every target reached
}

// awaitGroup polls group's committed offsets from the broker at 10 Hz
// until every partition's reaches its target (targets of 0 are skipped),
// p exits, or no offset moves for stall. onTick, when set, runs on every
// tick before the poll.
func awaitGroup(ctx context.Context, adm *kadm.Client, group string, targets kadm.ListedOffsets, p *proc, what string, stall time.Duration, onTick func()) (groupRun, error) {
	var g groupRun
	var total, last int64
	targets.Each(func(o kadm.ListedOffset) { total += max(0, o.Offset) })
	lastProgress := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return g, fmt.Errorf("%w after %d of %d offsets committed (log %s)", ctx.Err(), last, total, p.log.Name())
		case <-p.done:
			return g, fmt.Errorf("%s exited: %v (log %s)", what, p.err, p.log.Name())
		case <-tick.C:
		}
		if onTick != nil {
			onTick()
		}
		committed, done, err := groupProgress(ctx, adm, group, targets)
		now := time.Now()
		if err == nil {
			if committed > 0 && g.firstAt.IsZero() {
				g.firstAt, g.firstOffsets = now, committed
			}
			if committed != last {
				last, lastProgress = committed, now
			}
			if done {
				g.doneAt = now
				return g, nil
			}
		}
		if now.Sub(lastProgress) > stall {
			return g, fmt.Errorf("no progress for %s at %d of %d offsets committed (last poll: %v; log %s)", stall, last, total, err, p.log.Name())
		}
	}
}

// groupProgress sums group's committed offsets over the partitions of ends
// (each capped at its end offset) and reports whether every non-empty
// partition is committed to its end.
func groupProgress(ctx context.Context, adm *kadm.Client, group string, ends kadm.ListedOffsets) (int64, bool, error) {
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, false, err
	}
	var sum int64
	done := true
	ends.Each(func(e kadm.ListedOffset) {
		if e.Offset <= 0 {
			return
		}
		o, ok := got.Lookup(e.Topic, e.Partition)
		if !ok || o.Err != nil || o.At < 0 {
			done = false
			return
		}
		sum += min(o.At, e.Offset)
		if o.At < e.Offset {
			done = false
		}
	})
	return sum, done, nil
}

// countRecords reads topic whole with read_committed and returns how many
// records it holds: it stops once want were read and the topic then stayed
// quiet for a second, or after 30 s without a record.
func countRecords(ctx context.Context, brokers []string, topic string, want int64) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var n int64
	for {
		quiet := 30 * time.Second
		if n >= want {
			quiet = time.Second
		}
		pctx, cancel := context.WithTimeout(ctx, quiet)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		got := 0
		fs.EachRecord(func(*kgo.Record) { got++ })
		if got == 0 {
			return n, nil
		}
		n += int64(got)
	}
}
