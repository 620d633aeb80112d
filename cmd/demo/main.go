package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the demo's flags.
type options struct {
	duration time.Duration
	addr     string
	addrFrom string // what named addr: -http, PHASEGATE_HTTP_ADDR or the default
	addrSet  bool   // addr was asked for: no fallback to a free port
	hold     bool
}

// Bounds of -duration: below 2 s the events crowd into the first phases;
// above 10 min the demo is no longer a demo.
const (
	minDuration = 2 * time.Second
	maxDuration = 10 * time.Minute
	defaultAddr = "127.0.0.1:9464"
)

// run is main without os.Exit: 0 after the run (or when ctx ends: Ctrl-C),
// 1 when it fails, 2 on bad flags.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.DurationVar(&o.duration, "duration", 8*time.Second, "how long the producers feed the forks (2s to 10m); the events are placed at fixed fractions of it")
	fs.StringVar(&o.addr, "http", "", "where to serve the live view and /metrics, /phases (default PHASEGATE_HTTP_ADDR, else "+defaultAddr+", else a free port)")
	fs.BoolVar(&o.hold, "hold", false, "keep the pipeline and the live view up after the summary, until Ctrl-C")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: go run ./cmd/demo [-duration 8s] [-http host:port] [-hold]

Runs phasegate on an in-process Kafka (kfake): two forks, orders (3
partitions, a hot key, one partition going silent) and payments (2
partitions, 200 ms behind), a retry storm and a late payment; prints each
phase as a read_committed consumer sees it, then a summary. The live view is
served while it runs (and after, with -hold).

`)
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected argument %q (see -help)\n", fs.Arg(0))
		return 2
	}
	if o.duration < minDuration || o.duration > maxDuration {
		fmt.Fprintf(stderr, "demo: -duration=%s: must be from 2s to 10m\n", durationFlag(args))
		return 2
	}
	switch {
	case o.addr != "":
		o.addrFrom, o.addrSet = "-http="+o.addr, true
	case getenv("PHASEGATE_HTTP_ADDR") != "":
		o.addr = getenv("PHASEGATE_HTTP_ADDR")
		o.addrFrom, o.addrSet = "PHASEGATE_HTTP_ADDR="+o.addr, true
	default:
		o.addr, o.addrFrom = defaultAddr, "the default "+defaultAddr
	}
	if err := demo(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}

// durationFlag is -duration's value as written, for the error message.
func durationFlag(args []string) string {
	for i, a := range args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "duration" {
			continue
		}
		if ok {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
