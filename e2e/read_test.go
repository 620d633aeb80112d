//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/internal/verify"
	"github.com/phasegate/phasegate/markers"
)

// readQuiet ends a read once no record arrived for this long; the sidecar
// is stopped by then, so nothing new is on its way. A partition that holds
// offsets but gave no record yet extends the read, up to readQuietMax in
// all: on a loaded machine a client reading 256 partitions went quiet for
// 2 s before it had fetched partition 0 (P1, read_uncommitted).
const (
	readQuiet    = 2 * time.Second
	readQuietMax = 5
)

// readAll reads every partition of topic from the start with franz-go,
// read_committed or read_uncommitted, and returns the records of each
// partition in offset order.
func readAll(ctx context.Context, brokers []string, topic string, committed bool) ([][]*kgo.Record, error) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := td.Error(); err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([][]*kgo.Record, len(td[topic].Partitions))
	unread := func() bool { // a partition with offsets has given no record
		missing := false
		ends.Each(func(o kadm.ListedOffset) {
			missing = missing || o.Offset > 0 && int(o.Partition) < len(out) && len(out[o.Partition]) == 0
		})
		return missing
	}
	quiet := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, readQuiet)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				return nil, fmt.Errorf("read %s/%d: %w", e.Topic, e.Partition, e.Err)
			}
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			out[r.Partition] = append(out[r.Partition], r)
		})
		if n > 0 {
			quiet = 0
			continue
		}
		if quiet++; !unread() || quiet >= readQuietMax {
			return out, nil
		}
	}
}

// toMarkers converts records for the verifier.
func toMarkers(parts [][]*kgo.Record) [][]markers.Record {
	out := make([][]markers.Record, len(parts))
	for p, recs := range parts {
		out[p] = make([]markers.Record, len(recs))
		for i, r := range recs {
			hs := make([]markers.Header, len(r.Headers))
			for j, h := range r.Headers {
				hs[j] = markers.Header{Key: []byte(h.Key), Value: h.Value}
			}
			out[p][i] = markers.Record{Key: r.Key, Value: r.Value, Headers: hs, Offset: r.Offset}
		}
	}
	return out
}

func flatten[T any](parts [][]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// input is one record read back from a fork topic.
type input struct {
	verify.Input
	expect expectation
	rec    *kgo.Record
}

// toInputs turns what the fork topics hold into the verifier's input log.
// A record's phase is its phasegate.phase header when that parses, else
// the phase of its timestamp (MARKERS.md section 1); a malformed header
// leaves phase 0, which no published record has.
func toInputs(parts [][]*kgo.Record) []input {
	var out []input
	for _, recs := range parts {
		for _, r := range recs {
			in := input{rec: r, expect: expectationOf(r.Value)}
			in.Source = string(markers.AppendSource(nil, r.Topic, r.Partition, r.Offset))
			in.ID = in.Source
			in.Phase = phaseOf(r.Timestamp)
			for _, h := range r.Headers {
				switch h.Key {
				case markers.HeaderID:
					in.ID = string(h.Value)
				case markers.HeaderPhase:
					ph, err := strconv.ParseUint(string(h.Value), 10, 64)
					if err != nil || len(h.Value) == 0 || h.Value[0] < '0' || h.Value[0] > '9' {
						ph = 0
					}
					in.Phase = ph
				case markers.HeaderMarker:
					in.Marker = true
				}
			}
			out = append(out, in)
		}
	}
	return out
}

// expectationOf reads "expect=<x>" from a record value of the workload.
func expectationOf(v []byte) expectation {
	_, rest, ok := bytes.Cut(v, []byte("expect="))
	if !ok {
		// A hand-written input marker carries it as a JSON field.
		if _, rest, ok = bytes.Cut(v, []byte(`"expect":"`)); !ok {
			return ""
		}
	}
	if i := bytes.IndexAny(rest, " \",}"); i >= 0 {
		rest = rest[:i]
	}
	return expectation(rest)
}

func verifyInputs(ins []input) []verify.Input {
	out := make([]verify.Input, len(ins))
	for i, in := range ins {
		out[i] = in.Input
	}
	return out
}

// position is a record's place in a topic.
type position struct {
	partition int32
	offset    int64
}

// compareIsolation checks that every record of the read_committed view is in
// the read_uncommitted view at the same offset with the same value and
// headers, and returns how many records only the read_uncommitted view
// holds: records of aborted transactions.
func compareIsolation(committed, uncommitted [][]*kgo.Record) (aborted int, err error) {
	all := map[position]*kgo.Record{}
	n := 0
	for _, recs := range uncommitted {
		for _, r := range recs {
			all[position{r.Partition, r.Offset}] = r
			n++
		}
	}
	var errs []error
	c := 0
	for _, recs := range committed {
		for _, r := range recs {
			c++
			u := all[position{r.Partition, r.Offset}]
			switch {
			case u == nil:
				errs = append(errs, fmt.Errorf("%s/%d/%d is read_committed but not in the read_uncommitted view", r.Topic, r.Partition, r.Offset))
			case !bytes.Equal(u.Value, r.Value) || len(u.Headers) != len(r.Headers):
				errs = append(errs, fmt.Errorf("%s/%d/%d differs between read_committed and read_uncommitted", r.Topic, r.Partition, r.Offset))
			}
			if len(errs) > 20 {
				return n - c, errors.Join(errs...)
			}
		}
	}
	return n - c, errors.Join(errs...)
}

// javaRead is what Kafka's ConsoleConsumer printed for a topic.
type javaRead struct {
	positions map[position]bool // every record, marker or data
	markers   int
	processed int // its own "Processed a total of N messages"
}

// consoleConsumer reads topic with Kafka's Java ConsoleConsumer,
// --isolation-level read_committed, until it has been idle for 8 s (or
// the --timeout-ms among extra); extra arguments go to the tool (e.g.
// --consumer.config for SASL_SSL).
func consoleConsumer(ctx context.Context, brokers []string, topic string, extra ...string) (*javaRead, error) {
	args := []string{"tool", "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", strings.Join(brokers, ","), "--topic", topic, "--from-beginning",
		"--isolation-level", "read_committed",
		"--property", "print.headers=true", "--property", "print.partition=true",
		"--property", "print.offset=true", "--property", "print.value=false"}
	if !slices.Contains(extra, "--timeout-ms") { // the tool refuses an option given twice
		args = append(args, "--timeout-ms", "8000")
	}
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, suite.script, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ConsoleConsumer: %w\n%s", err, tail(stderr.String(), 20))
	}
	return parseConsole(out, stderr.String())
}

// parseConsole reads ConsoleConsumer's "Partition:P\tOffset:O\theaders"
// lines and its "Processed a total of N messages" (the format
// consoleConsumer asks for).
func parseConsole(out []byte, stderr string) (*javaRead, error) {
	jr := &javaRead{positions: map[position]bool{}, processed: -1}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Partition:") {
			continue
		}
		var pos position
		var headers string
		for _, f := range strings.Split(line, "\t") {
			var err error
			switch {
			case strings.HasPrefix(f, "Partition:"):
				var p int64
				p, err = strconv.ParseInt(strings.TrimPrefix(f, "Partition:"), 10, 32)
				pos.partition = int32(p)
			case strings.HasPrefix(f, "Offset:"):
				pos.offset, err = strconv.ParseInt(strings.TrimPrefix(f, "Offset:"), 10, 64)
			default:
				headers = f
			}
			if err != nil {
				return nil, fmt.Errorf("ConsoleConsumer line %q: %w", line, err)
			}
		}
		if jr.positions[pos] {
			return nil, fmt.Errorf("ConsoleConsumer printed %d/%d twice", pos.partition, pos.offset)
		}
		jr.positions[pos] = true
		if strings.Contains(","+headers+",", ","+markers.HeaderMarker+":1,") {
			jr.markers++
		}
	}
	for _, l := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "Processed a total of "); ok {
			jr.processed, _ = strconv.Atoi(strings.Fields(rest)[0])
		}
	}
	return jr, sc.Err()
}

// compareJava checks that the ConsoleConsumer saw exactly the records and
// markers franz-go read with read_committed.
func compareJava(jr *javaRead, committed [][]*kgo.Record) error {
	var errs []error
	n, mk := 0, 0
	for _, recs := range committed {
		for _, r := range recs {
			n++
			if !jr.positions[position{r.Partition, r.Offset}] {
				errs = append(errs, fmt.Errorf("franz-go read %d/%d, the ConsoleConsumer did not", r.Partition, r.Offset))
			}
			for _, h := range r.Headers {
				if h.Key == markers.HeaderMarker && string(h.Value) == "1" {
					mk++
				}
			}
			if len(errs) > 20 {
				return errors.Join(errs...)
			}
		}
	}
	if len(jr.positions) != n || jr.markers != mk || jr.processed != n {
		errs = append(errs, fmt.Errorf("ConsoleConsumer: %d records (it says %d), %d markers; franz-go: %d records, %d markers",
			len(jr.positions), jr.processed, jr.markers, n, mk))
	}
	return errors.Join(errs...)
}
