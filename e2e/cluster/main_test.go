//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
)

// Images: built by images/build.sh (`make images`); nothing is pulled.
var (
	kafkaImage   = envOr("PHASEGATE_E2E_KAFKA_IMAGE", "phasegate-local/kafka:4.1.2")
	runtimeImage = envOr("PHASEGATE_E2E_RUNTIME_IMAGE", "phasegate-local/static:nonroot")
)

// suite is prepared once by TestMain and only read afterwards.
var suite struct {
	root string // the module root
	bin  string // the sidecar, built static for the scratch runtime image
	work string // logs; kept when a test failed
	// noDocker says why the scenarios cannot run (they skip, or with
	// CI=true TestMain fails the run).
	noDocker error
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	// e2e/run.sh's `go test ./e2e/...` reaches this package too; its
	// scenarios belong to scripts/containers.sh (make containers, make
	// nemesis), which builds the images first and runs them once.
	if os.Getenv("PHASEGATE_CLUSTER") != "1" {
		fmt.Println("cluster: not run here: scripts/containers.sh runs this package (PHASEGATE_CLUSTER=1)")
		return 0
	}
	// The Ryuk reaper needs an image no registry here can provide; every
	// container and network is removed by the test that made it instead.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	ci := os.Getenv("CI") == "true"
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	suite.root = root
	if suite.work, err = os.MkdirTemp("", "phasegate-cluster-"); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	suite.noDocker = dockerReady()
	if suite.noDocker != nil && ci {
		fmt.Fprintf(os.Stderr, "cluster: FAIL: %v (CI=true: a failure, not a skip)\n", suite.noDocker)
		return 1
	}
	if suite.noDocker == nil {
		if suite.bin, err = buildSidecar(root, suite.work); err != nil {
			fmt.Fprintln(os.Stderr, "cluster: build the sidecar:", err)
			return 1
		}
	}
	code := m.Run()
	if code == 0 && os.Getenv("PHASEGATE_E2E_KEEP") == "" {
		_ = os.RemoveAll(suite.work)
	} else {
		fmt.Fprintf(os.Stderr, "cluster: logs kept in %s\n", suite.work)
	}
	return code
}

// dockerReady is nil when a Docker engine answers and both images are
// present locally.
func dockerReady() error {
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("no Docker engine (run scripts/docker-engine.sh): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := provider.Health(ctx); err != nil {
		return fmt.Errorf("no healthy Docker engine (run scripts/docker-engine.sh): %w", err)
	}
	for _, img := range []string{kafkaImage, runtimeImage} {
		if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f", "{{.Id}}", img).CombinedOutput(); err != nil {
			return fmt.Errorf("image %s is not on this machine (run `make images`; nothing is pulled): %v: %s", img, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// buildSidecar builds ./cmd/sidecar statically (the runtime image has no
// libc); PHASEGATE_E2E_SIDECAR names a prebuilt static binary instead.
func buildSidecar(root, dir string) (string, error) {
	if bin := os.Getenv("PHASEGATE_E2E_SIDECAR"); bin != "" {
		return filepath.Abs(bin)
	}
	bin := filepath.Join(dir, "sidecar")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/sidecar")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return bin, nil
}

// needDocker skips a test when the scenarios cannot run (with CI=true
// TestMain has already failed the run).
func needDocker(t *testing.T) {
	t.Helper()
	if suite.noDocker != nil {
		t.Skipf("%v", suite.noDocker)
	}
}

// docker runs the Docker CLI and returns its trimmed standard output.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// runCmd runs a command and returns its combined output.
func runCmd(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// hostEnv is this process's environment without PHASEGATE_* variables (the
// tests' own, which the sidecar would warn about as unknown settings).
func hostEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PHASEGATE_") {
			out = append(out, kv)
		}
	}
	return out
}
