package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"
)

// sizeRun is everything measured for one record size.
type sizeRun struct {
	Size      int
	InputRate float64 // records/s of event time the input was stamped with
	RateFrom  string  // where InputRate came from
	Producer  *toolResult
	Consumer  *toolResult
	Fill      *fillResult
	Copiers   []*toolResult    // by phase length, nil when skipped or failed
	Relays    []*relayResult   // by phase length
	RelaysB   []*relayResult   // by phase length, BENCH_COMPARE's binary
	Paced     []*pacedResult   // by phase length
	Streams   []*streamsResult // by BENCH_STREAMS_THREADS
	StrPaced  []*latencyResult // by BENCH_STREAMS_THREADS
	Errors    []string
}

// suiteResult is one whole run.
type suiteResult struct {
	Started, Ended time.Time
	Machine        machine
	Cfg            config
	Sizes          []*sizeRun
	Skew           *relayResult
	SkewRate       float64
	SkewErr        string
	Partitions     []*partitionsRun
	Instances      []*instancesRun
	Recovery       []*recoveryRun
	Lanes          []*lanesRun
	// SkewRuns are the skew relays by BENCH_SKEW_TASKS (median of
	// BENCH_REPEAT each), when more than one task count ran.
	SkewRuns []*relayResult
}

// fallbackRate stamps the input when the ceiling did not run and
// BENCH_INPUT_RATE is unset.
const fallbackRate = 100000

// trailerGap is how far after the last record the trailer records are
// stamped: beyond any phase length plus the out-of-orderness bound.
const trailerGap = 10 * time.Second

func (r *runner) suite(ctx context.Context) *suiteResult {
	res := &suiteResult{Started: time.Now(), Machine: describeMachine(), Cfg: r.cfg}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t0 := time.Now()
	if err := warmBroker(wctx, r.cfg.Brokers); err != nil {
		r.log.Warn("broker warm-up", "err", err)
	} else {
		r.log.Info("broker warm: internal topics ready", "seconds", time.Since(t0).Seconds())
	}
	cancel()
	for _, size := range r.cfg.Sizes {
		if ctx.Err() != nil {
			break
		}
		res.Sizes = append(res.Sizes, r.size(ctx, size))
	}
	if r.cfg.step("skew") && ctx.Err() == nil {
		r.skew(ctx, res)
	}
	if r.cfg.step("partitions") {
		heavy := r.cfg.PartitionsHeavy
		for i, n := range r.cfg.Partitions {
			if ctx.Err() != nil || heavy == "only" {
				break
			}
			res.Partitions = append(res.Partitions, r.partitions(ctx, n, r.cfg.partitionsRecords(i), r.cfg.PartitionsRate, false))
		}
		if (heavy == "true" || heavy == "1" || heavy == "only") && ctx.Err() == nil {
			res.Partitions = append(res.Partitions, r.partitions(ctx, r.cfg.PartitionsHeavyParts, r.cfg.PartitionsHeavyRecords, r.cfg.PartitionsHeavyRate, true))
		}
	}
	if r.cfg.step("instances") && ctx.Err() == nil {
		res.Instances = r.instances(ctx)
	}
	if r.cfg.step("recovery") && ctx.Err() == nil {
		res.Recovery = r.recovery(ctx)
	}
	if r.cfg.step("lanes") && ctx.Err() == nil {
		res.Lanes = r.lanes(ctx)
	}
	res.Ended = time.Now()
	return res
}

func (r *runner) stepCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.cfg.RunTimeout)
}

// size runs every step for one record size.
func (r *runner) size(ctx context.Context, size int) *sizeRun {
	sr := &sizeRun{Size: size}
	fail := func(step string, err error) {
		sr.Errors = append(sr.Errors, fmt.Sprintf("%s: %v", step, err))
		r.log.Error("step failed", "size", size, "step", step, "err", err)
	}
	n := r.cfg.Records
	if r.cfg.step("ceiling") {
		topic := fmt.Sprintf("%s-ceiling-%d", r.tag, size)
		sctx, cancel := r.stepCtx(ctx)
		err := createTopics(sctx, r.cfg.Brokers, topicSpec{topic, 5})
		if err == nil {
			sr.Producer, err = r.producerRuns(sctx, topic, n, size)
		}
		if err != nil {
			fail("ProducerPerformance", err)
		} else {
			b0 := r.brokerCPU()
			if sr.Consumer, err = r.tools.consumerPerf(sctx, topic, n); err != nil {
				fail("ConsumerPerformance", err)
			} else {
				sr.Consumer.BrokerCPU = r.brokerCPU() - b0
			}
		}
		cancel()
		r.log.Info("ceiling", "size", size, "producer_rps", sr.Producer.rate(), "consumer_rps", sr.Consumer.rate())
	}
	switch {
	case r.cfg.InputRate > 0:
		sr.InputRate, sr.RateFrom = r.cfg.InputRate, "BENCH_INPUT_RATE"
	case sr.Producer.rate() > 0:
		sr.InputRate, sr.RateFrom = math.Round(sr.Producer.rate()), "the ceiling producer's records/s in this run"
	default:
		sr.InputRate, sr.RateFrom = fallbackRate, "a fixed default (the ceiling did not run)"
	}
	if !r.cfg.step("copier") && !r.cfg.step("phasegate") && !r.cfg.step("paced") && !r.cfg.step("streams") {
		return sr
	}
	in := relayInput{Topics: []string{fmt.Sprintf("%s-fork-a-%d", r.tag, size), fmt.Sprintf("%s-fork-b-%d", r.tag, size)}, Records: n}
	spec := inputSpec{
		Topics:  []topicSpec{{in.Topics[0], 3}, {in.Topics[1], 2}},
		Records: n, Size: size, Rate: sr.InputRate, Trailer: trailerGap,
	}
	spec.Start = time.Now().Add(-time.Duration(float64(n)/sr.InputRate*float64(time.Second)) - time.Minute).Truncate(time.Second)
	if r.cfg.step("copier") || r.cfg.step("phasegate") || r.cfg.step("streams") {
		sctx, cancel := r.stepCtx(ctx)
		err := createTopics(sctx, r.cfg.Brokers, spec.Topics...)
		if err == nil {
			sr.Fill, err = fill(sctx, r.cfg.Brokers, spec)
		}
		cancel()
		if err != nil {
			fail("fill", err)
			return sr
		}
		in.LastMs = sr.Fill.LastMs
		r.log.Info("input written", "size", size, "records", n, "seconds", sr.Fill.Seconds, "input_rate", sr.InputRate)
	}
	sr.Copiers = make([]*toolResult, len(r.cfg.Phases))
	sr.Relays = make([]*relayResult, len(r.cfg.Phases))
	sr.Paced = make([]*pacedResult, len(r.cfg.Phases))
	if r.cfg.step("copier") {
		r.copiers(ctx, sr, spec, in, fail)
	}
	for i, L := range r.cfg.Phases {
		if !r.cfg.step("phasegate") || ctx.Err() != nil {
			break
		}
		bins := []string{r.cfg.Sidecar}
		if r.cfg.Compare != "" {
			bins = append(bins, r.cfg.Compare)
		}
		res := r.relayRuns(ctx, fmt.Sprintf("relay-%d-%s", size, L), in, size, sidecarEnv{PhaseLength: L}, bins)
		sr.Relays[i] = res[0]
		if err := sr.Relays[i].Err; err != nil {
			fail("phasegate "+L.String(), err)
		}
		if len(res) > 1 {
			if sr.RelaysB == nil {
				sr.RelaysB = make([]*relayResult, len(r.cfg.Phases))
			}
			sr.RelaysB[i] = res[1]
		}
	}
	if r.cfg.step("streams") {
		r.streams(ctx, sr, in, fail)
	}
	for i, L := range r.cfg.Phases {
		if !r.cfg.step("paced") || ctx.Err() != nil {
			break
		}
		rate := r.cfg.PacedRate
		if rate == 0 {
			rate = math.Round(sr.Relays[i].rate() * r.cfg.PacedShare)
		}
		if rate == 0 {
			fail("paced "+L.String(), fmt.Errorf("no verified phasegate relay rate to pace at"))
			continue
		}
		sr.Paced[i] = r.paced(ctx, fmt.Sprintf("paced-%d-%s", size, L), size, L, rate)
		if err := sr.Paced[i].Err; err != nil {
			fail("paced "+L.String(), err)
		}
	}
	return sr
}

// streams runs the Kafka Streams pass-through over the same input once per
// BENCH_STREAMS_THREADS entry, then (with the paced step) paced at
// BENCH_PACED_SHARE of its own rate with that many threads.
func (r *runner) streams(ctx context.Context, sr *sizeRun, in relayInput, fail func(string, error)) {
	for _, n := range r.cfg.StreamsThreads {
		if ctx.Err() != nil {
			return
		}
		res := r.streamsRuns(ctx, fmt.Sprintf("streams-%d-t%d", sr.Size, n), in, sr.Size, n)
		sr.Streams = append(sr.Streams, res)
		if res.Err != nil {
			fail(fmt.Sprintf("Kafka Streams, %d threads", n), res.Err)
		}
	}
	for i, n := range r.cfg.StreamsThreads {
		if !r.cfg.step("paced") || ctx.Err() != nil || i >= len(sr.Streams) {
			return
		}
		// Half load is a share of its steady rate (from its first commit
		// on): its JVM start-up of several seconds would otherwise set the
		// pace of a short run.
		rate := r.cfg.PacedRate
		if st := sr.Streams[i]; rate == 0 && st.ok() {
			rate = math.Round(st.Steady * r.cfg.PacedShare)
		}
		var p *latencyResult
		if rate == 0 {
			p = &latencyResult{Who: fmt.Sprintf("Kafka Streams, %d %s", n, plural(n, "thread")), Size: sr.Size,
				Err: fmt.Errorf("no verified Kafka Streams rate to pace at")}
		} else {
			p = r.streamsPaced(ctx, fmt.Sprintf("streams-paced-%d-t%d", sr.Size, n), sr.Size, n, rate)
		}
		sr.StrPaced = append(sr.StrPaced, p)
		if p.Err != nil {
			fail(fmt.Sprintf("Kafka Streams paced, %d threads", n), p.Err)
		}
	}
}

// copiers runs the copier once per phase length. Kafka's copier is slow
// (about 3,000-5,000 records/s here), so past BENCH_COPIER_RECORDS it gets an
// input of its own: the first BENCH_COPIER_RECORDS records of the same input
// (same sizes, timestamps and partitions).
func (r *runner) copiers(ctx context.Context, sr *sizeRun, spec inputSpec, in relayInput, fail func(string, error)) {
	if spec.Records > r.cfg.CopierRecords {
		spec.Records = r.cfg.CopierRecords
		spec.Topics = []topicSpec{{in.Topics[0] + "-copier", 3}, {in.Topics[1] + "-copier", 2}}
		in.Topics = []string{spec.Topics[0].Name, spec.Topics[1].Name}
		sctx, cancel := r.stepCtx(ctx)
		err := createTopics(sctx, r.cfg.Brokers, spec.Topics...)
		if err == nil {
			_, err = fill(sctx, r.cfg.Brokers, spec)
		}
		cancel()
		if err != nil {
			fail("fill for the copier", err)
			return
		}
	}
	for i, L := range r.cfg.Phases {
		if ctx.Err() != nil {
			return
		}
		txn := max(1, int(math.Round(sr.InputRate*L.Seconds())))
		out := fmt.Sprintf("%s-copy-%d-%s", r.tag, sr.Size, L)
		sctx, cancel := r.stepCtx(ctx)
		err := createTopics(sctx, r.cfg.Brokers, topicSpec{out, outputPartitions})
		var res *toolResult
		if err == nil {
			b0 := r.brokerCPU()
			res, err = r.tools.copier(sctx, in.Topics, out, txn, fmt.Sprintf("%s-%d-%s", r.tag, sr.Size, L))
			if res != nil {
				res.BrokerCPU = r.brokerCPU() - b0
			}
		}
		cancel()
		if err != nil {
			fail("TransactionalMessageCopier "+L.String(), err)
			continue
		}
		sr.Copiers[i] = res
		r.log.Info("copier", "size", sr.Size, "phase", L, "txn_size", txn, "records", res.Records, "seconds", res.Seconds,
			"records_per_s", res.rate(), "txns", res.Txns)
	}
}

// skew writes the skewed input and relays it under a small buffer bound.
func (r *runner) skew(ctx context.Context, res *suiteResult) {
	size := r.cfg.SkewSize
	rate := r.cfg.InputRate
	for _, sr := range res.Sizes {
		if sr.Size == size && rate == 0 {
			rate = sr.InputRate
		}
	}
	if rate == 0 {
		rate = fallbackRate
	}
	res.SkewRate = rate
	n := r.cfg.Records
	a, b := fmt.Sprintf("%s-skew-a", r.tag), fmt.Sprintf("%s-skew-b", r.tag)
	spec := inputSpec{
		Topics:  []topicSpec{{a, 3}, {b, 2}},
		Records: n, Size: size, Rate: rate, Trailer: trailerGap,
		HotKey: 0.7, Behind: 200 * time.Millisecond,
	}
	spec.Start = time.Now().Add(-time.Duration(float64(n)/rate*float64(time.Second)) - time.Minute).Truncate(time.Second)
	sctx, cancel := r.stepCtx(ctx)
	err := createTopics(sctx, r.cfg.Brokers, spec.Topics...)
	var f *fillResult
	if err == nil {
		f, err = fill(sctx, r.cfg.Brokers, spec)
	}
	cancel()
	if err != nil {
		res.SkewErr = err.Error()
		return
	}
	in := relayInput{Topics: []string{a, b}, Records: n, LastMs: f.LastMs}
	e := sidecarEnv{PhaseLength: r.cfg.SkewPhase, MaxBuffer: r.cfg.SkewBuffer, Routing: "key", Pprof: r.cfg.Profile}
	if len(r.cfg.SkewTasks) == 1 && r.cfg.SkewTasks[0] == 1 {
		res.Skew = r.relay(ctx, "skew", in, size, e)
		return
	}
	// Several task counts (issue 34 item 3: 3 tasks ran at half the rate
	// of 1): each repetition runs every count in turn, so all meet the same
	// load; profiles in the first repetition only.
	runs := make([][]*relayResult, len(r.cfg.SkewTasks))
	for i := range r.cfg.Repeat {
		for j, t := range r.cfg.SkewTasks {
			if ctx.Err() != nil {
				break
			}
			et := e
			et.Pprof = r.cfg.Profile && i == 0
			et.Extra = []string{"PHASEGATE_TASKS=" + strconv.Itoa(t)}
			runs[j] = append(runs[j], r.relay(ctx, fmt.Sprintf("skew-t%d-r%d", t, i+1), in, size, et))
		}
	}
	for j := range r.cfg.SkewTasks {
		res.SkewRuns = append(res.SkewRuns, median(runs[j]))
	}
	res.Skew = res.SkewRuns[0]
}

// producerRuns runs ProducerPerformance BENCH_REPEAT times into topic and
// returns the median run by rate, with every run's rate in Runs.
func (r *runner) producerRuns(ctx context.Context, topic string, n, size int) (*toolResult, error) {
	var runs []*toolResult
	for range r.cfg.Repeat {
		b0 := r.brokerCPU()
		res, err := r.tools.producerPerf(ctx, topic, n, size)
		if err != nil {
			return nil, err
		}
		res.BrokerCPU = r.brokerCPU() - b0
		runs = append(runs, res)
	}
	rates := make([]float64, len(runs))
	for i, x := range runs {
		rates[i] = x.rate()
	}
	med := runs[medianIndex(rates)]
	med.Runs = rates
	return med, nil
}

// relayRuns runs the relay BENCH_REPEAT times with each binary in bins,
// alternating binaries within each repetition so that both meet the same
// load, each run on its own output topic and group (profiles only in the
// first). For each binary it returns the median run by rate among those that
// verified, with every run's rate in Runs (0 for a failed run), or the
// first failure when none verified.
func (r *runner) relayRuns(ctx context.Context, name string, in relayInput, size int, e sidecarEnv, bins []string) []*relayResult {
	runs := make([][]*relayResult, len(bins))
	for i := range r.cfg.Repeat {
		for b, bin := range bins {
			if ctx.Err() != nil {
				break
			}
			e.Pprof = r.cfg.Profile && i == 0
			e.Bin = bin
			tag := fmt.Sprintf("%s-r%d", name, i+1)
			if b > 0 {
				tag = fmt.Sprintf("%s-b%d-r%d", name, b, i+1)
			}
			runs[b] = append(runs[b], r.relay(ctx, tag, in, size, e))
		}
	}
	out := make([]*relayResult, len(bins))
	for b := range bins {
		out[b] = median(runs[b])
	}
	return out
}

func median(runs []*relayResult) *relayResult {
	if len(runs) == 0 {
		return &relayResult{Err: fmt.Errorf("not run")}
	}
	med, rates := medianRun(runs)
	med.Runs = rates
	return med
}

// medianRun returns the run of median rate among the runs that succeeded
// (the first run when none did), and every run's rate. runs is not empty.
func medianRun[T interface {
	rate() float64
	ok() bool
}](runs []T) (T, []float64) {
	rates := make([]float64, len(runs))
	var okRuns []T
	var okRates []float64
	for i, x := range runs {
		rates[i] = x.rate()
		if x.ok() {
			okRuns, okRates = append(okRuns, x), append(okRates, rates[i])
		}
	}
	if len(okRuns) == 0 {
		return runs[0], rates
	}
	return okRuns[medianIndex(okRates)], rates
}
