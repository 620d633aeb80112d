package main

import (
	"fmt"
	"strings"
	"time"
)

// streamsRows adds the Kafka Streams pass-through's rows to a size table.
func streamsRows(b *strings.Builder, sr *sizeRun) {
	for _, s := range sr.Streams {
		name := fmt.Sprintf("peer: Kafka Streams pass-through (exactly_once_v2, commit.interval.ms 100), %d %s", s.Threads, plural(s.Threads, "thread"))
		streamsRow(b, name, s)
	}
}

func streamsRow(b *strings.Builder, name string, s *streamsResult) {
	if s.Err != nil {
		fmt.Fprintf(b, "| %s | failed | | | | | | | %s |\n", name, oneLine(s.Err))
		return
	}
	note := fmt.Sprintf("state RUNNING after %s s; steady %s records/s; %s records read back with read_committed (the input's %s offsets, trailers included)",
		optS(s.RunningS), thousands(s.Steady), thousands(float64(s.Out)), thousands(float64(s.InOffsets)))
	note += runsNote(s.Runs)
	if s.Check != nil {
		fmt.Fprintf(b, "| %s | not verified | | %.1f | | | | | %s; %s |\n", name, s.Seconds, note, oneLine(s.Check))
		return
	}
	rate := s.rate()
	fmt.Fprintf(b, "| %s | %s | %.1f | %.1f | %s | %.1f | %s | %.1f | %s; output counted |\n", name, thousands(rate),
		rate*float64(s.Size)/1e6, s.Seconds, optS(s.FirstS), s.CPU/float64(s.Records)*1e6, mib(s.HWM), s.BrokerCPU, note)
}

// renderStreamsRatios is phasegate ÷ Kafka Streams per size, phase length
// and thread count: records/s, and CPU s per record (lower is better, so
// Streams ÷ phasegate).
func renderStreamsRatios(b *strings.Builder, c config, s *suiteResult) {
	if !c.step("streams") {
		return
	}
	b.WriteString("## phasegate ÷ Kafka Streams pass-through (same broker, same input)\n\n")
	b.WriteString("| size | phase | Streams threads | records/s: phasegate ÷ Streams | CPU per record: Streams ÷ phasegate | peak RSS: phasegate ÷ Streams |\n|---|---|--:|--:|--:|--:|\n")
	for _, sr := range s.Sizes {
		for i, L := range c.Phases {
			if i >= len(sr.Relays) || sr.Relays[i] == nil {
				continue
			}
			pg := sr.Relays[i]
			for _, st := range sr.Streams {
				var cpu, rss string = "-", "-"
				if pg.ok() && st.ok() && pg.CPU > 0 {
					cpu = fmt.Sprintf("%.2f", (st.CPU/float64(st.Records))/(pg.CPU/float64(pg.Records)))
				}
				if pg.ok() && st.ok() && st.HWM > 0 {
					rss = fmt.Sprintf("%.2f", float64(pg.HWM)/float64(st.HWM))
				}
				fmt.Fprintf(b, "| %d B | %s | %d | %s | %s | %s |\n", sr.Size, L, st.Threads, ratio(pg.rate(), st.rate()), cpu, rss)
			}
		}
	}
	b.WriteString("\n")
}

// renderProduceVisible is produce → visible to read_committed of data
// records for phasegate's paced runs and the Streams paced runs.
func renderProduceVisible(b *strings.Builder, c config, s *suiteResult) {
	if !c.step("paced") {
		return
	}
	var rows []*latencyResult
	for _, sr := range s.Sizes {
		for _, p := range sr.Paced {
			if p != nil && p.Data != nil {
				rows = append(rows, p.Data)
			}
		}
		rows = append(rows, sr.StrPaced...)
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Produce → visible to read_committed (data records), each paced at %.0f %% of its own rate for %s\n\n", c.PacedShare*100, c.PacedFor)
	b.WriteString("| size | run | paced at records/s | achieved | records timed | p50 ms | p99 ms | max ms |\n|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range rows {
		if p.Err != nil {
			fmt.Fprintf(b, "| %d B | %s | %s | failed | | | | %s |\n", p.Size, p.Who, thousands(p.TargetRate), oneLine(p.Err))
			continue
		}
		fmt.Fprintf(b, "| %d B | %s | %s | %s | %s | %.0f | %.0f | %.0f |\n", p.Size, p.Who, thousands(p.TargetRate), thousands(p.Achieved),
			thousands(float64(p.Samples)), p.P50, p.P99, p.Max)
	}
	b.WriteString("\nReceive time at a read_committed consumer (fetch max wait 100 ms) minus the record's timestamp, which the paced producer sets when it writes it and both phasegate and Kafka Streams keep; the first second is warm-up. phasegate's records wait for their phase to end, PHASEGATE_MAX_OUT_OF_ORDERNESS and the commit; Streams' for its commit interval (100 ms) and the commit.\n\n")
}

// emptyCells are a partitions row's cells between its records/s (where a
// failed run says so) and its notes.
const emptyCells = " | | | | | |"

// renderPartitions is the partitions step's table (issue 15's rows).
func renderPartitions(b *strings.Builder, c config, s *suiteResult) {
	if len(s.Partitions) == 0 {
		return
	}
	fmt.Fprintf(b, "## Input partitions: %d B records keyed over %d values, stamped from %s in the past at %s records/s of event time, phase %s, PHASEGATE_IDLE_TIMEOUT=%s; Kafka Streams with %d %s\n\n",
		c.PartitionsSize, c.PartitionsKeys, c.PartitionsAge, thousands(c.PartitionsRate), c.PartitionsPhase, c.PartitionsIdle, c.PartitionsStreams, plural(c.PartitionsStreams, "thread"))
	b.WriteString("| input partitions (fork A + B) | output partitions | records | empty input partitions | run | records/s incl. start-up | steady records/s | first output s | CPU s / M records | broker CPU s / M records | peak RSS MiB | longest starvation of a watermark holder with lag, s | notes |\n")
	b.WriteString("|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, p := range s.Partitions {
		lead := fmt.Sprintf("| %s (%d + %d) | %d | %s | %d", p.label(), p.Forks[0], p.Forks[1], p.OutParts, thousands(float64(p.Records)), p.Empty)
		if p.Heavy {
			lead = fmt.Sprintf("| %s (%d + %d), heavy: %s records/s of event time | %d | %s | %d", p.label(), p.Forks[0], p.Forks[1], thousands(p.Rate), p.OutParts, thousands(float64(p.Records)), p.Empty)
		}
		if p.Err != nil {
			fmt.Fprintf(b, "%s | - | failed%s | %s |\n", lead, emptyCells, oneLine(p.Err))
			continue
		}
		if r := p.Relay; r != nil {
			if r.Err != nil {
				fmt.Fprintf(b, "%s | phasegate | failed%s | %s |\n", lead, emptyCells, oneLine(r.Err))
			} else {
				rate, st, note := thousands(r.rate()), "-", ""
				if r.Starve != nil {
					if r.Starve.Note != "" {
						note = r.Starve.Note
					} else {
						st = fmt.Sprintf("%.1f", r.Starve.MaxS)
						note = fmt.Sprintf("longest: %s; %d /phases snapshots, up to %d holders with lag at once", orDash(r.Starve.Who), r.Starve.Samples, r.Starve.MaxHolder)
					}
				}
				note += fmt.Sprintf("; %d phases", r.Phases)
				if r.Check != nil {
					rate, note = "not verified", note+"; "+oneLine(r.Check)
				} else {
					note += "; output verified"
				}
				fmt.Fprintf(b, "%s | phasegate | %s | %s | %s | %.1f | %.1f | %s | %s | %s |\n", lead, rate, optRate(r.Steady),
					optS(r.FirstS), r.CPU/float64(r.Records)*1e6, r.BrokerCPU/float64(r.Records)*1e6, mib(r.HWM), st, note)
			}
		}
		if s := p.Streams; s != nil {
			switch {
			case s.Err != nil:
				fmt.Fprintf(b, "%s | Kafka Streams | failed%s | %s |\n", lead, emptyCells, oneLine(s.Err))
			case s.Check != nil:
				fmt.Fprintf(b, "%s | Kafka Streams | not verified%s | %s |\n", lead, emptyCells, oneLine(s.Check))
			default:
				fmt.Fprintf(b, "%s | Kafka Streams | %s | %s | %s | %.1f | %.1f | %s | - | state RUNNING after %s s; output counted |\n", lead, thousands(s.rate()), optRate(s.Steady),
					optS(s.FirstS), s.CPU/float64(s.Records)*1e6, s.BrokerCPU/float64(s.Records)*1e6, mib(s.HWM), optS(s.RunningS))
			}
		}
		for _, f := range p.Floors {
			who := "sarama floor"
			if f.Headers {
				who += " with phasegate's headers"
			}
			who += ", " + fetchSize(f.FetchBytes) + " fetches"
			if f.Err != nil {
				fmt.Fprintf(b, "%s | %s | failed%s | %s |\n", lead, who, emptyCells, oneLine(f.Err))
				continue
			}
			fmt.Fprintf(b, "%s | %s | %s | - | %s | %.1f | %.1f | - | - | consume → produce only; times are producer acknowledgements |\n", lead, who, thousands(f.rate()),
				optS(f.FirstS), f.CPU/float64(f.Records)*1e6, f.BrokerCPU/float64(f.Records)*1e6)
		}
	}
	b.WriteString("\nrecords/s incl. start-up: records ÷ (exec → the last output visible to read_committed). Steady: the records after the first commit ÷ the time from the first commit to the last. Both are timed by the group's committed input offsets, which commit in the same transaction as the output, polled from the broker at 10 Hz (phasegate: every offset but each partition's trailer, which commits only after PHASEGATE_IDLE_TIMEOUT; its /metrics is polled only until the first record is read). First output: exec → that first commit. Broker CPU: the broker's over the run (both share its 2 cores with it). Starvation: /phases polled every 150 ms (the sidecar rebuilds it every 200 ms); for each partition with holds_watermark and lag > 0 (and not idle), the time since its position last moved or since it began holding, whichever is later; the longest such time over the run (a lower bound, at the snapshots' resolution). The sarama floor: the same input copied by sarama alone (a consumer group, read_committed, whose claims queue each record for one idempotent acks=all async producer, with the sidecar's client settings, to input partition mod output partitions), without alignment, headers or transactions, each of which only adds work. It runs at the fetch size phasegate gives each partition for the layout (proxy.FetchBytes of pgbench's build, with the bound the sidecar reported: an 8th of PHASEGATE_MAX_BUFFER_BYTES shared out, within 16 KiB..1 MiB), then at sarama's default 1 MiB when that differs, then at phasegate's fetch size with the headers phasegate adds to every output record (phasegate.phase, phasegate.id, phasegate.source, built by markers.AppendDataHeaders as the sidecar does: about 100 B per record with these topic names, as much as a 100 B value), so that phasegate − that floor is phasegate's own work without the wire format's; its records/s count every input record (trailers included) from the clients' creation to the last acknowledgement; first output is the first acknowledgement; CPU is pgbench's, which does nothing else meanwhile. The floor bounds a relay's rate including start-up (every record fetched and produced in the time); it has no steady figure, and would not bound phasegate's, which starts at the first commit with the buffer filled during start-up. It runs only when phasegate's relay reported its bound.\n\n")
	renderPartitionRatios(b, s)
}

// renderPartitionRatios is the partitions step's ratios to its first row
// and to the peers; renderPartitions calls it with at least one row.
func renderPartitionRatios(b *strings.Builder, s *suiteResult) {
	var base float64
	if s.Partitions[0].Relay.ok() {
		base = s.Partitions[0].Relay.Steady
	}
	first := s.Partitions[0].Total
	floorBase := floorAtPhasegateFetch(s.Partitions[0]).rate()
	fmt.Fprintf(b, "| input partitions | phasegate steady ÷ its steady at %d partitions |", first)
	b.WriteString(" steady: phasegate ÷ Streams | incl. start-up: phasegate ÷ Streams | first output: phasegate ÷ Streams (time) |")
	fmt.Fprintf(b, " incl. start-up: sarama floor ÷ its rate at %d partitions (phasegate's fetch sizes) | incl. start-up: phasegate ÷ the sarama floor (same fetch size) | CPU s / M records: phasegate − the sarama floor | CPU s / M records: phasegate − the floor with phasegate's headers |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n", first)
	for _, p := range s.Partitions {
		if p.Relay == nil || p.Streams == nil {
			continue
		}
		var pgSteady, stSteady, first string = "-", "-", "-"
		if p.Relay.ok() {
			pgSteady = ratio(p.Relay.Steady, base)
			if p.Streams.ok() {
				stSteady = ratio(p.Relay.Steady, p.Streams.Steady)
				first = ratio(p.Relay.FirstS, p.Streams.FirstS)
			}
		}
		fl := floorAtPhasegateFetch(p)
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p.label(), pgSteady, stSteady, ratio(p.Relay.rate(), p.Streams.rate()), first,
			ratio(fl.rate(), floorBase), ratio(p.Relay.rate(), fl.rate()), cpuOver(p.Relay, fl), cpuOver(p.Relay, headerFloor(p)))
	}
	b.WriteString("\n")
}

// floorAtPhasegateFetch is a row's sarama floor at phasegate's fetch size,
// without headers (floors runs it first); nil when it did not run or
// failed.
func floorAtPhasegateFetch(p *partitionsRun) *floorResult {
	if len(p.Floors) == 0 || !p.Floors[0].ok() {
		return nil
	}
	return p.Floors[0]
}

// headerFloor is a row's sarama floor with phasegate's headers, nil when
// it did not run or failed.
func headerFloor(p *partitionsRun) *floorResult {
	for _, f := range p.Floors {
		if f.Headers && f.ok() {
			return f
		}
	}
	return nil
}

// cpuOver is the relay's CPU per million records minus the floor's, "-"
// when either did not run or failed.
func cpuOver(relay *relayResult, fl *floorResult) string {
	if !relay.ok() || !fl.ok() {
		return "-"
	}
	return fmt.Sprintf("%.1f", (relay.CPU/float64(relay.Records)-fl.CPU/float64(fl.Records))*1e6)
}

// fetchSize is a fetch size in MiB when whole, else in KiB.
func fetchSize(n int32) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1024), ".0") + " KiB"
}

// streamsMethod is added to the report's method note when a Streams step ran.
func streamsMethod(c config) string {
	if !c.step("streams") && !c.step("partitions") {
		return ""
	}
	return fmt.Sprintf(`
Kafka Streams: bench/streams, a pass-through (builder.stream(forks).to(output), byte-array serdes) with
processing.guarantee=exactly_once_v2 and commit.interval.ms=100, every other setting Streams' default,
built by scripts/bench-streams.sh from Maven Central at the broker's version and run as its own JVM (%s).
Its time is exec of the JVM to the moment its consumer group has committed every input offset: with
exactly_once_v2 the offsets commit in the transaction that wrote the output, so that is when the last
output record became visible to read_committed. Its output is then read back whole and counted. CPU and
peak RSS are the JVM's utime+stime and VmHWM at that moment, JVM start included. Its "start" is exec to
its first transaction committed (as the copier's); "steady" counts from there. Its paced runs go at
BENCH_PACED_SHARE of that steady rate, phasegate's at that share of its relay rate.
`, strings.Join(c.StreamsJVM, " "))
}

// optRate is a records/s figure, "-" when there is none.
func optRate(x float64) string {
	if x <= 0 {
		return "-"
	}
	return thousands(x)
}

// renderTargets12And15 reports the targets of issues 12 and 15 as ratios
// of this run (reported, not asserted).
func renderTargets12And15(b *strings.Builder, c config, s *suiteResult) {
	var thr, seal, end []string
	for _, sr := range s.Sizes {
		var peer *streamsResult // the pass-through with as many threads as the machine has cores, else its most threads
		for _, st := range sr.Streams {
			if peer == nil || st.Threads == s.Machine.Cores || (peer.Threads != s.Machine.Cores && st.Threads > peer.Threads) {
				peer = st
			}
		}
		for i, L := range c.Phases {
			if peer != nil && i < len(sr.Relays) && sr.Relays[i] != nil {
				thr = append(thr, fmt.Sprintf("%d B %s vs %d threads: %s", sr.Size, L, peer.Threads, verdict(sr.Relays[i].rate(), peer.rate(), 1.2)))
			}
			if i < len(sr.Paced) && sr.Paced[i] != nil && sr.Paced[i].Err == nil {
				p := sr.Paced[i]
				seal = append(seal, fmt.Sprintf("%d B %s: %.0f ms, %s", sr.Size, L, p.SealP99, mark(p.SealP99 <= 50)))
				bound := defaultOutOfOrderness
				if o := outOfOrderness(L); o > 0 {
					bound = o
				}
				limit := ms(bound + 100*time.Millisecond)
				end = append(end, fmt.Sprintf("%d B %s: %.0f ms against %.0f, %s", sr.Size, L, p.EndP99, limit, mark(p.EndP99 <= limit)))
			}
		}
	}
	var steady, vsStreams, startup, firstOut, starve []string
	var base float64
	for _, p := range s.Partitions {
		if p.Relay.ok() && base == 0 && p.Total < 8 {
			base = p.Relay.Steady
		}
	}
	for _, p := range s.Partitions {
		if p.Relay == nil || p.Total < 8 {
			continue
		}
		steady = append(steady, fmt.Sprintf("%s: %s", p.label(), verdict(p.Relay.Steady*boolf(p.Relay.ok()), base, 0.8)))
		if p.Streams != nil {
			vsStreams = append(vsStreams, fmt.Sprintf("%s: %s", p.label(), verdict(p.Relay.Steady*boolf(p.Relay.ok()), p.Streams.Steady*boolf(p.Streams.ok()), 1.5)))
			startup = append(startup, fmt.Sprintf("%s: %s", p.label(), verdict(p.Relay.rate(), p.Streams.rate(), 1)))
			if p.Relay.FirstS > 0 && p.Streams.FirstS > 0 {
				firstOut = append(firstOut, fmt.Sprintf("%s: %.1f s against %.1f s, %s", p.label(), p.Relay.FirstS, p.Streams.FirstS, mark(p.Relay.FirstS <= 2*p.Streams.FirstS)))
			}
		}
		if st := p.Relay.Starve; st != nil && st.Note == "" && st.Samples > 0 {
			starve = append(starve, fmt.Sprintf("%s: %.1f s, %s", p.label(), st.MaxS, mark(st.MaxS <= 1)))
		}
	}
	b.WriteString("\n## Targets of issues 12 and 15 (ratios of this run)\n\n| target | where it stands |\n|---|---|\n")
	fmt.Fprintf(b, "| 12: throughput ≥ 1.2× the Kafka Streams pass-through with as many threads as cores | %s |\n", orDash(strings.Join(thr, "; ")))
	fmt.Fprintf(b, "| 12: p99 seal → visible ≤ 50 ms at half of peak | %s |\n", orDash(strings.Join(seal, "; ")))
	fmt.Fprintf(b, "| 12: p99 phase end → visible ≤ PHASEGATE_MAX_OUT_OF_ORDERNESS + 100 ms | %s |\n", orDash(strings.Join(end, "; ")))
	fmt.Fprintf(b, "| 15: steady throughput ≥ 0.8× the 5-partition figure | %s |\n", orDash(strings.Join(steady, "; ")))
	fmt.Fprintf(b, "| 15: steady throughput ≥ 1.5× Kafka Streams | %s |\n", orDash(strings.Join(vsStreams, "; ")))
	fmt.Fprintf(b, "| 15: throughput including start-up ≥ 1.0× Kafka Streams | %s |\n", orDash(strings.Join(startup, "; ")))
	fmt.Fprintf(b, "| 15: first output within 2× Kafka Streams' | %s |\n", orDash(strings.Join(firstOut, "; ")))
	fmt.Fprintf(b, "| 15: no watermark holder with lag starved > 1 s | %s |\n", orDash(strings.Join(starve, "; ")))
}

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func boolf(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}
