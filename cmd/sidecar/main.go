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

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/internal/config"
	"github.com/phasegate/phasegate/internal/preflight"
	"github.com/phasegate/phasegate/internal/statuscmd"
	"github.com/phasegate/phasegate/internal/verifycmd"
	"github.com/phasegate/phasegate/proxy"
	"github.com/phasegate/phasegate/tasks"
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
	case "healthcheck":
		if wantsHelp(args[1:]) {
			fmt.Fprint(stdout, healthcheckUsage)
			return 0
		}
		return healthcheck(environ, stderr)
	case "status":
		if wantsHelp(args[1:]) {
			statuscmd.Usage(stdout)
			return 0
		}
		return statuscmd.Run(args[1:], environ, stdout, stderr)
	case "verify":
		return runVerify(args[1:], environ, stdout, stderr)
	case "config":
		if wantsHelp(args[1:]) {
			fmt.Fprint(stdout, configUsage)
			return 0
		}
		cfg, warnings, err := config.Load(environ)
		if err != nil {
			fmt.Fprintln(stderr, "sidecar:", err)
			return 2
		}
		for _, w := range warnings {
			fmt.Fprintln(stderr, "sidecar: warning:", w)
		}
		config.Print(stdout, cfg)
		return 0
	case "demo":
		fmt.Fprintln(stderr, "sidecar: the demo is its own command now, so that the sidecar carries no test broker: go run ./cmd/demo (or make demo)")
		return 2
	case "":
	default:
		fmt.Fprintf(stderr, "sidecar: unknown command %q (try sidecar --help)\n", cmd)
		return 2
	}

	cfg, warnings, err := config.Load(environ)
	if err != nil {
		fmt.Fprintln(stderr, "sidecar:", err)
		return 2
	}
	log := newLogger(stderr, cfg)
	for _, w := range warnings {
		log.Warn(w)
	}
	limitMemory(environ, cfg, log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = serve(ctx, cfg, log)
	var ce *config.Error
	var se *tasks.SettingsError
	if errors.As(err, &se) {
		err = config.SettingsError(cfg.GroupID, se)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, preflight.ErrInterrupted):
		log.Info(err.Error() + ": nothing was started; exiting")
		return 0
	case errors.As(err, &ce):
		log.Error(ce.Msg)
		return 2
	}
	log.Error(forUsers(err.Error()))
	return 1
}

// runVerify is `sidecar verify`, until SIGINT or SIGTERM.
func runVerify(args []string, environ map[string]string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return verifycmd.Run(ctx, args, environ, stdout, stderr)
}

// shutdownGrace bounds the two-phase shutdown, below Kubernetes' 30 s.
const shutdownGrace = 25 * time.Second

// serve runs the sidecar until ctx ends (a signal) or a fatal error. A
// signal during start-up ends it at once with preflight.ErrInterrupted.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	srv, reg, err := listen(cfg, log)
	if err != nil {
		return err
	}
	defer srv.Close()
	pipe, err := start(ctx, cfg, log, srv, reg)
	if err != nil {
		return err
	}
	return runPipeline(ctx, pipe, srv, log)
}

// runPipeline runs pipe until it fails or ctx ends, then shuts it down
// within shutdownGrace.
func runPipeline(ctx context.Context, pipe *proxy.Pipeline, srv *app.Server, log *slog.Logger) error {
	done := make(chan error, 1)
	go func() { done <- pipe.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	srv.Stopping()
	log.Info("shutting down: readiness off, stopping consumption, finishing the transaction in flight", "grace", shutdownGrace.String())
	timer := time.NewTimer(shutdownGrace)
	defer timer.Stop()
	select {
	case err := <-done:
		if err == nil {
			log.Info("shut down cleanly")
		}
		return err
	case <-timer.C:
		return fmt.Errorf("shutdown took longer than %s; exiting with the transaction in flight left to the broker's timeout", shutdownGrace)
	}
}

func newLogger(w io.Writer, cfg config.Config) *slog.Logger {
	level, _ := config.ParseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	if level <= slog.LevelDebug {
		// sarama's own lines (requests retried, coordinators looked up,
		// metadata refreshed) show where a slow transaction or rebalance
		// spends its time.
		sarama.Logger = slog.NewLogLogger(h.WithAttrs([]slog.Attr{slog.String("client", "sarama")}), slog.LevelDebug)
	}
	return slog.New(h)
}

// errUnhealthy is returned by healthcheck when /healthz answers but not 200.
var errUnhealthy = errors.New("unhealthy")

// memoryHeadroom is what Go-managed memory may hold beyond the phase buffer
// and the collector's room (consumer fetches in flight, the batch being
// produced, the runtime): 48 MiB, so that with the binary's mapped text and
// data (about 17 MiB of RSS, which the soft limit does not cover) the
// process stays within twice the bound + 64 MiB.
const memoryHeadroom = 48 << 20

// limitMemory sets Go's soft memory limit to twice the buffer bound plus
// headroom, unless GOMEMLIMIT is set. Without a limit the collector lets
// the heap grow to twice the live data whatever the bound. Twice: a full
// buffer costs more than it counts (the client's messages, and its fetch
// responses until the claims copied the records out of them: a live heap
// of 300-370 MB after each collection at 2,048 partitions under the 256
// MiB bound; README, Performance), and the collector needs room in
// proportion to the live heap. At the bound + 48 MiB it ran without pause there: 153
// collections and 35 % of the CPU in 26 s, at under half the throughput
// (bench/results/2026-12-06-3d1219c7-22.md; -24.md at twice the bound: 29).
func limitMemory(environ map[string]string, cfg config.Config, log *slog.Logger) {
	if environ["GOMEMLIMIT"] != "" {
		return
	}
	limit := 2*cfg.MaxBufferBytes + memoryHeadroom
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit set from PHASEGATE_MAX_BUFFER_BYTES (set GOMEMLIMIT to override)", "bytes", limit)
}

// internalPackages are the library packages whose errors carry their name
// as a prefix (CONVENTIONS.md, rule 5): the prefix helps a maintainer, not
// an operator, so forUsers drops it at this boundary.
func internalPackages() []string { return []string{"proxy", "txn", "watermarks", "dedupe", "markers"} }

// forUsers drops internal package prefixes from an error message, at its
// start and after each ": " of a wrapped chain ("proxy: consumer group g:
// txn: fenced: ..." becomes "consumer group g: fenced: ...").
func forUsers(msg string) string {
	for _, p := range internalPackages() {
		msg = strings.TrimPrefix(msg, p+": ")
		msg = strings.ReplaceAll(msg, ": "+p+": ", ": ")
		msg = strings.ReplaceAll(msg, "("+p+": ", "(")
	}
	return msg
}
