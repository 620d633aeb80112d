// Package kafkatest runs phasegate against a broker for tests and the demo:
// an in-process kfake cluster (fast, not proof), an independent franz-go
// client to write inputs and read outputs, and a sidecar runner.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/proxy"
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

// CreateTopics creates topics (name -> partitions) with replication factor 1.
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
	return nil
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

// Sidecar is a phasegate pipeline running in this process.
type Sidecar struct {
	Pipeline *proxy.Pipeline
	Registry *prometheus.Registry
	cancel   context.CancelFunc
	done     chan error
}

// KafkaFor returns client settings for brokers, with timeouts sized for
// tests.
func KafkaFor(brokers []string) proxy.Kafka {
	return proxy.Kafka{
		Brokers: brokers,
		Base: func() *sarama.Config {
			c := sarama.NewConfig()
			c.Version = sarama.V3_9_0_0
			c.ClientID = "phasegate-test"
			return c
		},
		TransactionTimeout: 5 * time.Second,
		SessionTimeout:     6 * time.Second,
		MaxRecordBytes:     1000000,
	}
}

// StartSidecar dials and runs a pipeline until Stop.
func StartSidecar(k proxy.Kafka, cfg proxy.Config, log *slog.Logger) (*Sidecar, error) {
	reg := prometheus.NewRegistry()
	p, err := proxy.Dial(k, cfg, log, reg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sidecar{Pipeline: p, Registry: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- p.Run(ctx) }()
	return s, nil
}

// Stop shuts the pipeline down and returns Run's error.
func (s *Sidecar) Stop() error {
	s.cancel()
	return <-s.done
}

// Done is closed... returns Run's error channel, for a pipeline that stops by
// itself (fenced).
func (s *Sidecar) Done() <-chan error { return s.done }
