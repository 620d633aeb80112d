package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// Kfake starts an in-process Kafka cluster with the topics (name ->
// partitions). Close it with Cluster.Close.
func Kfake(topics map[string]int32) (*kfake.Cluster, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	if err := CreateTopics(c.ListenAddrs(), topics); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// CreateTopics creates topics (name -> partitions) with replication factor 1
// and returns once the broker's metadata lists every partition with a
// leader. A broker learns of a topic from the controller after CreateTopics
// has answered; a producer that asks before then is told the topic is
// unknown and, with franz-go's 5 s metadata minimum age, writes nothing for
// 5 s, long enough for the sidecar to judge the partitions idle (F1 on the
// container broker: 2,000 payments records quarantined as late, 1 run of 3).
func CreateTopics(brokers []string, topics map[string]int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for t, n := range topics {
		resp, err := adm.CreateTopic(ctx, n, 1, nil, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	for {
		md, err := adm.Metadata(ctx, names...)
		if err == nil && led(md.Topics, topics) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %v created but not all led after 30 s: %v", names, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// led reports whether every topic of want has all its partitions, each
// with a leader.
func led(got kadm.TopicDetails, want map[string]int32) bool {
	for t, n := range want {
		d, ok := got[t]
		if !ok || d.Err != nil || int32(len(d.Partitions)) != n {
			return false
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// Producer writes input records with an independent client (franz-go), to
// the partition each record names.
type Producer struct{ cl *kgo.Client }

// NewProducer connects a producer; opts may add kgo.TransactionalID.
func NewProducer(brokers []string, opts ...kgo.Opt) (*Producer, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &Producer{cl: cl}, nil
}

// Produce writes recs and waits for them; each gets its offset.
func (p *Producer) Produce(ctx context.Context, recs ...*kgo.Record) error {
	return p.cl.ProduceSync(ctx, recs...).FirstErr()
}

// Close closes the client.
func (p *Producer) Close() { p.cl.Close() }

// Headers is hs as franz-go's headers, for records that tests build with
// markers' Append*Headers functions.
func Headers(hs []markers.Header) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = kgo.RecordHeader{Key: string(h.Key), Value: h.Value}
	}
	return out
}

// Source is a written record's <topic>/<partition>/<offset>.
func Source(r *kgo.Record) string {
	return string(markers.AppendSource(nil, r.Topic, r.Partition, r.Offset))
}

// ReadTopic reads every partition of topic from the start, with
// read_committed when committed is set, until no record arrived for quiet.
// It returns the records of each partition in offset order.
func ReadTopic(ctx context.Context, brokers []string, topic string, committed bool, quiet time.Duration) ([][]markers.Record, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	} else {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([][]markers.Record, len(td[topic].Partitions))
	for {
		pctx, cancel := context.WithTimeout(ctx, quiet)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		n := 0
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				return nil, e.Err
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			hs := make([]markers.Header, len(r.Headers))
			for i, h := range r.Headers {
				hs[i] = markers.Header{Key: []byte(h.Key), Value: h.Value}
			}
			out[r.Partition] = append(out[r.Partition], markers.Record{Key: r.Key, Value: r.Value, Headers: hs, Offset: r.Offset})
		})
		if n == 0 {
			return out, nil
		}
	}
}
