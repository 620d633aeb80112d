package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitionsRun is one row of the partitions step (issue 15): forks of
// Total input partitions in all, relayed by phasegate and by the Kafka
// Streams pass-through on the same topics.
type partitionsRun struct {
	Total    int
	Heavy    bool // the heavy-phase row (issue 34 item 1): its rate fills a phase with ~230,000 records
	Forks    [2]int32
	OutParts int32
	Records  int
	Size     int
	Rate     float64 // records/s of event time the input was stamped with
	FillS    float64
	Empty    int // input partitions without a record
	Relay    *relayResult
	Streams  *streamsResult
	// Floors are the sarama floor's runs: at phasegate's fetch size for
	// the layout first, then at sarama's default when that differs, then
	// at phasegate's fetch size with phasegate's headers (the last one,
	// floorResult.Headers).
	Floors []*floorResult
	Err    error
}

// partitionsLayout splits total input partitions over two forks (the
// larger half first) and picks the output's partition count: 3 for a
// handful, else half the inputs up to 256 (the layout issue 15 tried).
func partitionsLayout(total int) (a, b, out int32) {
	a = int32((total + 1) / 2)
	b = int32(total) - a
	out = min(a, 256)
	if total < 8 {
		out = outputPartitions
	}
	return a, b, out
}

// partitions writes the keyed input for total partitions and relays it with
// phasegate (1 run, /phases polled for starving watermark holders), with
// the Kafka Streams pass-through (BENCH_PARTITIONS_STREAMS_THREADS threads)
// and with the sarama floor (floors), then deletes the row's topics so the
// next row meets a light broker.
func (r *runner) partitions(ctx context.Context, total, records int, rate float64, heavy bool) *partitionsRun {
	c := r.cfg
	a, b, out := partitionsLayout(total)
	pr := &partitionsRun{Total: total, Heavy: heavy, Forks: [2]int32{a, b}, OutParts: out, Records: records, Size: c.PartitionsSize}
	pr.Rate = rate
	name := fmt.Sprintf("%s-parts-%d", r.tag, total)
	if heavy {
		name += "h"
	}
	spec := inputSpec{
		Topics:  []topicSpec{{name + "-a", a}, {name + "-b", b}},
		Records: records, Size: c.PartitionsSize, Rate: pr.Rate, Trailer: trailerGap, Keys: c.PartitionsKeys,
		Start: time.Now().Add(-c.PartitionsAge).Truncate(time.Second),
	}
	topics := []string{spec.Topics[0].Name, spec.Topics[1].Name}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := deleteTopicsLike(dctx, c.Brokers, name+"-"); err != nil {
			r.log.Warn("deleting the partitions step's topics", "prefix", name, "err", err)
		}
	}()
	sctx, cancel := r.stepCtx(ctx)
	err := createTopics(sctx, c.Brokers, spec.Topics...)
	var f *fillResult
	if err == nil {
		f, err = fill(sctx, c.Brokers, spec)
	}
	if err == nil {
		pr.Empty, err = emptyPartitions(sctx, c.Brokers, topics)
	}
	cancel()
	if err != nil {
		pr.Err = fmt.Errorf("fill: %w", err)
		return pr
	}
	pr.FillS = f.Seconds
	r.log.Info("partitions input written", "partitions", total, "records", records, "empty_partitions", pr.Empty, "seconds", f.Seconds)
	in := relayInput{Topics: topics, Records: records, LastMs: f.LastMs, OutParts: out, Watch: true, TraceTxns: heavy}
	env := sidecarEnv{PhaseLength: c.PartitionsPhase, Pprof: c.Profile, Extra: []string{"PHASEGATE_IDLE_TIMEOUT=" + c.PartitionsIdle.String()}}
	label := strconv.Itoa(total)
	if heavy {
		label += "h"
	}
	pr.Relay = r.relay(ctx, fmt.Sprintf("parts-%s-relay", label), in, c.PartitionsSize, env)
	if ctx.Err() == nil {
		pr.Streams = r.streamsRelay(ctx, fmt.Sprintf("parts-%s-streams", label), in, c.PartitionsSize, c.PartitionsStreams)
	}
	if pr.Relay != nil && pr.Relay.MaxBuffer > 0 && !heavy { // the heavy row compares with Streams only
		pr.Floors = r.floors(ctx, name, in, pr.Relay.MaxBuffer, total, c.PartitionsPhase)
	}
	return pr
}

// emptyPartitions counts the partitions of topics with no record.
func emptyPartitions(ctx context.Context, brokers []string, topics []string) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ends, err := endOffsets(ctx, kadm.NewClient(cl), topics)
	n := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 0 {
			n++
		}
	})
	return n, err
}

// deleteTopicsLike deletes every topic whose name starts with prefix.
func deleteTopicsLike(ctx context.Context, brokers []string, prefix string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, t := range td.Names() {
		if len(t) >= len(prefix) && t[:len(prefix)] == prefix {
			names = append(names, t)
		}
	}
	if len(names) == 0 {
		return nil
	}
	resp, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return err
	}
	return resp.Error()
}
