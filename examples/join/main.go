// Command join is the reference join for phasegate's output: it reads the
// aligned topic with read_committed, hands each partition's records to a
// markers.Reader, and joins two branches per phase once the phase is whole.
//
//	go run ./examples/join -brokers localhost:9092 -topic aligned -left orders -right payments
//
// Because phasegate writes a phase's data and its marker in one transaction,
// and the Reader checks each marker's count, a phase handed to the join is
// complete: no record of it can arrive later, none is counted twice.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

func main() {
	brokers := flag.String("brokers", "localhost:9092", "bootstrap servers, comma separated")
	topic := flag.String("topic", "aligned", "phasegate's output topic")
	left := flag.String("left", "orders", "input topic of the left branch")
	right := flag.String("right", "payments", "input topic of the right branch")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	j := &Join{Left: *left, Right: *right, Out: os.Stdout}
	if err := j.Run(ctx, strings.Split(*brokers, ","), *topic); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "join:", err)
		os.Exit(1)
	}
}

// Join joins, per phase and per output partition, the records of two
// branches by key.
type Join struct {
	Left, Right string
	Out         io.Writer
	// Phases counts the phases joined; Violations the breaks of the wire
	// format the readers reported.
	Phases, Violations int
}

// Run reads topic from the start until ctx ends.
func (j *Join) Run(ctx context.Context, brokers []string, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // whole phases or nothing
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	readers := map[int32]*markers.Reader{}
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := fetches.Err(); err != nil {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			rd := readers[r.Partition]
			if rd == nil {
				rd = markers.NewReader(r.Partition)
				readers[r.Partition] = rd
			}
			j.Feed(rd, r)
		})
	}
}

// Feed gives one record to its partition's reader and joins the phase the
// record completes, if any.
func (j *Join) Feed(rd *markers.Reader, r *kgo.Record) {
	hs := make([]markers.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = markers.Header{Key: []byte(h.Key), Value: h.Value}
	}
	phase, err := rd.Feed(markers.Record{Key: r.Key, Value: r.Value, Headers: hs, Offset: r.Offset})
	for _, v := range markers.Violations(err) {
		j.Violations++
		fmt.Fprintf(j.Out, "VIOLATION partition %d: %v\n", r.Partition, v)
	}
	if phase != nil {
		j.join(r.Partition, phase)
	}
}

// join pairs each left record with the right records of the same key in
// the same phase, and reports the keys that found no partner.
func (j *Join) join(partition int32, ph *markers.Phase) {
	j.Phases++
	right := map[string][][]byte{}
	var left []markers.Record
	for _, rec := range ph.Records {
		switch branch(rec) {
		case j.Right:
			right[string(rec.Key)] = append(right[string(rec.Key)], rec.Value)
		case j.Left:
			left = append(left, rec)
		}
	}
	pairs, unmatched := 0, 0
	for _, l := range left {
		rs := right[string(l.Key)]
		if len(rs) == 0 {
			unmatched++
			continue
		}
		pairs += len(rs)
	}
	fmt.Fprintf(j.Out, "phase %d partition %d: %s=%d %s=%d (marker: %v) joined=%d unmatched=%d sealed_by=%s\n",
		ph.ID, partition, j.Left, ph.Marker.Sources[j.Left], j.Right, ph.Marker.Sources[j.Right],
		ph.Marker.Count, pairs, unmatched, ph.Marker.SealedBy)
}

// branch is the input topic a data record came from (its phasegate.source).
func branch(rec markers.Record) string {
	for _, h := range rec.Headers {
		if string(h.Key) == markers.HeaderSource {
			topic, _, _, err := markers.ParseSource(h.Value)
			if err == nil {
				return topic
			}
		}
	}
	return ""
}
