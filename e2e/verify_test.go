//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/internal/kafkatest"
	"github.com/phasegate/phasegate/markers"
)

// verifyRun is what one run of the built `sidecar verify` printed.
type verifyRun struct {
	code           int
	stdout, stderr string
}

// runVerifyCommand runs the built sidecar binary's verify subcommand with
// env (PHASEGATE_* settings) and args.
func runVerifyCommand(ctx context.Context, env map[string]string, args ...string) (verifyRun, error) {
	cmd := exec.CommandContext(ctx, suite.bin, append([]string{"verify", "--progress=0"}, args...)...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return verifyRun{}, err
	}
	return verifyRun{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}, nil
}

// violationLines are the lines of a text run that report a violation.
func (r verifyRun) violationLines() []string {
	var out []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "partition ") && strings.Contains(l, "; do: ") {
			out = append(out, l)
		}
	}
	return out
}

// lastLine is the run's verdict line.
func (r verifyRun) lastLine() string {
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	return lines[len(lines)-1]
}

// checkVerifyCommand runs `sidecar verify --inputs=env` on the scenario's
// output with the sidecar's own environment: phasegate's output must be
// whole for the command too, and the command must see what the in-test
// verifier saw.
func (sc *scenario) checkVerifyCommand(ctx context.Context, r *result) {
	run, err := runVerifyCommand(ctx, sc.env, "--inputs=env")
	if err != nil {
		sc.t.Errorf("sidecar verify: %v", err)
		return
	}
	last := run.lastLine()
	if run.code != 0 {
		sc.t.Errorf("sidecar verify exited %d on phasegate's output, want 0:\n%s\n%s", run.code, shown(errors.New(strings.TrimSpace(run.stdout))), tail(run.stderr, 10))
		return
	}
	wantData := fmt.Sprintf("(%d data, %d markers)", r.out.Data, r.out.Markers)
	wantOut := fmt.Sprintf(" out=%d ", r.acc.Out)
	if !strings.Contains(last, wantData) || !strings.HasSuffix(last, "0 violations: WHOLE") || !strings.Contains(run.stdout, wantOut) {
		sc.t.Errorf("sidecar verify's summary disagrees with the in-test verifier (want %q, %q and WHOLE):\n%s", wantData, wantOut, tail(run.stdout, 40))
	}
	for _, l := range strings.Split(run.stdout, "\n") {
		if strings.HasPrefix(l, "inputs ") {
			sc.t.Logf("sidecar verify: %s", l)
		}
	}
	sc.t.Logf("sidecar verify: %s", last)
}

// hand is one record of a topic written by hand: data of a phase with an
// id, or a marker of a phase with a count.
type hand struct {
	marker bool
	phase  uint64
	id     string
	count  int64
}

func hd(phase uint64, id string) hand   { return hand{phase: phase, id: id} }
func hm(phase uint64, count int64) hand { return hand{marker: true, phase: phase, count: count} }

// handTopic is a topic written by hand: per partition, records in order.
type handTopic [][]hand

// record is h as phasegate would write it to partition p.
func (h hand) record(topic string, p int32, n int) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: p, Headers: []kgo.RecordHeader{{Key: markers.HeaderPhase, Value: markers.AppendPhase(nil, h.phase)}}}
	if h.marker {
		m := markers.Marker{Phase: h.phase, Partition: p, Count: h.count, Sources: map[string]int64{"in": h.count},
			WatermarkMs: 1, SealedBy: markers.SealedByWatermark, Emitter: "hand"}
		r.Value = m.AppendOutput(nil)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: markers.HeaderMarker, Value: []byte("1")})
		return r
	}
	r.Key, r.Value = []byte(h.id), []byte("v-"+h.id)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: markers.HeaderID, Value: []byte(h.id)},
		kgo.RecordHeader{Key: markers.HeaderSource, Value: markers.AppendSource(nil, "in", p, int64(n))})
	return r
}

// write creates the topic and writes it: first an aborted transaction
// (one data record of phase 1 per partition, which read_committed must
// never show), then the records in one committed transaction. The records
// of each partition therefore start at offset 2 (0 aborted, 1 the abort
// marker).
func (h handTopic) write(t *testing.T, brokers []string, topic string) {
	t.Helper()
	if err := kafkatest.CreateTopics(brokers, map[string]int32{topic: int32(len(h))}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(topic+"-writer"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txn := func(commit kgo.TransactionEndTry, recs []*kgo.Record) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	var aborted, recs []*kgo.Record
	for p, rs := range h {
		aborted = append(aborted, hd(1, "aborted").record(topic, int32(p), 0))
		for n, r := range rs {
			recs = append(recs, r.record(topic, int32(p), n))
		}
	}
	txn(kgo.TryAbort, aborted)
	txn(kgo.TryCommit, recs)
	waitStable(t, ctx, cl, topic)
}

// waitStable waits until topic's last stable offsets reach its end
// offsets: the coordinator writes the commit markers after EndTransaction
// returns, and verify reads up to the last stable offsets at its start.
func waitStable(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) {
	t.Helper()
	adm := kadm.NewClient(cl)
	poll(t, time.Minute, "the commit markers on "+topic, func() bool {
		lso, err1 := adm.ListCommittedOffsets(ctx, topic)
		hwm, err2 := adm.ListEndOffsets(ctx, topic)
		if err1 != nil || err2 != nil || lso.Error() != nil || hwm.Error() != nil {
			return false
		}
		same := true
		hwm.Each(func(o kadm.ListedOffset) {
			l, ok := lso.Lookup(topic, o.Partition)
			same = same && ok && l.Offset == o.Offset
		})
		return same
	})
}

// TestVerifyCommand writes topics that break one rule each and runs the
// built `sidecar verify` on them: each must exit 1 with exactly the line
// of its rule; the whole topic must exit 0.
func TestVerifyCommand(t *testing.T) {
	b := needBroker(t)
	id := time.Now().UnixNano() % 1_000_000_000
	cases := []struct {
		name  string
		topic handTopic
		args  func(t *testing.T, topic string) []string // extra flags
		code  int
		want  []string // violation lines, without "; do: ..."
	}{
		{name: "whole", topic: handTopic{
			{hd(1, "a"), hm(1, 1), hd(2, "b"), hm(2, 1)},
			{hm(1, 0), hd(2, "c"), hm(2, 1)},
		}},
		{name: "torn phase", code: 1, topic: handTopic{
			{hd(1, "a"), hm(1, 1), hd(2, "b"), hd(2, "bb")},
			{hm(1, 0), hd(2, "c"), hm(2, 1)},
		}, want: []string{
			"partition 0 offset 5 phase 2 missing-marker: 2 data records of phase 2 and no marker for it (no marker before the end)",
			"partition 0 offset 7 phase 2 marker-not-on-every-partition: the phase has 1 data records on other partitions and no marker here before the end",
		}},
		{name: "data after marker", code: 1, topic: handTopic{
			{hd(1, "a"), hm(1, 1), hd(1, "late")},
			{hm(1, 0)},
		}, want: []string{"partition 0 offset 4 phase 1 data-after-marker: a data record of phase 1 after the marker for phase 1"}},
		{name: "count mismatch", code: 1, topic: handTopic{
			{hd(1, "a"), hd(1, "b"), hm(1, 3)},
			{hm(1, 0)},
		}, want: []string{"partition 0 offset 4 phase 1 count-mismatch: the marker counts 3 data records, 2 came before it"}},
		{name: "missing marker on one partition", code: 1, topic: handTopic{
			{hd(1, "a"), hm(1, 1), hd(2, "b"), hm(2, 1)},
			{hd(2, "c"), hm(2, 1)},
		}, want: []string{"partition 1 offset 3 phase 1 marker-not-on-every-partition: the phase has 1 data records on other partitions and no marker here (the next marker here is for phase 2)"}},
		{name: "duplicate id", code: 1, topic: handTopic{
			{hd(1, "a"), hd(1, "a"), hm(1, 2)},
			{hm(1, 0)},
		}, want: []string{`partition 0 offset 3 phase 1 duplicate-id: phasegate.id "a" seen twice`}},
		{name: "phase going backwards", code: 1, topic: handTopic{
			{hd(1, "a"), hm(1, 1), hd(2, "b"), hm(2, 1), hm(1, 0)},
			{hm(1, 0), hm(2, 0)},
		}, want: []string{"partition 0 offset 6 phase 1 phase-backwards: phase 1 after phase 2 (marker after the marker for phase 2)"}},
		{name: "a join group's offsets start the check after a torn phase", topic: handTopic{
			{hd(1, "a"), hm(1, 7), hd(2, "b"), hm(2, 1)}, // the count of phase 1 is wrong, but before the group's offset
			{hm(1, 0), hd(2, "c"), hm(2, 1)},
		}, args: func(t *testing.T, topic string) []string {
			group := topic + "-join"
			commitGroup(t, b.addrs, group, topic, map[int32]int64{0: 3, 1: 2})
			return []string{"--group", group}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := fmt.Sprintf("verify-%d-%d", id, i)
			c.topic.write(t, b.addrs, topic)
			var args []string
			if c.args != nil {
				args = c.args(t, topic)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			env := map[string]string{"PHASEGATE_BROKERS": strings.Join(b.addrs, ",")}
			run, err := runVerifyCommand(ctx, env, append([]string{"--topic", topic}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if run.code != c.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", run.code, c.code, run.stdout, run.stderr)
			}
			got := run.violationLines()
			for i := range got {
				got[i], _, _ = strings.Cut(got[i], "; do: ")
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("violation lines:\n got %q\nwant %q\nstdout:\n%s", got, c.want, run.stdout)
			}
			wantVerdict := "0 violations: WHOLE"
			if c.code == 1 {
				wantVerdict = fmt.Sprintf("%d violations: NOT WHOLE", len(c.want))
			}
			if !strings.HasSuffix(run.lastLine(), wantVerdict) {
				t.Fatalf("last line %q, want it to end with %q", run.lastLine(), wantVerdict)
			}
			t.Logf("exit %d:\n%s", run.code, run.stdout)

			// --json says the same, one object per line.
			jrun, err := runVerifyCommand(ctx, env, append([]string{"--topic", topic, "--json"}, args...)...)
			if err != nil || jrun.code != c.code {
				t.Fatalf("--json: exit %d (%v), want %d: %s", jrun.code, err, c.code, jrun.stderr)
			}
			var rules []string
			for _, l := range strings.Split(strings.TrimSpace(jrun.stdout), "\n") {
				var obj struct {
					Violation *struct {
						Rule string `json:"rule"`
					} `json:"violation"`
				}
				if err := json.Unmarshal([]byte(l), &obj); err != nil {
					t.Fatalf("--json line %q: %v", l, err)
				}
				if obj.Violation != nil {
					rules = append(rules, obj.Violation.Rule)
				}
			}
			if len(rules) != len(c.want) {
				t.Fatalf("--json reported rules %v, want %d violations", rules, len(c.want))
			}
		})
	}
}

// commitGroup commits offsets for group on topic, as a join would.
func commitGroup(t *testing.T, brokers []string, group, topic string, offs map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	o := kadm.Offsets{}
	for p, at := range offs {
		o.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, o)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit offsets of %s: %v", group, err)
	}
}
