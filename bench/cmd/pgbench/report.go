package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// render writes the markdown report of a run.
func render(s *suiteResult) string {
	var b strings.Builder
	c := s.Cfg
	fmt.Fprintf(&b, "# phasegate benchmark, %s, machine %s\n\n", s.Started.Format("2006-01-02 15:04 MST"), s.Machine.ID)
	fmt.Fprintf(&b, "`make bench`: %s records per size, sizes %s B, phases %s; phasegate %s; took %s.\n\n",
		thousands(float64(c.Records)), joinInts(c.Sizes), joinDurations(c.Phases), orDash(c.Commit), s.Ended.Sub(s.Started).Round(time.Second))
	b.WriteString("| machine | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPU | %s, %d cores |\n", s.Machine.CPU, s.Machine.Cores)
	fmt.Fprintf(&b, "| memory | %.1f GiB |\n", s.Machine.MemGiB)
	fmt.Fprintf(&b, "| kernel | %s |\n", s.Machine.Kernel)
	fmt.Fprintf(&b, "| versions | %s |\n", orDash(c.Versions))
	fmt.Fprintf(&b, "| load average at start | %s |\n", s.Machine.LoadAvg)
	if c.Compare != "" {
		fmt.Fprintf(&b, "| compared build | %s: %s (its relays alternate with phasegate's) |\n", c.CompareLabel, c.Compare)
	}
	if len(c.SidecarEnv) > 0 {
		fmt.Fprintf(&b, "| sidecar environment added | %s |\n", strings.Join(c.SidecarEnv, " "))
	}
	if c.Profile {
		b.WriteString("| note | BENCH_PROFILE=1: phasegate ran with profiling on; its numbers are slower than without |\n")
	}
	b.WriteString("\n")
	for _, sr := range s.Sizes {
		renderSize(&b, c, sr)
	}
	renderRatios(&b, c, s)
	renderStreamsRatios(&b, c, s)
	renderLatency(&b, c, s)
	renderProduceVisible(&b, c, s)
	renderSkew(&b, s)
	renderPartitions(&b, c, s)
	renderInstances(&b, c, s)
	renderHeavy(&b, s)
	renderRecovery(&b, c, s)
	renderLanes(&b, c, s)
	renderSkewTasks(&b, c, s)
	renderTargets(&b, c, s)
	renderTargets12And15(&b, c, s)
	b.WriteString(method)
	b.WriteString(streamsMethod(c))
	return b.String()
}

const method = `
How: one broker (e2e/kafka/kafka.sh, -Xmx512m) and every client on this machine, one step at a time.
MB/s is records/s × value size / 10^6 for every row. "time" is, for ProducerPerformance and
ConsumerPerformance, their own measurement (the consumer's includes its group join); for the copier,
exec of its JVMs to the exit of the last; for phasegate, exec of the sidecar to a read_committed fetch
showing the last phase's marker on every output partition. "start" is exec to the first record moved
(copier: first transaction committed). CPU is the process's utime+stime (JVM start included for the
tools; phasegate's read from /proc at the end of the relay); broker CPU is the broker's over the step.
The copier is Kafka's system-test tool: one JVM per fork topic in group mode, running at once, its
--transaction-size (= max.poll.records) set to one phase's records; it forces batch.size=512 on its
producer and copies neither headers nor timestamps. It is slow, so past BENCH_COPIER_RECORDS it copies
only the first BENCH_COPIER_RECORDS records of the same input (its own topics; same sizes,
timestamps and partitions), and its row says how many. phasegate's rows count only runs whose output
verified. ProducerPerformance and each phasegate relay run BENCH_REPEAT times (default 3); the row is
the median run and its note lists every run. Seal → visible is the time the output partition's
last stable offset (polled every 5 ms with ListOffsets, isolation read_committed) first passed the
marker, minus the marker's record timestamp, which phasegate sets when it seals the phase; seal → read
back is the marker's receive time at a read_committed consumer (fetch max wait 100 ms) instead, which
adds the reader fetching everything the phase's transaction wrote.
`

func renderSize(b *strings.Builder, c config, sr *sizeRun) {
	fmt.Fprintf(b, "## %s records of %d B\n\n", thousands(float64(c.Records)), sr.Size)
	if sr.Fill != nil || sr.InputRate > 0 {
		fmt.Fprintf(b, "Input stamped at %s records/s of event time (%s)", thousands(sr.InputRate), sr.RateFrom)
		for _, L := range c.Phases {
			fmt.Fprintf(b, "; a %s phase holds %s records", L, thousands(math.Round(sr.InputRate*L.Seconds())))
		}
		b.WriteString(".")
		if sr.Fill != nil {
			fmt.Fprintf(b, " Writing it (franz-go, idempotent, acks=all) took %.1f s.", sr.Fill.Seconds)
		}
		b.WriteString("\n\n")
	}
	b.WriteString("| run | records/s | MB/s | time s | start s | CPU s / M records | peak RSS MiB | broker CPU s | notes |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	if p := sr.Producer; p != nil {
		toolRow(b, "ceiling: ProducerPerformance (idempotent, acks=all)", p, sr.Size,
			fmt.Sprintf("p99 send latency %.0f ms%s", p.LatP99Ms, runsNote(p.Runs)))
	}
	if p := sr.Consumer; p != nil {
		toolRow(b, "ceiling: ConsumerPerformance", p, sr.Size, "")
	}
	if f := sr.Fill; f != nil && f.Seconds > 0 {
		rate := float64(f.Records) / f.Seconds
		fmt.Fprintf(b, "| reference: the input writer (franz-go in pgbench; idempotent, acks=all, linger 5 ms, 1 MiB batches) | %s | %.1f | %.1f | - | - | - | - | not a target; shows what a tuned producer does on this broker |\n",
			thousands(rate), rate*float64(sr.Size)/1e6, f.Seconds)
	}
	for i, L := range c.Phases {
		if i < len(sr.Copiers) && sr.Copiers[i] != nil {
			p := sr.Copiers[i]
			toolRow(b, fmt.Sprintf("peer: TransactionalMessageCopier, %s", L), p, sr.Size,
				fmt.Sprintf("%d JVMs, --transaction-size %s, %s transactions, %s records copied", p.Instances,
					thousands(float64(p.TxnSize)), thousands(float64(p.Txns)), thousands(float64(p.Records))))
		}
		if i < len(sr.Relays) && sr.Relays[i] != nil {
			relayRow(b, fmt.Sprintf("phasegate, %s", L), sr.Relays[i])
		}
		if i < len(sr.RelaysB) && sr.RelaysB[i] != nil {
			relayRow(b, fmt.Sprintf("phasegate %s (BENCH_COMPARE), %s", c.CompareLabel, L), sr.RelaysB[i])
		}
	}
	streamsRows(b, sr)
	for _, e := range sr.Errors {
		fmt.Fprintf(b, "\nError: %s\n", e)
	}
	b.WriteString("\n")
}

func toolRow(b *strings.Builder, name string, p *toolResult, size int, note string) {
	rate := p.rate()
	fmt.Fprintf(b, "| %s | %s | %.1f | %.1f | %s | %.1f | %s | %.1f | %s |\n", name, thousands(rate), rate*float64(size)/1e6,
		p.Seconds, optS(p.StartupS), p.CPU/float64(p.Records)*1e6, mib(p.PeakRSS), p.BrokerCPU, note)
}

func relayRow(b *strings.Builder, name string, r *relayResult) {
	if r.Err != nil {
		fmt.Fprintf(b, "| %s | failed | | | | | | | %s |\n", name, oneLine(r.Err))
		return
	}
	note := fmt.Sprintf("%s transactions (%.1f s in them), %d phases, peak buffered %s MiB", thousands(r.Txns), r.TxnSeconds, r.Phases, mib(r.PeakBuffered))
	if r.Rewinds > 0 {
		note += fmt.Sprintf(", %.0f rewinds", r.Rewinds)
	}
	note += runsNote(r.Runs)
	if r.Check != nil {
		fmt.Fprintf(b, "| %s | not verified | | %.1f | | | | | %s; %s |\n", name, r.Seconds, note, oneLine(r.Check))
		return
	}
	rate := r.rate()
	fmt.Fprintf(b, "| %s | %s | %.1f | %.1f | %s | %.1f | %s | %.1f | %s; output verified |\n", name, thousands(rate),
		rate*float64(r.Size)/1e6, r.Seconds, optS(r.StartupS), r.CPU/float64(r.Records)*1e6, mib(r.HWM), r.BrokerCPU, note)
}

func renderRatios(b *strings.Builder, c config, s *suiteResult) {
	b.WriteString("## Ratios (records/s)\n\n| size | phase | phasegate ÷ copier | phasegate ÷ producer (ProducerPerformance) | phasegate ÷ input writer (franz-go) |\n|---|---|--:|--:|--:|\n")
	for _, sr := range s.Sizes {
		for i, L := range c.Phases {
			if i >= len(sr.Relays) {
				continue
			}
			pg := sr.Relays[i].rate()
			var cp float64
			if i < len(sr.Copiers) {
				cp = sr.Copiers[i].rate()
			}
			var writer float64
			if sr.Fill != nil && sr.Fill.Seconds > 0 {
				writer = float64(sr.Fill.Records) / sr.Fill.Seconds
			}
			fmt.Fprintf(b, "| %d B | %s | %s | %s | %s |\n", sr.Size, L, ratio(pg, cp), ratio(pg, sr.Producer.rate()), ratio(pg, writer))
		}
	}
	b.WriteString("\n")
}

func renderLatency(b *strings.Builder, c config, s *suiteResult) {
	if c.PacedRate > 0 {
		fmt.Fprintf(b, "## Seal → visible to read_committed, paced at a fixed %s records/s (BENCH_PACED_RATE) for %s\n\n", thousands(c.PacedRate), c.PacedFor)
	} else {
		fmt.Fprintf(b, "## Seal → visible to read_committed, paced at %.0f %% of phasegate's relay rate for %s\n\n", c.PacedShare*100, c.PacedFor)
	}
	b.WriteString("| size | phase | paced at records/s | achieved | markers timed | p50 ms | p99 ms | max ms | phase end → visible p50 / p99 ms | seal → read back p50 / p99 ms | mean transaction ms | seal → commit mean / p99 ms |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, sr := range s.Sizes {
		for i, L := range c.Phases {
			if i >= len(sr.Paced) || sr.Paced[i] == nil {
				continue
			}
			p := sr.Paced[i]
			if p.Err != nil {
				fmt.Fprintf(b, "| %d B | %s | %s | failed | | | | | %s |\n", sr.Size, L, thousands(p.TargetRate), oneLine(p.Err))
				continue
			}
			fmt.Fprintf(b, "| %d B | %s | %s | %s | %d | %.0f | %.0f | %.0f | %.0f / %.0f | %.0f / %.0f | %.0f | %.0f / ≤ %.0f |\n", sr.Size, L, thousands(p.TargetRate),
				thousands(p.Achieved), p.Samples, p.SealP50, p.SealP99, p.SealMax, p.EndP50, p.EndP99, p.ReadP50, p.ReadP99, p.TxnMeanMs, p.SealCommitMeanMs, p.SealCommitP99Ms)
		}
	}
	b.WriteString("\nThe last two columns are phasegate's own histograms over the run: the mean (sum ÷ count) of the transaction's time from BeginTxn to its end (with streaming, BeginTxn is the phase's first record streamed), and the mean and p99 of the time from the seal to the commit's return, the p99 rounded up to a bucket bound (…, 10, 25, 50, 100, 250 ms, …). Seal → visible minus seal → commit is the broker's part: writing the commit markers that move the partitions' last stable offsets. Seal → read back minus seal → visible is the reader's: fetching the phase, which a read_committed consumer can only start once the transaction commits.\n")
	b.WriteString("Phase end → visible adds the wait for PHASEGATE_MAX_OUT_OF_ORDERNESS and the seal decision; it is what a join waits after a phase's last event.\n")
	b.WriteString("PHASEGATE_MAX_OUT_OF_ORDERNESS is the default 200 ms for phases above 200 ms and half the phase otherwise (the sidecar refuses a bound of a phase or more).\n\n")
}

func renderSkew(b *strings.Builder, s *suiteResult) {
	c := s.Cfg
	b.WriteString("## Skew: fork B 200 ms behind, a hot key with 70 % of fork A (all on A/0), PHASEGATE_ROUTING=key\n\n")
	if s.SkewErr != "" {
		fmt.Fprintf(b, "Error: %s\n\n", s.SkewErr)
		return
	}
	r := s.Skew
	if r == nil {
		b.WriteString("Not run.\n\n")
		return
	}
	fmt.Fprintf(b, "%s records of %d B stamped at %s records/s; phase %s (%s records).\n\n", thousands(float64(r.Records)), r.Size,
		thousands(s.SkewRate), c.SkewPhase, thousands(math.Round(s.SkewRate*c.SkewPhase.Seconds())))
	b.WriteString("| PHASEGATE_MAX_BUFFER_BYTES MiB | peak buffered MiB | peak RSS MiB | of which file-backed MiB | RSS − bound MiB | records/s | paused s (sum over partitions) | output |\n")
	b.WriteString("|--:|--:|--:|--:|--:|--:|--:|---|\n")
	if r.Err != nil {
		fmt.Fprintf(b, "| %s | | | | | failed | | %s |\n\n", mib(c.SkewBuffer), oneLine(r.Err))
		return
	}
	out := "verified"
	rate := thousands(r.rate())
	if r.Check != nil {
		out, rate = oneLine(r.Check), "not verified"
	}
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %.1f | %s |\n\n", mib(c.SkewBuffer), mib(r.PeakBuffered), mib(r.HWM),
		mib(r.RSSFile), mib(r.HWM-c.SkewBuffer), rate, r.PausedS, out)
}

func renderTargets(b *strings.Builder, c config, s *suiteResult) {
	b.WriteString("## Targets of issue 6\n\n| target | where it stands |\n|---|---|\n")
	var copier, producer, lat []string
	for _, sr := range s.Sizes {
		for i, L := range c.Phases {
			if i < len(sr.Relays) {
				pg := sr.Relays[i].rate()
				if i < len(sr.Copiers) {
					copier = append(copier, fmt.Sprintf("%d B %s: %s", sr.Size, L, verdict(pg, sr.Copiers[i].rate(), 1)))
				}
				producer = append(producer, fmt.Sprintf("%d B %s: %s", sr.Size, L, verdict(pg, sr.Producer.rate(), 0.5)))
			}
			if i < len(sr.Paced) && sr.Paced[i] != nil && sr.Paced[i].Err == nil {
				p := sr.Paced[i]
				mark := "met"
				if p.SealP99 > 100 {
					mark = "missed"
				}
				lat = append(lat, fmt.Sprintf("%d B %s: %.0f ms, %s", sr.Size, L, p.SealP99, mark))
			}
		}
	}
	fmt.Fprintf(b, "| throughput ≥ the copier's | %s |\n", orDash(strings.Join(copier, "; ")))
	fmt.Fprintf(b, "| throughput ≥ ½ of the producer ceiling | %s |\n", orDash(strings.Join(producer, "; ")))
	fmt.Fprintf(b, "| p99 seal → visible ≤ 100 ms at half of peak | %s |\n", orDash(strings.Join(lat, "; ")))
	// Issue 6 asked for the bound + 64 MiB; the sidecar's soft memory limit
	// has been twice the bound + 48 MiB since (README, PHASEGATE_MAX_BUFFER_BYTES).
	skew, full := "-", "-"
	if r := s.Skew; r != nil && r.Err == nil && r.HWM > 0 {
		asked, allowed := c.SkewBuffer+64<<20, 2*c.SkewBuffer+64<<20
		skew = fmt.Sprintf("%s MiB against %s MiB: %s (%.0f stream fallbacks)", mib(r.HWM), mib(asked), mark(r.HWM <= asked), r.Fallbacks)
		full = fmt.Sprintf("%s MiB against %s MiB: %s", mib(r.HWM), mib(allowed), mark(r.HWM <= allowed))
	}
	fmt.Fprintf(b, "| peak RSS ≤ bound + 64 MiB under skew | %s |\n", skew)
	fmt.Fprintf(b, "| peak RSS ≤ twice the bound + 64 MiB under skew (what the sidecar now allows itself) | %s |\n", full)
}

// verdict is "1.23× the reference (met)" for a throughput target of share × ref.
func verdict(got, ref, share float64) string {
	if got <= 0 || ref <= 0 {
		return "no number"
	}
	mark := "met"
	if got < share*ref {
		mark = "missed"
	}
	return fmt.Sprintf("%.2f×, %s", got/ref, mark)
}

// runsNote lists the records/s of repeated runs ("failed" for 0).
func runsNote(rates []float64) string {
	if len(rates) < 2 {
		return ""
	}
	s := make([]string, len(rates))
	for i, x := range rates {
		if x <= 0 {
			s[i] = "failed"
		} else {
			s[i] = thousands(x)
		}
	}
	return "; median of " + strconv.Itoa(len(rates)) + " runs: " + strings.Join(s, ", ") + " records/s"
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// thousands formats x rounded to an integer with comma separators.
func thousands(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func mib(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(int64(math.Round(float64(n)/(1<<20))), 10)
}

func optS(s float64) string {
	if s <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", "; ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " and ")
}

func joinDurations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, " and ")
}
