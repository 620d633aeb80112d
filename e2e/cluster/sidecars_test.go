//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
)

// sidecar is one phasegate instance in a container of its own.
type sidecar struct {
	name  string // container name
	alias string // network alias, also its transactional ID's suffix
	txnID string
	c     testcontainers.Container
}

// startSidecars starts n sidecars in one group on the cluster's network,
// with env on top of the brokers' inner addresses (kafka-1 first). Docker
// restarts an instance that exits non-zero (a fenced one does), as an
// orchestrator would.
func (c *cluster) startSidecars(ctx context.Context, n int, env map[string]string) []*sidecar {
	c.t.Helper()
	var out []*sidecar
	for i := range n {
		s := &sidecar{alias: fmt.Sprintf("sidecar-%d", i+1)}
		s.name = c.id + "-" + s.alias
		s.txnID = env["PHASEGATE_GROUP_ID"] + "-" + s.alias
		e := map[string]string{
			"PHASEGATE_BROKERS":          strings.Join(c.innerAddrs(), ","),
			"PHASEGATE_TRANSACTIONAL_ID": s.txnID,
			"PHASEGATE_LOG_FORMAT":       "json",
		}
		for k, v := range env {
			e[k] = v
		}
		var err error
		s.c, err = testcontainers.Run(ctx, runtimeImage,
			testcontainers.WithName(s.name),
			testcontainers.WithEnv(e),
			network.WithNetwork([]string{s.alias}, c.net),
			testcontainers.WithEntrypoint("/sidecar"),
			testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
				hc.Binds = append(hc.Binds, suite.bin+":/sidecar:ro")
				hc.RestartPolicy = container.RestartPolicy{Name: "on-failure"}
			}),
		)
		if err != nil {
			c.t.Fatalf("start %s: %v", s.name, err)
		}
		c.t.Cleanup(func() {
			c.saveLogs(s.name, s.alias)
			if err := testcontainers.TerminateContainer(s.c); err != nil {
				c.t.Errorf("remove %s: %v", s.name, err)
			}
		})
		out = append(out, s)
	}
	return out
}

// restarts is how often Docker restarted s after it exited non-zero.
func (s *sidecar) restarts(ctx context.Context) int {
	out, err := docker(ctx, "inspect", "-f", "{{.RestartCount}}", s.name)
	if err != nil {
		return -1
	}
	n, _ := strconv.Atoi(out)
	return n
}

// stop sends SIGTERM and waits up to 40 s; the sidecar must exit 0.
func (s *sidecar) stop(ctx context.Context) error {
	if _, err := docker(ctx, "stop", "-t", "40", s.name); err != nil {
		return err
	}
	code, err := docker(ctx, "inspect", "-f", "{{.State.ExitCode}}", s.name)
	if err != nil {
		return err
	}
	if code != "0" {
		return fmt.Errorf("%s exited %s after SIGTERM, want 0", s.name, code)
	}
	return nil
}

// cut drops every packet between s and the rest of the network, in both
// directions, in s's own network namespace (loopback stays): a real
// partition, in which requests hang until their timeouts, unlike `docker
// network disconnect`, whose missing interface fails every send at once.
func (s *sidecar) cut(ctx context.Context) error { return s.filter(ctx, "-I") }

// heal removes cut's rules.
func (s *sidecar) heal(ctx context.Context) error { return s.filter(ctx, "-D") }

func (s *sidecar) filter(ctx context.Context, op string) error {
	pid, err := docker(ctx, "inspect", "-f", "{{.State.Pid}}", s.name)
	if err != nil {
		return err
	}
	if pid == "0" {
		return fmt.Errorf("%s is not running", s.name)
	}
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		iface := "-i"
		if chain == "OUTPUT" {
			iface = "-o"
		}
		cmd := []string{"nsenter", "-t", pid, "-n", "iptables", op, chain, "!", iface, "lo", "-j", "DROP"}
		if out, err := runCmd(ctx, cmd...); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(cmd, " "), err, out)
		}
	}
	return nil
}

// waitRunning waits until s runs (Docker may be restarting it).
func (s *sidecar) waitRunning(ctx context.Context, t *testing.T, within time.Duration) {
	t.Helper()
	if !poll(ctx, within, 200*time.Millisecond, func() bool {
		st, err := docker(ctx, "inspect", "-f", "{{.State.Running}}", s.name)
		return err == nil && st == "true"
	}) {
		t.Fatalf("%s not running within %s", s.name, within)
	}
}
