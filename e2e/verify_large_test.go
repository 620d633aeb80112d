//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/internal/kafkatest"
	"github.com/phasegate/phasegate/markers"
)

// largeRecords is the size of TestVerifyLarge's topic:
// PHASEGATE_E2E_VERIFY_RECORDS (1000000 for the figures in the README),
// else 60,000 so that every run of the suite reads a topic of many
// transactions and phases.
func largeRecords() int {
	if n, err := strconv.Atoi(os.Getenv("PHASEGATE_E2E_VERIFY_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 60_000
}

// TestVerifyLarge writes an aligned topic the way phasegate does (per
// phase, per partition: data then marker, one transaction per 10 phases),
// then runs the built `sidecar verify` on it: it must exit 0 having read
// every record, and the test logs its speed and peak RSS.
func TestVerifyLarge(t *testing.T) {
	b := needBroker(t)
	topic := fmt.Sprintf("verify-large-%d", time.Now().UnixNano()%1_000_000_000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	written, markersWritten := writeAligned(t, ctx, b.addrs, topic, largeRecords())

	cmd := exec.CommandContext(ctx, suite.bin, "verify", "--topic", topic, "--progress=5s")
	cmd.Env = append(os.Environ(), "PHASEGATE_BROKERS="+strings.Join(b.addrs, ","))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var last string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		last = sc.Text() // the table is long: keep the verdict only
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sidecar verify: %v\n%s\n%s", err, last, tail(stderr.String(), 30))
	}
	want := fmt.Sprintf("%d records read (%d data, %d markers)", written+markersWritten, written, markersWritten)
	if !strings.Contains(last, want) || !strings.HasSuffix(last, "0 violations: WHOLE") {
		t.Fatalf("verdict %q, want %q and WHOLE", last, want)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var rss int64
	if ru != nil {
		rss = ru.Maxrss // KiB on Linux
	}
	t.Logf("sidecar verify: %s\npeak RSS %d KiB", last, rss)
}

// writeAligned writes n data records to a new 3-partition topic the way
// phasegate does: per phase (3,000 records) and partition, data then a
// marker with the right count and sources (orders and payments), ten
// phases per transaction; it returns the data records and markers
// written.
func writeAligned(t *testing.T, ctx context.Context, brokers []string, topic string, n int) (written, markersWritten int) {
	t.Helper()
	const parts, perPhase, phasesPerTxn = 3, 3000, 10
	if err := kafkatest.CreateTopics(brokers, map[string]int32{topic: parts}); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(topic+"-writer"), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(200_000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	t0 := time.Now()
	pad := strings.Repeat("x", 80)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	phase := uint64(1)
	for written < n {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for range phasesPerTxn {
			if written >= n {
				break
			}
			counts := make([]map[string]int64, parts)
			for p := range counts {
				counts[p] = map[string]int64{}
			}
			for i := 0; i < perPhase && written < n; i++ {
				p := int32(written % parts)
				src := "orders"
				if written%5 >= 3 {
					src = "payments"
				}
				id := markers.AppendSource(nil, src, p, int64(written))
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: id, Value: []byte(pad),
					Timestamp: base.Add(time.Duration(phase)*time.Second + time.Duration(i)*time.Millisecond/4),
					Headers: []kgo.RecordHeader{{Key: markers.HeaderPhase, Value: markers.AppendPhase(nil, phase)},
						{Key: markers.HeaderID, Value: id}, {Key: markers.HeaderSource, Value: id}}})
				counts[p][src]++
				written++
			}
			for p := range int32(parts) {
				var count int64
				for _, c := range counts[p] {
					count += c
				}
				m := markers.Marker{Phase: phase, Partition: p, Count: count, Sources: counts[p], WatermarkMs: base.UnixMilli(),
					SealedBy: markers.SealedByWatermark, Emitter: "large"}
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: m.AppendOutput(nil),
					Headers: []kgo.RecordHeader{{Key: markers.HeaderMarker, Value: []byte("1")}, {Key: markers.HeaderPhase, Value: markers.AppendPhase(nil, phase)}}})
				markersWritten++
			}
			phase++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d data records and %d markers in %d phases in %s", written, markersWritten, phase-1, time.Since(t0).Round(time.Millisecond))
	waitStable(t, ctx, cl, topic)
	return written, markersWritten

}

// TestVerifyInterrupt: Ctrl-C in the middle of a long read prints what was
// checked so far and exits 130, at once. The broker throttles the
// command's client ID (a consumer byte-rate quota), so the read is long on
// any machine.
func TestVerifyInterrupt(t *testing.T) {
	b := needBroker(t)
	topic := fmt.Sprintf("verify-int-%d", time.Now().UnixNano()%1_000_000_000)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The quota first: the broker applies it a moment after the controller
	// took it, and writing the topic gives it that moment (set after the
	// write, it once came too late and the whole topic was read in 121 ms).
	clientID := topic + "-slow"
	setQuota(t, ctx, b.addrs, clientID, 20_000)
	written, markersWritten := writeAligned(t, ctx, b.addrs, topic, 30_000)

	cmd := exec.CommandContext(ctx, suite.bin, "verify", "--topic", topic, "--progress=50ms")
	cmd.Env = append(os.Environ(), "PHASEGATE_BROKERS="+strings.Join(b.addrs, ","), "PHASEGATE_CLIENT_ID="+clientID)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var progress string
	for sc.Scan() {
		// "sidecar verify: <topic>: N of M offsets read ..." with N > 0
		if f := strings.Fields(strings.TrimPrefix(sc.Text(), "sidecar verify: "+topic+": ")); len(f) > 3 && f[1] == "of" && f[0] != "0" {
			progress = sc.Text()
			break
		}
	}
	if progress == "" {
		t.Fatalf("no progress line with records read; stdout:\n%s", stdout.String())
	}
	at := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	_ = cmd.Wait()
	took := time.Since(at)
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d after SIGINT, want 130:\n%s", code, stdout.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "interrupted: ") || !strings.HasSuffix(last, "0 violations: INTERRUPTED (whole so far)") ||
		strings.Contains(last, fmt.Sprintf("%d records read", written+markersWritten)) {
		t.Fatalf("last line %q: want a partial read, interrupted, whole so far", last)
	}
	if took > 5*time.Second {
		t.Fatalf("exited %s after SIGINT; a fetch in flight must not hold it", took)
	}
	t.Logf("after %q, SIGINT; exit 130 %s later:\n%s", progress, took.Round(time.Millisecond), last)
}

// setQuota limits what the broker lets clientID fetch, in bytes per
// second, until the test ends.
func setQuota(t *testing.T, ctx context.Context, brokers []string, clientID string, bytesPerSecond float64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	alter := func(ctx context.Context, remove bool) error {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &clientID}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: bytesPerSecond, Remove: remove}},
		}})
		if err == nil {
			for _, r := range res {
				err = errors.Join(err, r.Err)
			}
		}
		return err
	}
	if err := alter(ctx, false); err != nil {
		cl.Close()
		t.Fatalf("set the quota of %s: %v", clientID, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := alter(ctx, true); err != nil {
			t.Errorf("remove the quota of %s: %v", clientID, err)
		}
		cl.Close()
	})
}
