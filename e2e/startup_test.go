//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A transaction timeout the sidecar's own bounds allow but the broker's
// transaction.max.timeout.ms (Kafka's default: 15 min) does not: the
// sidecar asks a broker at start (DescribeConfigs) and exits 2 with one
// ERROR line holding both numbers, before it creates or consumes anything.
// Without the check, InitProducerId would fail later with
// INVALID_TRANSACTION_TIMEOUT, an exit 1 that names no variable.
func TestTransactionTimeoutAboveBrokerMax(t *testing.T) {
	b := needBroker(t)
	dir := filepath.Join(suite.work, "startup-txn-timeout")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PHASEGATE_BROKERS=" + strings.Join(b.addrs, ","),
		"PHASEGATE_INPUT_TOPICS=txn-timeout-orders", "PHASEGATE_OUTPUT_TOPIC=txn-timeout-out",
		"PHASEGATE_TRANSACTION_TIMEOUT=20m", "PHASEGATE_SESSION_TIMEOUT=25m",
		"PHASEGATE_LOG_FORMAT=json",
	}
	t0 := time.Now()
	in, err := startInstance(1, dir, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !in.exited() {
			_ = in.signal(syscall.SIGKILL)
			in.wait(10 * time.Second)
		}
	})
	if !in.wait(time.Minute) {
		t.Fatalf("still running 1 min after start:\n%s", in.excerpt(20))
	}
	lines, err := in.lines()
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, l := range lines {
		if l.Level == "ERROR" {
			errs = append(errs, l.Msg)
		}
	}
	code := in.state.ExitCode()
	want := regexp.MustCompile(`^PHASEGATE_TRANSACTION_TIMEOUT="20m": 1200000 ms is above the brokers' transaction\.max\.timeout\.ms=(\d+) \((.+), broker (\d+)\): lower it, or raise transaction\.max\.timeout\.ms on every broker$`)
	if code != 2 || len(errs) != 1 || !want.MatchString(errs[0]) {
		raw, _ := os.ReadFile(in.log)
		t.Fatalf("exit %d with ERROR lines %q; want exit 2 and one line matching %s\n%s", code, errs, want, tail(string(raw), 20))
	}
	m := want.FindStringSubmatch(errs[0])
	fmt.Printf("startup: transaction timeout 20m against transaction.max.timeout.ms=%s: exit %d after %s: %s\n",
		m[1], code, in.exitAt.Sub(t0).Round(time.Millisecond), errs[0])
}
