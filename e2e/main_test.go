//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// suite is what TestMain prepares for every scenario: a broker and the
// sidecar binary. It is written once, before m.Run, and only read after.
var suite struct {
	broker *broker
	// noBroker says why there is no broker; the scenarios skip with it
	// (TestMain fails the run instead when CI=true).
	noBroker error
	bin      string // the built sidecar
	root     string // the module root
	script   string // e2e/kafka/kafka.sh: starts brokers, runs Kafka's Java tools
	work     string // logs and broker state; kept when a test failed
}

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	t0 := time.Now()
	ci := os.Getenv("CI") == "true"
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	suite.root = root
	suite.script = filepath.Join(root, "e2e", "kafka", "kafka.sh")
	suite.work, err = os.MkdirTemp("", "phasegate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if suite.bin, err = buildSidecar(root, suite.work); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build the sidecar:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	suite.broker, err = obtainBroker(ctx, suite.work)
	cancel()
	switch {
	case err != nil && ci:
		fmt.Fprintf(os.Stderr, "e2e: FAIL: no Kafka broker, and CI=true makes that a failure, not a skip: %v\n(state kept in %s)\n", err, suite.work)
		return 1
	case err != nil:
		suite.noBroker = err
		fmt.Fprintf(os.Stderr, "e2e: no Kafka broker; every scenario will skip: %v\n", err)
	default:
		fmt.Printf("e2e: broker %s from %s\n", strings.Join(suite.broker.addrs, ","), suite.broker.source)
	}
	code := m.Run()
	if suite.broker != nil {
		if err := suite.broker.close(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stop the broker:", err)
			code = max(code, 1)
		}
	}
	if code == 0 && os.Getenv("PHASEGATE_E2E_KEEP") == "" {
		_ = os.RemoveAll(suite.work)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: logs and broker state kept in %s\n", suite.work)
	}
	fmt.Printf("e2e: suite finished in %s\n", time.Since(t0).Round(time.Second))
	return code
}

// buildSidecar builds ./cmd/sidecar into dir, with the race detector when
// PHASEGATE_E2E_RACE=1. PHASEGATE_E2E_SIDECAR names a binary to test
// instead (a release build, or a candidate fix).
func buildSidecar(root, dir string) (string, error) {
	if bin := os.Getenv("PHASEGATE_E2E_SIDECAR"); bin != "" {
		fmt.Printf("e2e: testing the sidecar binary %s (PHASEGATE_E2E_SIDECAR)\n", bin)
		return filepath.Abs(bin)
	}
	bin := filepath.Join(dir, "sidecar")
	args := []string{"build", "-o", bin}
	if os.Getenv("PHASEGATE_E2E_RACE") == "1" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/sidecar")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return bin, nil
}

// needBroker skips (or, with CI=true, fails: TestMain already stopped the
// run) a test when there is no broker.
func needBroker(t *testing.T) *broker {
	t.Helper()
	if suite.broker == nil {
		t.Skipf("no Kafka broker (set PHASEGATE_E2E_BROKERS, run a Docker engine, or install Java 17 and Maven for e2e/kafka/kafka.sh): %v", suite.noBroker)
	}
	return suite.broker
}

// broker is the Kafka cluster the suite runs against.
type broker struct {
	addrs  []string
	source string
	// dir is the state directory of a broker started by kafka.sh; only such
	// a broker can be killed and restarted by the suite.
	dir       string
	terminate func() error
}

// errNoDocker means no Docker engine answered: the next source is tried.
var errNoDocker = errors.New("e2e: no healthy Docker engine")

// obtainBroker takes the broker from PHASEGATE_E2E_BROKERS, else from
// testcontainers, else from kafka.sh.
func obtainBroker(ctx context.Context, work string) (*broker, error) {
	if s := os.Getenv("PHASEGATE_E2E_BROKERS"); s != "" {
		return &broker{addrs: strings.Split(s, ","), source: "PHASEGATE_E2E_BROKERS", terminate: func() error { return nil }}, nil
	}
	b, err := containerBroker(ctx)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, errNoDocker) {
		fmt.Fprintf(os.Stderr, "e2e: Docker answers but the apache/kafka container failed (%v); trying kafka.sh\n", err)
	}
	return scriptBroker(ctx, filepath.Join(work, "kafka"))
}

// scriptBroker starts a fresh broker with kafka.sh in dir.
func scriptBroker(ctx context.Context, dir string) (*broker, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := kafkaScript(ctx, "start", dir)
	if err != nil {
		return nil, err
	}
	b := &broker{addrs: []string{addr}, source: "e2e/kafka/kafka.sh (" + dir + ")", dir: dir}
	b.terminate = func() error {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := kafkaScript(sctx, "stop", dir)
		return err
	}
	return b, nil
}

// kafkaScript runs kafka.sh and returns the last line of its stdout (the
// bootstrap address for start and restart). Its progress goes to stderr.
func kafkaScript(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, suite.script, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kafka.sh %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String(), 20))
	}
	last := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last, nil
}

// canRestart reports whether the suite controls the broker's process.
func (b *broker) canRestart() bool { return b.dir != "" }

// kill sends SIGKILL to the broker (kafka.sh kill).
func (b *broker) kill(ctx context.Context) error {
	_, err := kafkaScript(ctx, "kill", b.dir)
	return err
}

// restart starts the broker again on the same ports and data.
func (b *broker) restart(ctx context.Context) error {
	addr, err := kafkaScript(ctx, "restart", b.dir)
	if err == nil && addr != b.addrs[0] {
		err = fmt.Errorf("kafka.sh restart came back on %s, not %s", addr, b.addrs[0])
	}
	return err
}

func (b *broker) close() error { return b.terminate() }

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
