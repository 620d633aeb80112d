package main

import (
	"fmt"
	"math"
	"strings"
)

// The tables of issue 34's rows: the heavy partitions row's ratios and
// first transactions, recovery after a SIGKILL, lane skew, and the skew
// step by task count.

// label names a partitions row: its input partitions, "h" for the heavy row.
func (p *partitionsRun) label() string {
	if p.Heavy {
		return fmt.Sprintf("%d heavy", p.Total)
	}
	return fmt.Sprint(p.Total)
}

// renderHeavy is the heavy row's targets (as ratios to Kafka Streams in
// the same run) and its first transactions.
func renderHeavy(b *strings.Builder, s *suiteResult) {
	for _, p := range s.Partitions {
		if !p.Heavy {
			continue
		}
		fmt.Fprintf(b, "\n## Heavy phases at %d partitions (issue 34 item 1): %s records stamped at %s records/s of event time (a 1 s phase holds about %s)\n\n",
			p.Total, thousands(float64(p.Records)), thousands(p.Rate), thousands(math.Min(p.Rate, float64(p.Records))))
		r, st := p.Relay, p.Streams
		if r == nil || st == nil || !r.ok() || !st.ok() {
			b.WriteString("No ratio: ")
			for _, e := range []error{relayErr(r), streamsErr(st)} {
				if e != nil {
					b.WriteString(oneLine(e) + " ")
				}
			}
			b.WriteString("\n")
		} else {
			b.WriteString("| | phasegate | Kafka Streams | phasegate ÷ Streams | target | |\n|---|--:|--:|--:|---|---|\n")
			fmt.Fprintf(b, "| first output s | %.1f | %.1f | %.2f | ≤ 2 | %s |\n", r.FirstS, st.FirstS, r.FirstS/st.FirstS, mark(r.FirstS <= 2*st.FirstS))
			fmt.Fprintf(b, "| records/s incl. start-up | %s | %s | %.2f | ≥ 1.0 | %s |\n", thousands(r.rate()), thousands(st.rate()), r.rate()/st.rate(), mark(r.rate() >= st.rate()))
			fmt.Fprintf(b, "| steady records/s | %s | %s | %s | | |\n", optRate(r.Steady), optRate(st.Steady), ratio(r.Steady, st.Steady))
			fmt.Fprintf(b, "| exec → first record read s | %s | | | | |\n", optS(r.StartupS))
		}
		if r != nil && r.Txn != nil {
			renderTxnTrace(b, r.Txn)
		}
	}
}

func relayErr(r *relayResult) error {
	switch {
	case r == nil:
		return fmt.Errorf("phasegate did not run")
	case r.Err != nil:
		return fmt.Errorf("phasegate: %w", r.Err)
	case r.Check != nil:
		return fmt.Errorf("phasegate not verified: %w", r.Check)
	}
	return nil
}

func streamsErr(s *streamsResult) error {
	switch {
	case s == nil:
		return fmt.Errorf("Kafka Streams did not run")
	case s.Err != nil:
		return fmt.Errorf("Kafka Streams: %w", s.Err)
	case s.Check != nil:
		return fmt.Errorf("Kafka Streams not verified: %w", s.Check)
	}
	return nil
}

// renderTxnTrace is the first transactions of a relay, one per line.
func renderTxnTrace(b *strings.Builder, tr *txnTrace) {
	b.WriteString("\nThe sidecar's first transactions (its counters polled every 250 ms, so each ends up to 250 ms before the time shown; a line with several transactions gives their sum):\n\n")
	b.WriteString("| began at s (from exec; ended − duration) | ended at s | transactions | of which not committed | duration s | data records | markers | phases sealed | records read by the end | sidecar CPU s by the end |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, e := range tr.Evs {
		began := "-"
		if e.N == 1 {
			began = fmt.Sprintf("%.2f", e.AtS-e.Seconds)
		}
		fmt.Fprintf(b, "| %s | %.2f | %.0f | %.0f | %.3f | %s | %s | %.0f | %s | %.1f |\n", began, e.AtS, e.N, e.Aborted, e.Seconds, thousands(e.Records), thousands(e.Markers), e.Seals,
			thousands(e.In), e.CPU)
	}
	if tr.ReadAllS > 0 {
		fmt.Fprintf(b, "\nEvery input record had been read %.2f s after exec (phasegate_records_in_total stopped growing).\n", tr.ReadAllS)
	}
	if tr.FirstMarker {
		fmt.Fprintf(b, "\nThe first phase with data (%d) was sealed %.2f s after exec (its markers' record timestamp): a transaction that began earlier streamed the phase's records before its seal.\n", tr.FirstPhase, tr.FirstSealS)
	}
	longest := fmt.Sprintf("%.3f s", tr.LongestS)
	if tr.LongestUp {
		longest = fmt.Sprintf("at most %.1f s (a histogram bucket bound: one after the traced ones)", tr.LongestS)
	}
	frac := "-"
	if tr.Timeout > 0 {
		frac = fmt.Sprintf("%.2f", tr.LongestS/tr.Timeout.Seconds())
	}
	fmt.Fprintf(b, "\n%s transactions in all; the longest %s, %s of the transaction timeout (%s; issue 34 asks ≤ 0.25: %s). Warnings \"a transaction took more than half the transaction timeout\" in the log: %d%s.\n",
		thousands(tr.Total), longest, frac, tr.Timeout, mark(tr.Timeout > 0 && tr.LongestS <= tr.Timeout.Seconds()/4), tr.Warns, warnQuote(tr.WarnLine))
}

func warnQuote(line string) string {
	if line == "" {
		return ""
	}
	if i := strings.Index(line, "took="); i >= 0 {
		line = line[i:]
	}
	return " (`" + strings.ReplaceAll(line, "|", "/") + "`)"
}

// renderRecovery is the recovery step's table.
func renderRecovery(b *strings.Builder, c config, s *suiteResult) {
	if len(s.Recovery) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Recovery after a SIGKILL (issue 34 item 2): forks of %d + %d partitions, one left empty, output %d (partition routing, %d tasks), %s phases, default PHASEGATE_IDLE_TIMEOUT (5 s), %s records/s of %d B paced; killed %s after the producer's start, restarted %s later\n\n",
		recoveryForkParts, recoveryForkParts, recoveryOutParts, recoveryOutParts, c.RecoveryPhase, thousands(c.RecoveryRate), c.RecoverySize,
		c.RecoveryWarm, c.RecoveryDown)
	b.WriteString("| run | instances | empty partition | killed | kill → exec s | next complete phase: kill → s | exec → s (target ≤ 1) | records before the kill all visible: kill → s | exec → s | next record visible: kill → s | restarted: exec → started / tasks assigned / empty partition idle s (Streams: exec → RUNNING) | restarted: exec → its first watermark report / its first report past the next phase / that phase's seal s | records lost / duplicated | note |\n")
	b.WriteString("|---|--:|---|---|--:|--:|--:|--:|--:|--:|---|---|---|---|\n")
	for _, r := range s.Recovery {
		if r.Err != nil && r.KillS == 0 {
			fmt.Fprintf(b, "| %s | %d | %s | %s | | | | | | | | | | failed: %s |\n", r.Who, r.N, r.Empty, r.Victim, oneLine(r.Err))
			continue
		}
		next, nextExec, log, split := "-", "-", "-", "-"
		if r.Who == "phasegate" {
			if r.NextS > 0 {
				next = fmt.Sprintf("%.2f (phase %d after %d)", r.NextS, r.NextPhase, r.Through)
				nextExec = fmt.Sprintf("%.2f, %s", r.execS(r.NextS), mark(r.execS(r.NextS) <= 1))
			}
			log = fmt.Sprintf("%s / %s / %s", secs(r.StartedS), secs(r.AssignedS), secs(r.IdleS))
			split = fmt.Sprintf("%s / %s / %s", secs(r.FirstRepS), secs(r.PassRepS), secs(r.NextSealS))
		} else {
			log = secs(r.StartedS)
		}
		note := ""
		if r.Err != nil {
			note = oneLine(r.Err)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %d / %d of %s | %s |\n", r.Who, r.N, r.Empty, r.Victim, r.DownS,
			next, nextExec, secs(r.CatchS), secs(r.execS(r.CatchS)), secs(r.NextOutS), log, split, r.Seq.Lost, r.Seq.Dups, thousands(float64(r.Seq.Want)), note)
	}
	b.WriteString(`
Times are when the output became visible to read_committed (its last stable offsets polled every 5 ms).
"Next complete phase": the first phase above the one complete at the kill to complete on every output
partition (every lane's marker for it or a later phase visible, MARKERS.md M8): what a join reading all
partitions waits for. "Records before the kill all visible": every record the producer had written
before the kill visible (phasegate: its phase complete); Kafka Streams has no phases, so this is its
kill → next output for the records the killed instance held. "Next record visible": the first data
record visible after the kill, on any partition (survivors may write one at once). The restarted
sidecar's times come from its log (its lines "phasegate started", "tasks assigned", and "partitions
idle" naming the empty partition, which the sidecar logs once a second, so up to a second late; "-":
not logged). The restarted instance's reports are read from the group's watermark topic (their at_ms,
the instance's clock): its first, and its first whose low is above the next complete phase (or that
says idle): from then on the fleet's global watermark may pass that phase; the phase's seal is its
last lane's marker timestamp. With several instances the empty partition is one of the killed
instance's. Kafka
Streams: the pass-through (exactly_once_v2, 1 thread per instance, its default session timeout of 45
s), its JVM SIGKILLed and restarted with its state directory; "static member" sets group.instance.id
(phasegate's default is a static member too). Every record the producer wrote is checked once in the
output.
`)
}

// renderLanes is the lanes step's table and targets.
func renderLanes(b *strings.Builder, c config, s *suiteResult) {
	if len(s.Lanes) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Lanes (issue 34 item 3): key routing, forks of %d + %d partitions, output %d, %s phases, %d B records; paced at %s records/s for %s, up front %s records stamped at %s records/s of event time\n\n",
		lanesForkParts, lanesForkParts, lanesOutParts, c.LanesPhase, c.LanesSize, thousands(c.LanesRate), c.LanesDuration,
		thousands(float64(c.LanesRecords)), thousands(c.LanesRate))
	b.WriteString("| mode | run | phase end → complete p50 / p99 ms | fastest lane's seal → complete p50 / p99 ms | (partition, phase) timed | lane distance, phases: p50 / p99 / max | data ahead of the slowest lane's marker, max phases | produce → visible (phasegate: phase complete) p50 / p99 ms | up front: records/s (half visible after s) | transactions (s in them) | markers | watermark-topic records | CPU s | check |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, r := range s.Lanes {
		who := fmt.Sprintf("%s, %d %s", r.Who, r.N, plural(r.N, "instance"))
		if r.Who == "phasegate" {
			who += fmt.Sprintf(", PHASEGATE_TASKS=%d", r.Tasks)
		}
		if r.Err != nil && r.RecN == 0 && r.Phases == 0 {
			fmt.Fprintf(b, "| %s | %s | failed | | | | | | | | | | | %s |\n", r.Mode, who, oneLine(r.Err))
			continue
		}
		end, seal, spread, ahead, txns, marks, reps, cpu := "-", "-", "-", "-", "-", "-", "-", "-"
		if r.Who == "phasegate" {
			if r.Mode == "paced" {
				end = fmt.Sprintf("%.0f / %.0f", r.EndP50, r.EndP99)
			}
			seal = fmt.Sprintf("%.0f / %.0f", r.SealP50, r.SealP99)
			if r.Spread.Samples > 0 {
				spread = fmt.Sprintf("%.0f / %.0f / %.0f (p%d at %s)", r.Spread.P50, r.Spread.P99, r.Spread.Max, r.Spread.MaxPart, r.Spread.MaxAt.Format("15:04:05.0"))
				ahead = fmt.Sprintf("%.0f", r.Spread.DataAhead)
			} else if r.Tasks <= 1 {
				spread, ahead = "one lane", "one lane"
			}
			txns = fmt.Sprintf("%s (%.1f)", thousands(r.Stats.Txns), r.Stats.TxnSeconds)
			marks, reps, cpu = thousands(r.Stats.Markers), thousands(r.Stats.Reports), fmt.Sprintf("%.1f", r.Stats.CPU)
		}
		rec, rate := "-", "-"
		if r.Mode == "paced" && r.RecN > 0 {
			rec = fmt.Sprintf("%.0f / %.0f", r.RecP50, r.RecP99)
		}
		if r.Mode == "upfront" && r.Seconds > 0 {
			rate = fmt.Sprintf("%s (%.1f)", thousands(float64(r.Records)/r.Seconds), r.HalfS)
		}
		check := "every record once"
		switch {
		case r.Err != nil:
			check = oneLine(r.Err)
		case r.Mode == "paced" && (r.Seq.Lost > 0 || r.Seq.Dups > 0):
			check = fmt.Sprintf("%d lost, %d duplicated of %s", r.Seq.Lost, r.Seq.Dups, thousands(float64(r.Seq.Want)))
		case r.Mode == "upfront":
			check = "all read"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Mode, who, end, seal, r.Phases, spread, ahead, rec, rate, txns, marks, reps, cpu, check)
	}
	b.WriteString("\nphasegate's phase end → complete in parts (same phases, those every lane marked):\n\n")
	b.WriteString("| mode | run | phase end → last lane's seal p50 / p99 ms | of which phase end → the last task's watermark report past the phase p50 / p99 ms | that report → each lane's seal p50 / p99 ms | a report written → read by the bench p50 / p99 ms | last lane's seal → complete p50 / p99 ms | lanes' seal spread p50 / p99 ms | phases whose lanes' markers all became visible in one LSO poll |\n|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range s.Lanes {
		if r.Who != "phasegate" || r.Split.N == 0 {
			continue
		}
		sp := r.Split
		endSeal := "-"
		if r.Mode == "paced" {
			endSeal = fmt.Sprintf("%.0f / %.0f", percentile(sp.EndSeal, 50), percentile(sp.EndSeal, 99))
		}
		one := "one lane"
		if r.Tasks > 1 {
			one = fmt.Sprintf("%d of %d", sp.OnePoll, sp.N)
		}
		endRep, repSeal := "-", "-"
		if r.Mode == "paced" && len(sp.EndReport) > 0 {
			endRep = fmt.Sprintf("%.0f / %.0f", percentile(sp.EndReport, 50), percentile(sp.EndReport, 99))
		}
		if len(sp.ReportSeal) > 0 {
			repSeal = fmt.Sprintf("%.0f / %.0f", percentile(sp.ReportSeal, 50), percentile(sp.ReportSeal, 99))
		}
		fmt.Fprintf(b, "| %s | %d %s, PHASEGATE_TASKS=%d | %s | %s | %s | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %s |\n", r.Mode, r.N, plural(r.N, "instance"), r.Tasks, endSeal,
			endRep, repSeal, r.RepLatP50, r.RepLatP99, percentile(sp.SealComplete, 50), percentile(sp.SealComplete, 99), percentile(sp.SealSpread, 50), percentile(sp.SealSpread, 99), one)
	}
	// Targets: 3 instances' p99 phase end → complete ≤ 1.5× one instance's
	// (paced; up front the fastest lane's seal → complete), and no lane
	// more than 2 phases behind the fastest in the paced run.
	var targets []string
	for _, mode := range []string{"paced", "upfront"} {
		one, three := findLanes(s.Lanes, mode, 1), findLanes(s.Lanes, mode, 3)
		if one == nil || three == nil {
			continue
		}
		a, bb, what := one.EndP99, three.EndP99, "phase end → complete"
		if mode == "upfront" {
			a, bb, what = one.SealP99, three.SealP99, "first seal → complete"
		}
		if a > 0 && !math.IsNaN(a) && !math.IsNaN(bb) {
			targets = append(targets, fmt.Sprintf("%s, p99 %s: 3 instances %.0f ms, 1 instance %.0f ms, %.2f× (≤ 1.5×: %s)", mode, what, bb, a, bb/a, mark(bb <= 1.5*a)))
		}
		if mode == "paced" && three.Spread.Samples > 0 {
			targets = append(targets, fmt.Sprintf("paced, largest lane distance %.0f phases (≤ 2: %s)", three.Spread.Max, mark(three.Spread.Max <= 2)))
		}
	}
	if len(targets) > 0 {
		b.WriteString("\nTargets: " + strings.Join(targets, "; ") + ".\n")
	}
	b.WriteString(`
A phase is complete on an output partition once every lane's marker for it or a later phase is visible
to read_committed (MARKERS.md M8; the partition's last stable offsets polled every 5 ms); with one task
there is one lane. Phase end → complete counts from the phase's end in event time (paced: the records
are stamped when written), over every (partition, phase) some lane marked, after a 3 s warm-up and up
to the last phase that ended a phase and 300 ms before the producer stopped. The fastest lane's seal →
complete counts from the earliest seal time (the marker's record timestamp) among the lanes' markers
for the phase. Lane distance: every 100 ms, on each partition, the newest visible marker phase of the
fastest lane minus that of the slowest; data ahead: a lane's newest visible data phase minus the
slowest lane's newest marker (what a reader holds unfinished). Produce → visible per data record:
phasegate's record counts once its phase is complete on its partition; Kafka Streams' once visible.
Seal times are the markers' record timestamps (the sealing instance's clock; all run on this machine).
The watermark reports are read from the group's watermark topic: a task has passed phase N once its
report's low is above N (or it is idle), timed by the report's at_ms (the owner's clock when it wrote
it); the global watermark can pass N once the last task's report has. That report → a lane's seal is
then the report reaching the lane's instance (through the topic, except the instance's own) and the
instance sealing; "read by the bench" is how long a report took to reach a reader of the topic
(franz-go, fetch max wait 100 ms; at_ms to its receive time).
The markers of one phase from lanes that commit in separate transactions become visible in one LSO
poll (5 ms) when the lanes' transactions overlapped on the partition: a read_committed reader sees
nothing past the first offset of the oldest open transaction there, whichever lane it belongs to, so
the earlier lanes' markers wait for the last lane's commit (which completing the phase waits for
anyway; it would cost more if a lane's next transaction began before another lane's commit, which
sessions sharing a partition avoid by not streaming, align/stream.go). Each run's markers (partition, lane,
phase, offset, seal and visible times, watermark_ms) are in <run>.markers.tsv in the log directory.
Up front: every instance shares the tasks before the input (written at once by one producer) starts;
records/s from the first record written to the last marker (Streams: record) visible. Kafka Streams:
the pass-through, 1 thread per instance.
`)
}

func findLanes(rs []*lanesRun, mode string, n int) *lanesRun {
	for _, r := range rs {
		if r.Who == "phasegate" && r.Mode == mode && r.N == n && r.Err == nil {
			return r
		}
	}
	return nil
}

// renderSkewTasks is the skew step by PHASEGATE_TASKS, when several ran.
func renderSkewTasks(b *strings.Builder, c config, s *suiteResult) {
	if len(s.SkewRuns) < 2 {
		return
	}
	b.WriteString("\n## Skew step by PHASEGATE_TASKS (one instance, key routing; issue 34 item 3)\n\n")
	b.WriteString("| PHASEGATE_TASKS | records/s | CPU s / M records | peak RSS MiB | transactions | s in transactions | markers | records streamed | paused s | watermark-topic records | phases | runs |\n")
	b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for i, r := range s.SkewRuns {
		if r.Err != nil {
			fmt.Fprintf(b, "| %d | failed | | | | | | | | | | %s |\n", c.SkewTasks[i], oneLine(r.Err))
			continue
		}
		rate := thousands(r.rate())
		if r.Check != nil {
			rate = "not verified: " + oneLine(r.Check)
		}
		fmt.Fprintf(b, "| %d | %s | %.1f | %s | %s | %.1f | %s | %s | %.1f | %s | %d | %s |\n", c.SkewTasks[i], rate, r.CPU/float64(r.Records)*1e6, mib(r.HWM),
			thousands(r.Txns), r.TxnSeconds, thousands(r.Markers), thousands(r.Streamed), r.PausedS, thousands(float64(r.Reports)), r.Phases,
			strings.TrimPrefix(runsNote(r.Runs), "; "))
	}
	b.WriteString("\nEach repetition runs every task count in turn; the row is the median run. Profiles (BENCH_PROFILE=1) are of the first repetition, in the run's log directory.\n")
}
