package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The lanes step (issue 34 item 3): key routing over forks of 6 + 6
// partitions into an output of 6, relayed by 3 instances with
// PHASEGATE_TASKS=3 (3 lanes on every output partition, MARKERS.md 3.3)
// and by 1 instance with 1 task (one lane), paced live and all up front;
// and the Kafka Streams pass-through with 1 and 3 instances on the same
// input.
const (
	lanesForkParts = 6
	lanesOutParts  = 6
)

// lanesRun is one relay of the lanes step.
type lanesRun struct {
	Who     string // "phasegate" or "Kafka Streams"
	Mode    string // "paced" or "upfront" (all input written at once)
	N       int    // instances
	Tasks   int    // phasegate's PHASEGATE_TASKS (lanes per output partition)
	Records int
	Rate    float64 // records/s: paced, or of event time up front
	Seconds float64 // up front: the input's first record written → all of it complete (phasegate) or visible (Streams)
	HalfS   float64 // up front: → half of the records visible (phasegate: their phase complete)
	// phasegate, per (output partition, phase) in the timed window: phase
	// end → complete (paced only) and the fastest lane's seal → complete.
	EndP50, EndP99, SealP50, SealP99 float64
	Phases                           int // (partition, phase) pairs timed
	Spread                           laneSpread
	Split                            phaseSplit // phase end → complete in parts
	// Watermark reports written → read by the bench's own reader
	// (franz-go, fetch max wait 100 ms), over the timed window.
	RepLatP50, RepLatP99 float64
	// Per data record in the timed window (paced): produce → visible to a
	// reader: phasegate's phase complete, Streams' record visible.
	RecP50, RecP99 float64
	RecN           int
	Stats          fleetStat
	Seq            seqCheck
	Err            error
}

// fleetStat sums the sidecars' counters at the end of a run.
type fleetStat struct {
	Txns, TxnSeconds, Markers, Out, Streamed, Reports, CPU float64
}

// lanes runs every mode of BENCH_LANES_MODES, each with phasegate (1
// instance, 1 task; 3 instances, 3 tasks) and Streams (1 and 3
// instances), alternating.
func (r *runner) lanes(ctx context.Context) []*lanesRun {
	var out []*lanesRun
	type who struct {
		name     string
		n, tasks int
	}
	order := []who{{"phasegate", 1, 1}, {"phasegate", 3, 3}}
	if r.cfg.LanesStreams {
		order = append(order, who{"Kafka Streams", 1, 0}, who{"Kafka Streams", 3, 0})
	}
	for _, mode := range r.cfg.LanesModes {
		for _, w := range order {
			if ctx.Err() != nil {
				return out
			}
			res := r.lanesOnce(ctx, mode, w.name, w.n, w.tasks)
			r.log.Info("lanes", "mode", mode, "who", w.name, "instances", w.n, "tasks", w.tasks, "end_p99_ms", res.EndP99,
				"seal_p99_ms", res.SealP99, "spread_max", res.Spread.Max, "rec_p99_ms", res.RecP99, "seconds", res.Seconds, "err", res.Err)
			out = append(out, res)
		}
	}
	return out
}

// lanesWarm is the start of a paced run left out of the figures.
const lanesWarm = 3 * time.Second

func (r *runner) lanesOnce(ctx context.Context, mode, who string, k, tasks int) *lanesRun {
	c := r.cfg
	res := &lanesRun{Who: who, Mode: mode, N: k, Tasks: tasks, Rate: c.LanesRate}
	ctx, cancel := context.WithTimeout(ctx, c.RunTimeout)
	defer cancel()
	short := map[string]string{"phasegate": "pg", "Kafka Streams": "ks"}[who]
	name := fmt.Sprintf("%s-lanes-%s-%s-%d", r.tag, map[string]string{"paced": "p", "upfront": "u"}[mode], short, k)
	a, b := topicSpec{name + "-a", lanesForkParts}, topicSpec{name + "-b", lanesForkParts}
	out, quar := name+"-out", name+"-quarantine"
	if err := createTopics(ctx, c.Brokers, a, b, topicSpec{out, lanesOutParts}, topicSpec{quar, 1}); err != nil {
		res.Err = err
		return res
	}
	var scs []*sidecar
	switch who {
	case "phasegate":
		e := sidecarEnv{Brokers: c.Brokers, Inputs: []string{a.Name, b.Name}, Output: out, Quarantine: quar, Group: name,
			PhaseLength: c.LanesPhase, Routing: "key",
			Extra: append([]string{"PHASEGATE_TASKS=" + strconv.Itoa(tasks)}, c.SidecarEnv...)}
		var err error
		if scs, _, err = r.startFleet(ctx, e, k, tasks); err != nil {
			res.Err = err
			return res
		}
		defer stopFleet(scs)
	default:
		apps := make([]*streamsApp, 0, k)
		defer func() {
			for _, x := range apps {
				x.stop()
			}
		}()
		for i := range k {
			x, err := r.startStreams(name, fmt.Sprintf("%s-%d", name, i+1), []string{a.Name, b.Name}, out, 1, "")
			if err != nil {
				res.Err = err
				return res
			}
			apps = append(apps, x)
		}
		if err := awaitSettled(ctx, apps, 5*time.Second); err != nil {
			res.Err = err
			return res
		}
	}
	w, err := watchOutput(ctx, c.Brokers, out)
	if err != nil {
		res.Err = err
		return res
	}
	defer w.stop()
	var reps *reportWatch
	if who == "phasegate" {
		if reps, err = watchReports(ctx, c.Brokers, name+".watermarks"); err != nil {
			res.Err = err
			return res
		}
		defer reps.stop()
	}
	var from, to time.Time // the timed window
	var done func([]markEv, []dataEv) bool
	var want []int64
	if mode == "paced" {
		pc := newPacer(inputSpec{Topics: []topicSpec{a, b}}.slots(), true)
		start, end, n, err := pc.run(ctx, c.Brokers, c.LanesSize, c.LanesRate, c.LanesDuration, nil)
		if err != nil {
			res.Err = err
			return res
		}
		res.Records = n
		want = pc.counts()
		from, to = start.Add(lanesWarm), end.Add(-c.LanesPhase-pacedSealSlack)
		done = func(m []markEv, d []dataEv) bool {
			return checkSeqs(d, want).Lost == 0 && (who != "phasegate" || allComplete(newLaneView(m, d, w.visible), d))
		}
	} else {
		n := c.LanesRecords
		spec := inputSpec{Topics: []topicSpec{a, b}, Records: n, Size: c.LanesSize, Rate: c.LanesRate, Trailer: trailerGap, Keys: 1 << 20}
		spec.Start = time.Now().Add(-time.Duration(float64(n)/c.LanesRate*float64(time.Second)) - time.Minute).Truncate(time.Second)
		from = time.Now()
		f, err := fill(ctx, c.Brokers, spec)
		if err != nil {
			res.Err = fmt.Errorf("fill: %w", err)
			return res
		}
		res.Records = n
		last := uint64(f.LastMs / c.LanesPhase.Milliseconds())
		done = func(m []markEv, d []dataEv) bool {
			if who != "phasegate" {
				return len(d) >= n
			}
			g, ok := newLaneView(m, d, w.visible).globalThrough(time.Now())
			return ok && g >= last
		}
	}
	deadline := time.Now().Add(c.RunTimeout)
	if mode == "paced" {
		deadline = time.Now().Add(30 * time.Second)
	}
	for {
		m, d, werr := w.snapshot()
		if werr != nil {
			res.Err = werr
			return res
		}
		if done(m, d) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			res.Err = fmt.Errorf("the output did not show every record (and its phase complete) in time: %d data records read", len(d))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	finished := time.Now()
	if scs != nil {
		res.Stats = r.fleetStats(ctx, scs, name+".watermarks")
	}
	w.stop()
	if reps != nil {
		reps.stop()
	}
	marks, data, _ := w.snapshot()
	if mode == "upfront" {
		to = finished
		res.Seconds = lastVisible(w, marks, data, who == "phasegate").Sub(from).Seconds()
		res.HalfS = halfVisible(w, marks, data).Sub(from).Seconds()
	} else {
		res.Seq = checkSeqs(data, want)
	}
	analyseLanes(res, w, reps, marks, data, from, to, c.LanesPhase, mode == "paced")
	if err := dumpMarkers(filepath.Join(c.WorkDir, name+".markers.tsv"), w, marks); err != nil {
		r.log.Warn("writing the markers' table", "err", err)
	}
	return res
}

// dumpMarkers writes every marker read, one a line, with when its writer
// sealed it and when it became visible (the lanes step's raw data, for
// finding which lane waited on what).
func dumpMarkers(path string, w *outWatch, marks []markEv) error {
	var b strings.Builder
	b.WriteString("partition\tlane\tphase\toffset\tsealed_ms\tvisible_ms\twatermark_ms\n")
	for _, m := range marks {
		fmt.Fprintf(&b, "%d\t%d\t%d\t%d\t%d\t%d\t%d\n", m.part, m.lane, m.phase, m.off, m.sealed.UnixMilli(),
			w.visible(m.part, m.off, m.recv).UnixMilli(), m.wmMs)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// lastVisible is when the last record (phasegate: the last marker)
// became visible.
func lastVisible(w *outWatch, marks []markEv, data []dataEv, phasegate bool) time.Time {
	var last time.Time
	if phasegate {
		for _, m := range marks {
			last = maxTime(last, w.visible(m.part, m.off, m.recv))
		}
		return last
	}
	for _, d := range data {
		last = maxTime(last, w.visible(d.part, d.off, d.recv))
	}
	return last
}

// halfVisible is when half of the data records were visible (phasegate:
// their phase complete).
func halfVisible(w *outWatch, marks []markEv, data []dataEv) time.Time {
	v := newLaneView(marks, data, w.visible)
	ts := make([]float64, 0, len(data))
	for _, d := range data {
		at := w.visible(d.part, d.off, d.recv)
		if d.hasPhase {
			c, ok := v.completeAt(d.part, d.phase)
			if !ok {
				continue
			}
			at = c
		}
		ts = append(ts, float64(at.UnixNano()))
	}
	if len(ts) == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(percentile(ts, 50)))
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// analyseLanes fills res's latencies and spread from the output read.
func analyseLanes(res *lanesRun, w *outWatch, reps *reportWatch, marks []markEv, data []dataEv, from, to time.Time, phase time.Duration, paced bool) {
	v := newLaneView(marks, data, w.visible)
	var rec []float64
	for _, d := range data {
		if paced && (d.stamp.Before(from) || d.stamp.After(to)) {
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
		rec = append(rec, ms(at.Sub(d.stamp)))
	}
	if paced {
		res.RecN = len(rec)
		res.RecP50, res.RecP99 = percentile(rec, 50), percentile(rec, 99)
	}
	if len(marks) == 0 {
		return
	}
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, m := range marks {
		lo, hi = min(lo, m.phase), max(hi, m.phase)
	}
	if paced {
		lo = uint64(from.UnixMilli()/phase.Milliseconds()) + 1
		hi = uint64(to.UnixMilli() / phase.Milliseconds())
	}
	endMs, sealMs := v.phaseLatencies(lo, hi, phase)
	res.Split = v.phaseSplit(lo, hi, phase)
	if reps != nil && hi >= lo && hi-lo < 1e6 {
		res.Split.reportSplit(reps.passedAt(lo, hi), marks, phase)
		res.RepLatP50, res.RepLatP99, _ = reps.latency(from)
	}
	res.Phases = len(sealMs)
	if paced {
		res.EndP50, res.EndP99 = percentile(endMs, 50), percentile(endMs, 99)
	}
	res.SealP50, res.SealP99 = percentile(sealMs, 50), percentile(sealMs, 99)
	res.Spread = v.spread(from, to, 100*time.Millisecond)
}

// fleetStats sums every sidecar's transaction, marker and record
// counters and CPU, and counts the records on the watermark topic.
func (r *runner) fleetStats(ctx context.Context, scs []*sidecar, wmTopic string) fleetStat {
	var s fleetStat
	for _, sc := range scs {
		if m, err := sc.metrics(ctx, "phasegate_transactions_total", "phasegate_transaction_duration_seconds",
			"phasegate_markers_out_total", "phasegate_records_out_total", "phasegate_streamed_records_total"); err == nil {
			s.Txns += m["phasegate_transactions_total"]
			s.TxnSeconds += m["phasegate_transaction_duration_seconds_sum"]
			s.Markers += m["phasegate_markers_out_total"]
			s.Out += m["phasegate_records_out_total"]
			s.Streamed += m["phasegate_streamed_records_total"]
		}
		if u, err := procUsage(sc.p.pid()); err == nil {
			s.CPU += u.CPU
		}
	}
	s.Reports = float64(topicEnd(ctx, r.cfg.Brokers, wmTopic))
	return s
}

// topicEnd sums topic's end offsets, 0 when unknown.
func topicEnd(ctx context.Context, brokers []string, topic string) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return 0
	}
	defer cl.Close()
	ends, err := endOffsets(ctx, kadm.NewClient(cl), []string{topic})
	if err != nil {
		return 0
	}
	return sumOffsets(ends)
}
