package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// toolResult is one run of a Kafka tool that moves a known number of records.
type toolResult struct {
	Records   int64
	Seconds   float64 // the tool's own measurement where it has one, else wall time
	Wall      float64 // exec to exit, seconds
	CPU       float64 // CPU seconds of the tool's JVM
	PeakRSS   int64
	LatP99Ms  float64 // ProducerPerformance's send latency, when known
	Note      string
	StartupS  float64   // exec to the first record moved, when known
	TxnSize   int       // copier: --transaction-size
	Txns      int       // copier: transactions committed
	Instances int       // copier: JVMs run at once
	BrokerCPU float64   // the broker's CPU seconds over the run
	Runs      []float64 // records/s of every repetition, when repeated
}

func (r *toolResult) rate() float64 {
	if r == nil || r.Seconds <= 0 {
		return 0
	}
	return float64(r.Records) / r.Seconds
}

// tools runs Kafka's command-line tools through kafka.sh.
type tools struct {
	kafkaSh string
	brokers string
	logDir  string
}

func (t tools) start(logName string, onLine func(string, time.Time), class string, args ...string) (*proc, error) {
	return startProc(t.kafkaSh, append([]string{"tool", class}, args...), nil, filepath.Join(t.logDir, logName+".log"), onLine)
}

// producerPerf runs ProducerPerformance: n records of size bytes, as fast as
// it can, idempotent with acks=all.
func (t tools) producerPerf(ctx context.Context, topic string, n, size int) (*toolResult, error) {
	var mu sync.Mutex
	var last string
	p, err := t.start("producer-perf-"+topic, func(line string, _ time.Time) {
		if strings.Contains(line, "records sent") {
			mu.Lock()
			last = line
			mu.Unlock()
		}
	}, "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", strconv.Itoa(n), "--record-size", strconv.Itoa(size),
		"--throughput", "-1", "--producer-props", "bootstrap.servers="+t.brokers, "acks=all", "enable.idempotence=true")
	if err != nil {
		return nil, err
	}
	if err := p.wait(ctx); err != nil {
		return nil, fmt.Errorf("ProducerPerformance: %w (log %s)", err, p.log.Name())
	}
	mu.Lock()
	defer mu.Unlock()
	res, err := parseProducerPerf(last)
	if err != nil {
		return nil, err
	}
	res.Wall = time.Since(p.started).Seconds()
	res.CPU, res.PeakRSS = p.cpuSeconds(), p.maxRSS()
	return res, nil
}

// parseProducerPerf reads ProducerPerformance's summary line.
func parseProducerPerf(line string) (*toolResult, error) {
	summary := regexp.MustCompile(`^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th`)
	m := summary.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return nil, fmt.Errorf("pgbench: no ProducerPerformance summary in %q", line)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	rate, _ := strconv.ParseFloat(m[2], 64)
	p99, _ := strconv.ParseFloat(m[8], 64)
	if n <= 0 || rate <= 0 {
		return nil, fmt.Errorf("pgbench: ProducerPerformance sent %d records at %g/s", n, rate)
	}
	return &toolResult{Records: n, Seconds: float64(n) / rate, LatP99Ms: p99}, nil
}

// consumerPerf runs ConsumerPerformance over n records of topic.
func (t tools) consumerPerf(ctx context.Context, topic string, n int) (*toolResult, error) {
	var mu sync.Mutex
	var lines []string
	p, err := t.start("consumer-perf-"+topic, func(line string, _ time.Time) {
		mu.Lock()
		lines = append(lines, line)
		mu.Unlock()
	}, "org.apache.kafka.tools.ConsumerPerformance",
		"--bootstrap-server", t.brokers, "--topic", topic, "--messages", strconv.Itoa(n), "--timeout", "60000")
	if err != nil {
		return nil, err
	}
	if err := p.wait(ctx); err != nil {
		return nil, fmt.Errorf("ConsumerPerformance: %w (log %s)", err, p.log.Name())
	}
	mu.Lock()
	defer mu.Unlock()
	res, err := parseConsumerPerf(lines)
	if err != nil {
		return nil, err
	}
	res.Wall = time.Since(p.started).Seconds()
	res.CPU, res.PeakRSS = p.cpuSeconds(), p.maxRSS()
	return res, nil
}

// parseConsumerPerf reads ConsumerPerformance's header and data line. Its
// nMsg.sec counts from the consumer's start, the group join included (as
// phasegate's and the copier's times do).
func parseConsumerPerf(lines []string) (*toolResult, error) {
	var header []string
	for _, l := range lines {
		cols := strings.Split(l, ", ")
		if header == nil {
			if len(cols) > 5 && cols[0] == "start.time" {
				header = cols
			}
			continue
		}
		if len(cols) != len(header) {
			continue
		}
		v := map[string]string{}
		for i, h := range header {
			v[h] = strings.TrimSpace(cols[i])
		}
		n, err1 := strconv.ParseInt(v["data.consumed.in.nMsg"], 10, 64)
		rate, err2 := strconv.ParseFloat(v["nMsg.sec"], 64)
		if err1 != nil || err2 != nil || n <= 0 || rate <= 0 {
			return nil, fmt.Errorf("pgbench: ConsumerPerformance line %q", l)
		}
		res := &toolResult{Records: n, Seconds: float64(n) / rate}
		if ms, err := strconv.ParseFloat(v["rebalance.time.ms"], 64); err == nil {
			res.StartupS = ms / 1000
		}
		return res, nil
	}
	return nil, fmt.Errorf("pgbench: no ConsumerPerformance summary in %d lines", len(lines))
}

// copierStatus is one JSON status line of TransactionalMessageCopier.
type copierStatus struct {
	TotalProcessed int64 `json:"totalProcessed"`
}

// copierTracker follows one copier's status lines: transactions are the
// increases of totalProcessed (the copier prints a line before every poll).
type copierTracker struct {
	mu        sync.Mutex
	processed int64
	txns      int
	first     time.Time
}

func (c *copierTracker) line(l string, at time.Time) {
	var s copierStatus
	if json.Unmarshal([]byte(l), &s) != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.TotalProcessed > c.processed {
		if c.processed == 0 {
			c.first = at
		}
		c.processed = s.TotalProcessed
		c.txns++
	}
}

// copier runs one TransactionalMessageCopier per input topic, at once, in
// group mode, until each has copied its topic's end offsets as of its start.
func (t tools) copier(ctx context.Context, inputs []string, output string, txnSize int, tag string) (*toolResult, error) {
	trackers := make([]*copierTracker, len(inputs))
	procs := make([]*proc, 0, len(inputs))
	stopAll := func() {
		for _, p := range procs {
			p.kill()
		}
	}
	for i, in := range inputs {
		trackers[i] = &copierTracker{}
		id := fmt.Sprintf("copier-%s-%d", tag, i)
		p, err := t.start(id, trackers[i].line, "org.apache.kafka.tools.TransactionalMessageCopier",
			"--input-topic", in, "--input-partition", "0", "--output-topic", output, "--broker-list", t.brokers,
			"--consumer-group", id, "--transactional-id", id, "--transaction-size", strconv.Itoa(txnSize),
			"--group-mode", "--use-group-metadata", "--transaction-timeout", "60000")
		if err != nil {
			stopAll()
			return nil, err
		}
		procs = append(procs, p)
	}
	res := &toolResult{TxnSize: txnSize, Instances: len(inputs)}
	start := procs[0].started
	var first time.Time
	for i, p := range procs {
		if err := p.wait(ctx); err != nil {
			stopAll()
			return nil, fmt.Errorf("TransactionalMessageCopier on %s: %w (log %s)", inputs[i], err, p.log.Name())
		}
		res.CPU += p.cpuSeconds()
		res.PeakRSS += p.maxRSS()
		tr := trackers[i]
		tr.mu.Lock()
		res.Records += tr.processed
		res.Txns += tr.txns
		if first.IsZero() || (!tr.first.IsZero() && tr.first.Before(first)) {
			first = tr.first
		}
		tr.mu.Unlock()
	}
	res.Wall = time.Since(start).Seconds()
	res.Seconds = res.Wall
	if !first.IsZero() {
		res.StartupS = first.Sub(start).Seconds()
	}
	return res, nil
}
