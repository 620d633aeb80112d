//go:build e2e

package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/internal/verify"
	"github.com/phasegate/phasegate/markers"
)

// verdict is what the final check found.
type verdict struct {
	in, out, quarantined int
	reasons              map[markers.Reason]int
	violations           int // torn phases, duplicates, lost records, open transactions, verify's findings
	phases               int
}

// check reads the inputs, the output and the quarantine back with
// independent clients (the sidecars must be stopped) and checks
// exactly-once: every input in the output or the quarantine exactly once
// (internal/verify.Account), every phase whole on every partition
// (verify.CheckOutput, MARKERS.md 3.2), the same by `sidecar verify
// --inputs=env`, and no open transaction of the sidecars. Each violation is
// a test error.
func (r *run) check(ctx context.Context) verdict {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	addrs := r.c.hostAddrs()
	var v verdict
	var inputs []verify.Input
	for _, topic := range r.forks {
		parts, err := readTopic(ctx, addrs, topic, false)
		if err != nil {
			t.Fatalf("read %s: %v", topic, err)
		}
		for _, recs := range parts {
			for _, rec := range recs {
				src := string(markers.AppendSource(nil, rec.Topic, rec.Partition, rec.Offset))
				inputs = append(inputs, verify.Input{Source: src, ID: src,
					Phase: uint64(rec.Timestamp.UnixMilli() / phaseLen.Milliseconds())})
			}
		}
	}
	if int64(len(inputs)) != r.prod.sent.Load() {
		t.Errorf("the fork topics hold %d records, the producer had %d acknowledged", len(inputs), r.prod.sent.Load())
		v.violations++
	}
	outParts, err := readTopic(ctx, addrs, r.out, true)
	if err != nil {
		t.Fatalf("read %s: %v", r.out, err)
	}
	quarParts, err := readTopic(ctx, addrs, r.quarantine, true)
	if err != nil {
		t.Fatalf("read %s: %v", r.quarantine, err)
	}
	out := verify.CheckOutput(toMarkers(outParts))
	acc := verify.Account(inputs, out, flatten(toMarkers(quarParts)))
	if err := out.Err(); err != nil {
		t.Errorf("output breaks MARKERS.md 3.2 (torn phase or duplicate):\n%s", shown(err))
		v.violations += len(out.Violations)
	}
	if err := acc.Err(); err != nil {
		t.Errorf("input accounting (lost or duplicated records):\n%s", shown(err))
		v.violations += len(acc.Violations)
	}
	v.in, v.out, v.quarantined, v.reasons, v.phases = acc.In, acc.Out, acc.Quarantined, acc.Reasons, len(out.Phases)
	v.violations += r.checkVerifyCommand(ctx, out, acc)
	v.violations += r.checkTransactions(ctx)
	return v
}

// checkVerifyCommand runs the built `sidecar verify --inputs=env` with the
// sidecars' settings from the host: it must exit 0 and agree on the counts.
func (r *run) checkVerifyCommand(ctx context.Context, out *verify.Output, acc *verify.Accounting) int {
	cmd := exec.CommandContext(ctx, suite.bin, "verify", "--progress=0", "--inputs=env")
	cmd.Env = append(hostEnv(),
		"PHASEGATE_BROKERS="+strings.Join(r.c.hostAddrs(), ","),
		"PHASEGATE_INPUT_TOPICS="+strings.Join(r.forks, ","),
		"PHASEGATE_OUTPUT_TOPIC="+r.out,
		"PHASEGATE_QUARANTINE_TOPIC="+r.quarantine)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	want := fmt.Sprintf("(%d data, %d markers)", out.Data, out.Markers)
	switch {
	case err != nil:
		r.t.Errorf("sidecar verify: %v\n%s\n%s", err, tailLines(stdout.String(), 30), tailLines(stderr.String(), 10))
		return 1
	case !strings.Contains(last, want) || !strings.HasSuffix(last, "0 violations: WHOLE") || !strings.Contains(stdout.String(), fmt.Sprintf(" out=%d ", acc.Out)):
		r.t.Errorf("sidecar verify disagrees with the in-test verifier (want %s, out=%d, WHOLE):\n%s", want, acc.Out, tailLines(stdout.String(), 30))
		return 1
	}
	r.t.Logf("sidecar verify: %s", last)
	return 0
}

// checkTransactions counts the sidecars' transactions left open.
func (r *run) checkTransactions(ctx context.Context) int {
	d, err := r.c.adm.DescribeTransactions(ctx, r.txnIDs()...)
	if err != nil {
		r.t.Errorf("describe transactions: %v", err)
		return 1
	}
	open := 0
	for _, id := range r.txnIDs() {
		tx, ok := d[id]
		switch {
		case !ok || tx.Err != nil:
			r.t.Errorf("describe transaction %s: %v", id, tx.Err)
			open++
		case tx.State == "Ongoing" || strings.HasPrefix(tx.State, "Prepare"):
			r.t.Errorf("transaction %s left open: %s since %s", id, tx.State, time.UnixMilli(tx.StartTimestamp).Format(time.RFC3339Nano))
			open++
		}
	}
	return open
}

// readTopic reads every partition of topic from the start until no record
// arrived for two seconds (every record of a finished run: nothing is
// being written any more).
func readTopic(ctx context.Context, addrs []string, topic string, committed bool) ([][]*kgo.Record, error) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return nil, err
	}
	out := make([][]*kgo.Record, len(td[topic].Partitions))
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", topic, err)
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				return nil, fmt.Errorf("read %s/%d: %w", e.Topic, e.Partition, e.Err)
			}
		}
		n := 0
		fs.EachRecord(func(rec *kgo.Record) {
			n++
			out[rec.Partition] = append(out[rec.Partition], rec)
		})
		if n == 0 {
			return out, nil
		}
	}
}

func toMarkers(parts [][]*kgo.Record) [][]markers.Record {
	out := make([][]markers.Record, len(parts))
	for p, recs := range parts {
		for _, r := range recs {
			hs := make([]markers.Header, len(r.Headers))
			for i, h := range r.Headers {
				hs[i] = markers.Header{Key: []byte(h.Key), Value: h.Value}
			}
			out[p] = append(out[p], markers.Record{Key: r.Key, Value: r.Value, Headers: hs, Offset: r.Offset})
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

// shown is err's first 25 lines and how many more there were.
func shown(err error) string {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) <= 25 {
		return err.Error()
	}
	return strings.Join(lines[:25], "\n") + fmt.Sprintf("\n... and %d more", len(lines)-25)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
