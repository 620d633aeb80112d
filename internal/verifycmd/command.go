package verifycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/phasegate/phasegate/internal/config"
)

// verifyOpts is what the flags ask for.
type verifyOpts struct {
	topic, quarantine string
	inputs            []string
	group             string
	from, to          time.Time // zero: the log start, the end offsets at start
	fromOff, toOff    offsetSpec
	json              bool
	progress          time.Duration
	maxOpen           int
	phaseLength       time.Duration
}

// Exit statuses of `sidecar verify` beyond 0 (whole), 1 (violations) and
// 2 (bad usage).
const (
	exitCannotCheck = 3   // the cluster could not be read
	exitInterrupted = 130 // Ctrl-C (128 + SIGINT), after printing what was checked
)

const verifyUsage = `Usage: sidecar verify [flags]

Reads an aligned topic with read_committed, up to its end offsets at start,
and checks every rule of docs/MARKERS.md on every partition. Prints one line
per violation (partition, offset, phase, rule, what to do), then a table per
phase (per partition: records, marker count, sealed_by, sources), then per
source topic histograms of phase durations and record counts.

Connection: PHASEGATE_BROKERS, PHASEGATE_KAFKA_VERSION, PHASEGATE_CLIENT_ID
and the PHASEGATE_SECURITY_PROTOCOL / SASL / TLS variables, as the sidecar.

Exit status: 0 whole, 1 violations found, 2 bad usage, 3 the cluster could
not be read, 130 interrupted (what was checked so far is printed).

Flags:
`

// Run is `sidecar verify` with args (after "verify") and environ, the
// process environment that main hands over; it returns the exit status
// (0 whole, 1 violations, 2 bad usage, 3 the cluster could not be read,
// 130 interrupted). ctx is the signal context: when it ends, Run prints
// what was checked so far and returns 130. Output goes to stdout, usage
// errors and progress to stderr.
func Run(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) int {
	e, o, err := parseVerify(args, environ, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "sidecar verify:", err)
		return 2
	}
	v, err := newVerifier(e, o, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sidecar verify:", err)
		var ue *usageError
		if errors.As(err, &ue) {
			return 2
		}
		return exitCannotCheck
	}
	defer v.close()
	return v.run(ctx)
}

// usageError is a request the cluster cannot answer as asked (an unknown
// topic or partition): exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// parseVerify reads the flags and the environment. flag.ErrHelp means
// --help was asked for and printed.
func parseVerify(args []string, environ map[string]string, stdout io.Writer) (config.VerifyEnv, verifyOpts, error) {
	var o verifyOpts
	fs := flag.NewFlagSet("sidecar verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.topic, "topic", "", "aligned topic to check (default PHASEGATE_OUTPUT_TOPIC)")
	fs.StringVar(&o.group, "group", "", "start each partition at this consumer group's committed offset (the join's group)")
	from := fs.String("from", "", "start at the first record at or after this time (RFC 3339, e.g. 2026-12-02T10:00:00Z)")
	to := fs.String("to", "", "stop before the first record at or after this time (RFC 3339)")
	fromOff := fs.String("from-offset", "", "start offsets: N for every partition, or P:N,P:N")
	toOff := fs.String("to-offset", "", "end offsets (exclusive): N for every partition, or P:N,P:N")
	inputs := fs.String("inputs", "", "fork topics, comma separated, or 'env' for PHASEGATE_INPUT_TOPICS: also account for every input record of the checked phases")
	fs.StringVar(&o.quarantine, "quarantine", "", "quarantine topic for --inputs (default PHASEGATE_QUARANTINE_TOPIC, else <topic>.quarantine)")
	fs.BoolVar(&o.json, "json", false, "print JSON lines (one object per violation and per phase, then a summary) instead of text")
	fs.DurationVar(&o.progress, "progress", 2*time.Second, "progress line on stderr every this long; 0 = none")
	fs.IntVar(&o.maxOpen, "max-open-phases", 4096, "bound on phases held open while partitions run ahead of each other (memory); partitions ahead are paused beyond it")
	help := func() {
		fmt.Fprint(stdout, verifyUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help()
			return config.VerifyEnv{}, o, err
		}
		return config.VerifyEnv{}, o, fmt.Errorf("%v (see sidecar verify --help)", err)
	}
	if fs.NArg() > 0 {
		return config.VerifyEnv{}, o, fmt.Errorf("unexpected argument %q (see sidecar verify --help)", fs.Arg(0))
	}
	e, err := config.LoadVerify(environ)
	if err != nil {
		return e, o, err
	}
	if o.topic == "" {
		o.topic = e.OutputTopic
	}
	if o.topic == "" {
		return e, o, errors.New("no topic: give --topic or set PHASEGATE_OUTPUT_TOPIC")
	}
	if o.quarantine == "" {
		o.quarantine = e.QuarantineTopic
	}
	if o.quarantine == "" {
		o.quarantine = o.topic + ".quarantine"
	}
	o.phaseLength = e.PhaseLength
	if o.phaseLength < time.Millisecond {
		return e, o, config.BadVar("PHASE_LENGTH", e.PhaseLength.String(), "at least 1ms")
	}
	switch *inputs {
	case "":
	case "env":
		if len(e.InputTopics) == 0 {
			return e, o, errors.New("--inputs=env but PHASEGATE_INPUT_TOPICS is not set")
		}
		o.inputs = e.InputTopics
	default:
		o.inputs = strings.Split(*inputs, ",")
	}
	for _, s := range []struct {
		name, in string
		out      *time.Time
	}{{"--from", *from, &o.from}, {"--to", *to, &o.to}} {
		if s.in == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s.in)
		if err != nil {
			return e, o, fmt.Errorf("%s=%q: not an RFC 3339 time such as 2026-12-02T10:00:00Z", s.name, s.in)
		}
		*s.out = t
	}
	if o.fromOff, err = parseOffsetSpec("--from-offset", *fromOff); err != nil {
		return e, o, err
	}
	if o.toOff, err = parseOffsetSpec("--to-offset", *toOff); err != nil {
		return e, o, err
	}
	starts := 0
	for _, set := range []bool{!o.from.IsZero(), o.fromOff.set(), o.group != ""} {
		if set {
			starts++
		}
	}
	switch {
	case starts > 1:
		return e, o, errors.New("--from, --from-offset and --group each give the start: use one")
	case !o.to.IsZero() && o.toOff.set():
		return e, o, errors.New("--to and --to-offset each give the end: use one")
	case !o.from.IsZero() && !o.to.IsZero() && !o.to.After(o.from):
		return e, o, fmt.Errorf("--to=%s is not after --from=%s", *to, *from)
	case o.maxOpen < 1:
		return e, o, fmt.Errorf("--max-open-phases=%d: at least 1", o.maxOpen)
	case o.progress < 0:
		return e, o, fmt.Errorf("--progress=%s: 0 or more", o.progress)
	}
	return e, o, nil
}

// offsetSpec is --from-offset or --to-offset: one offset for every
// partition (all >= 0), or one per named partition.
type offsetSpec struct {
	all   int64 // -1: not given for every partition
	parts map[int32]int64
}

func (s offsetSpec) set() bool { return s.all >= 0 || len(s.parts) > 0 }

// of returns the offset given for partition p.
func (s offsetSpec) of(p int32) (int64, bool) {
	if s.all >= 0 {
		return s.all, true
	}
	o, ok := s.parts[p]
	return o, ok
}

func parseOffsetSpec(name, s string) (offsetSpec, error) {
	spec := offsetSpec{all: -1}
	if s == "" {
		return spec, nil
	}
	bad := fmt.Errorf("%s=%q: give N (every partition) or P:N,P:N with N >= 0", name, s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return spec, bad
		}
		spec.all = n
		return spec, nil
	}
	spec.parts = map[int32]int64{}
	for _, kv := range strings.Split(s, ",") {
		ps, ns, ok := strings.Cut(kv, ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		n, err2 := strconv.ParseInt(ns, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || n < 0 {
			return spec, bad
		}
		spec.parts[int32(p)] = n
	}
	return spec, nil
}
