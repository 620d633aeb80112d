// Command sidecar is phasegate: it reads the fork topics of a Kafka fork-join
// pipeline, seals each phase when every partition has passed it, and
// republishes it with a marker on every output partition in one transaction.
// It is configured by PHASEGATE_* environment variables (sidecar --help).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], environ(), os.Stdout, os.Stderr))
}

// environ returns the process environment as a map.
func environ() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// run is main without os.Exit: it returns the exit status.
func run(args []string, environ map[string]string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "-h", "--help", "-help", "help":
		printHelp(stdout)
		return 0
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "healthcheck":
		return healthcheck(environ, stderr)
	case "status":
		return runStatus(args[1:], environ, stdout, stderr)
	case "config":
		cfg, err := loadConfig(environ)
		if err != nil {
			fmt.Fprintln(stderr, "sidecar:", err)
			return 2
		}
		printConfig(stdout, cfg)
		return 0
	case "":
	default:
		fmt.Fprintf(stderr, "sidecar: unknown command %q (try sidecar --help)\n", cmd)
		return 2
	}

	cfg, err := loadConfig(environ)
	if err != nil {
		fmt.Fprintln(stderr, "sidecar:", err)
		return 2
	}
	log := newLogger(stderr, cfg)
	limitMemory(environ, cfg, log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, log); err != nil {
		log.Error(err.Error())
		return 1
	}
	return 0
}

// shutdownGrace bounds the two-phase shutdown, below Kubernetes' 30 s.
const shutdownGrace = 25 * time.Second

// serve runs the sidecar until ctx ends (a signal) or a fatal error.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	s, err := start(ctx, cfg, log)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- s.run() }()
	select {
	case err := <-done:
		s.close()
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: readiness off, stopping consumption, finishing the transaction in flight", "grace", shutdownGrace)
	select {
	case err := <-done:
		s.close()
		if err == nil {
			log.Info("shut down cleanly")
		}
		return err
	case <-time.After(shutdownGrace):
		return fmt.Errorf("shutdown took longer than %s; exiting with the transaction in flight left to the broker's timeout", shutdownGrace)
	}
}

func newLogger(w io.Writer, cfg Config) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, badVar("LOG_LEVEL", s, "debug, info, warn or error")
	}
	return l, nil
}

var errUnhealthy = errors.New("unhealthy")

// memoryHeadroom is what Go-managed memory may hold beyond the phase buffer
// (consumer fetches in flight, the batch being produced, the runtime): 48 MiB,
// so that with the binary's mapped text and data (about 17 MiB of RSS, which
// the soft limit does not cover) the process stays within the bound + 64 MiB.
const memoryHeadroom = 48 << 20

// limitMemory sets Go's soft memory limit to the buffer bound plus headroom,
// unless GOMEMLIMIT is set: without it the garbage collector lets the heap
// grow to twice the live data, and the process would hold far more than
// PHASEGATE_MAX_BUFFER_BYTES under skew.
func limitMemory(environ map[string]string, cfg Config, log *slog.Logger) {
	if environ["GOMEMLIMIT"] != "" {
		return
	}
	limit := cfg.MaxBufferBytes + memoryHeadroom
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit set from PHASEGATE_MAX_BUFFER_BYTES (set GOMEMLIMIT to override)", "bytes", limit)
}
