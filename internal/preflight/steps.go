package preflight

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/phasegate/phasegate/internal/config"
)

// What to check when a step after the probe times out: the brokers have
// answered the probe, so the address is right and speaks Kafka.
// CheckAdvertised is for cmd/sidecar's own step (the producer and the
// group) too.
const (
	checkBrokerHealth = "the brokers answered the probe but not this request: check their health and logs"
	CheckAdvertised   = "the brokers answered, but the producer or the group got no further: check that the brokers' advertised.listeners are reachable from here and that transactions work on the cluster (transaction.state.log.* settings)"
)

// Deadlines of the start-up steps. Each is far above what a healthy
// cluster needs (milliseconds) and far below what sarama's defaults allow
// (a dial of 30 s, a read of 30 s, three metadata retries: minutes).
// DialTimeout bounds cmd/sidecar's step that dials the producer and joins
// the group.
const (
	probeStepTimeout      = probeDialTimeout + 2*probeAnswerTimeout + httpProbeTimeout + time.Second
	metadataStepTimeout   = 30 * time.Second
	configsStepTimeout    = 15 * time.Second
	quarantineStepTimeout = 45 * time.Second
	DialTimeout           = 60 * time.Second
)

// ErrInterrupted is returned, wrapped with the step, when a signal ended
// start-up: nothing was started, so the process exits 0.
var ErrInterrupted = errors.New("start-up interrupted by a signal")

// Progress is told each step as it starts: the sidecar's HTTP server
// (app.Server), whose /readyz and /phases then name the step.
type Progress interface {
	Starting(step string)
}

// Steps runs the steps before consuming, each under the process's context
// and its own deadline, and tells progress and the log what it waits for.
// It is used by one goroutine, the one starting the sidecar.
type Steps struct {
	ctx      context.Context
	log      *slog.Logger
	progress Progress
}

// New returns the steps of a start-up that ctx (the signal context) ends.
func New(ctx context.Context, log *slog.Logger, progress Progress) *Steps {
	return &Steps{ctx: ctx, log: log, progress: progress}
}

// Step runs fn with a context bounded by timeout. It returns as soon as
// the process is signalled or the deadline passes, even when fn does not:
// sarama's calls take no context, so an abandoned call runs on until its
// own (shortened) network timeouts while the process exits. This is the
// one place where a goroutine is not waited for, on purpose: waiting would
// break the 25 s promise.
//
// check is what to look at when the deadline passes.
//
// It returns fn's error as it is, an error naming what and check when the
// deadline passes, or ErrInterrupted (wrapped) when ctx ended.
func (s *Steps) Step(what, check string, timeout time.Duration, fn func(ctx context.Context) error) error {
	s.log.Info("start-up: waiting for "+what, "timeout", config.FormatDuration(timeout))
	s.progress.Starting(what)
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	switch {
	case err == nil:
		return nil
	case s.ctx.Err() != nil:
		return fmt.Errorf("%w while waiting for %s", ErrInterrupted, what)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer within %s while waiting for %s: %s", timeout, what, check)
	}
	return err
}
