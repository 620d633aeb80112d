package inproc

import (
	"context"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasegate/phasegate/proxy"
)

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

// Done returns Run's error channel, for a pipeline that stops by itself
// (fenced).
func (s *Sidecar) Done() <-chan error { return s.done }
