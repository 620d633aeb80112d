//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// down is how long a killed broker stays down (the first run kept
// them down 12-13 s); pauses and partitions last longer than the
// sidecar's default request (30 s) and session (30 s) timeouts.
const (
	down      = 15 * time.Second
	pauseFor  = 35 * time.Second
	cutFor    = 40 * time.Second
	flowAfter = 20 * time.Second
)

// nemesis is one fault of issue 33. fault runs it to the end (the broker
// back and the cluster in sync, the partition healed) and returns what it
// did and the observer's snapshot at its start.
type nemesis struct {
	name   string // a..f; CI runs a and d (`-run 'TestNemesis/^[ad]-'`)
	layout layout
	fault  func(ctx context.Context, r *run) (desc string, at snapshot)
}

var nemeses = []nemesis{
	{"a-kill-output-leader", partitionLayout, killOutputLeader},
	{"b-kill-txn-coordinator", keyLayout, killTxnCoordinator},
	{"c-pause-broker", partitionLayout, pauseWatermarkLeader},
	{"d-partition-sidecar", partitionLayout, partitionSidecar},
	{"e-rolling-restart", partitionLayout, rollingRestart},
	{"f-kill-controller-leader", partitionLayout, killControllerLeader},
}

// TestNemesis runs each fault on its own three-broker cluster with three
// sidecars while records flow, then checks exactly-once and prints one
// line per fault.
func TestNemesis(t *testing.T) {
	for _, n := range nemeses {
		t.Run(n.name, func(t *testing.T) {
			needDocker(t)
			ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
			defer cancel()
			r := startRun(t, ctx, n.name[:1], n.layout)
			r.flow(ctx, 10*time.Second)
			desc, at := n.fault(ctx, r)
			r.flow(ctx, flowAfter)
			// The measure is taken once every lane moved on (or 2 min).
			poll(ctx, 2*time.Minute, 500*time.Millisecond, func() bool {
				_, next := r.obs.recovery(at)
				return next >= 0
			})
			first, next := r.obs.recovery(at)
			stall := r.obs.longestGap(at.at)
			repl := r.replication(ctx)
			v := r.finish(ctx)
			var restarts []string
			for _, s := range r.sidecars {
				restarts = append(restarts, strconv.Itoa(s.restarts(ctx)))
			}
			r.report(result{name: n.name[:1], fault: desc, first: first, next: next, stall: stall, v: v,
				restarts: strings.Join(restarts, ","), replication: repl})
		})
	}
}

// kill sends SIGKILL to a node's container.
func (c *cluster) kill(ctx context.Context, n *node) {
	c.t.Helper()
	if _, err := docker(ctx, "kill", "-s", "KILL", n.name); err != nil {
		c.t.Fatal(err)
	}
}

// start starts a stopped node again (same data, same ports) and waits
// until the cluster is whole again.
func (c *cluster) start(ctx context.Context, n *node) {
	c.t.Helper()
	if _, err := docker(ctx, "start", n.name); err != nil {
		c.t.Fatal(err)
	}
	c.waitHealthy(ctx, 3*time.Minute)
}

// bounce kills n, keeps it down for d while records flow, and restarts it.
func (r *run) bounce(ctx context.Context, n *node, d time.Duration) {
	r.c.kill(ctx, n)
	r.flow(ctx, d)
	r.c.start(ctx, n)
}

// (a) SIGKILL the broker leading most output partitions while one of the
// sidecars' transactions is Ongoing on a partition it leads.
func killOutputLeader(ctx context.Context, r *run) (string, snapshot) {
	leaders, err := r.c.leaders(ctx, r.out)
	if err != nil {
		r.t.Fatal(err)
	}
	var ids []int32
	for _, l := range leaders {
		ids = append(ids, l)
	}
	target := r.c.node(mostCommon(ids))
	led := 0
	for _, l := range leaders {
		if l == target.id {
			led++
		}
	}
	ctrl := r.c.controllerLeader(ctx)
	// Mid-commit: a transaction holding one of its output partitions.
	ongoing := poll(ctx, 10*time.Second, 10*time.Millisecond, func() bool {
		d, err := r.c.adm.DescribeTransactions(ctx, r.txnIDs()...)
		if err != nil {
			return false
		}
		for _, tx := range d {
			if tx.State != "Ongoing" {
				continue
			}
			for p, l := range leaders {
				if _, ok := tx.Topics[r.out][p]; ok && l == target.id {
					return true
				}
			}
		}
		return false
	})
	at := r.obs.snapshot()
	r.bounce(ctx, target, down)
	return fmt.Sprintf("kill -9 %s (leader of %d/%d output partitions, transaction ongoing on one: %v; controller leader: %s), down %s, restarted",
		target.alias, led, len(leaders), ongoing, ctrl.alias, down), at
}

// (b) SIGKILL the broker coordinating most of the sidecars' transactional IDs.
func killTxnCoordinator(ctx context.Context, r *run) (string, snapshot) {
	var ids []int32
	for _, c := range r.c.adm.FindTxnCoordinators(ctx, r.txnIDs()...) {
		if c.Err != nil {
			r.t.Fatalf("find the coordinator of %s: %v", c.Name, c.Err)
		}
		ids = append(ids, c.NodeID)
	}
	target := r.c.node(mostCommon(ids))
	n := 0
	for _, id := range ids {
		if id == target.id {
			n++
		}
	}
	at := r.obs.snapshot()
	r.bounce(ctx, target, down)
	return fmt.Sprintf("kill -9 %s (transaction coordinator of %d/%d sidecars), down %s, restarted", target.alias, n, len(ids), down), at
}

// (c) docker pause the broker leading the watermark topic's partition
// (the worst case of the first run) longer than the request and
// session timeouts, then unpause.
func pauseWatermarkLeader(ctx context.Context, r *run) (string, snapshot) {
	wm := r.group + ".watermarks"
	leaders, err := r.c.leaders(ctx, wm)
	if err != nil || len(leaders) == 0 {
		r.t.Fatalf("leaders of %s: %v %v", wm, leaders, err)
	}
	target := r.c.node(leaders[0])
	at := r.obs.snapshot()
	// docker pause freezes the container's cgroup; on some machines the
	// freeze of a busy JVM fails ("OCI runtime pause failed: unable to
	// freeze"). SIGSTOP to the container's process, the broker's JVM
	// (images/kafka/run execs it), stops it the same way: its sockets
	// stay open and its kernel still accepts connections, but nothing
	// answers.
	how, resume := "docker pause", []string{"unpause", target.name}
	if _, err := docker(ctx, "pause", target.name); err != nil {
		r.t.Logf("docker pause %s failed (%v); SIGSTOP instead", target.alias, err)
		if _, err := docker(ctx, "kill", "-s", "STOP", target.name); err != nil {
			r.t.Fatal(err)
		}
		how, resume = "SIGSTOP", []string{"kill", "-s", "CONT", target.name}
	}
	r.flow(ctx, pauseFor)
	if _, err := docker(ctx, resume...); err != nil {
		r.t.Fatal(err)
	}
	r.c.waitHealthy(ctx, 3*time.Minute)
	return fmt.Sprintf("%s %s (leader of %s/0) for %s, resumed", how, target.alias, wm, pauseFor), at
}

// (d) cut sidecar-1 off from every broker longer than the session
// timeout, then heal: it must be fenced, its task must move to the others
// meanwhile, and nothing may be duplicated when it comes back.
func partitionSidecar(ctx context.Context, r *run) (string, snapshot) {
	s := r.sidecars[0]
	at := r.obs.snapshot()
	if err := s.cut(ctx); err != nil {
		r.t.Fatal(err)
	}
	r.flow(ctx, cutFor)
	// Its lanes must have moved on while it was cut off: the other two
	// sidecars took its task over.
	_, moved := r.obs.recovery(at)
	if err := s.heal(ctx); err != nil {
		r.t.Fatal(err)
	}
	s.waitRunning(ctx, r.t, time.Minute)
	if moved < 0 {
		r.t.Errorf("%s's task did not move while it was cut off for %s: some output lane committed no new phase", s.alias, cutFor)
	}
	return fmt.Sprintf("packets dropped between %s and every broker for %s, healed", s.alias, cutFor), at
}

// (e) restart the three brokers one after the other (SIGTERM, start,
// in sync again) under load.
func rollingRestart(ctx context.Context, r *run) (string, snapshot) {
	at := r.obs.snapshot()
	t0 := time.Now()
	for _, n := range r.c.nodes {
		if _, err := docker(ctx, "stop", "-t", "60", n.name); err != nil {
			r.t.Fatal(err)
		}
		r.c.start(ctx, n)
	}
	return fmt.Sprintf("rolling restart of kafka-1..3 (SIGTERM, start, in sync) took %s", time.Since(t0).Round(time.Second)), at
}

var leaderID = regexp.MustCompile(`LeaderId:\s+(\d+)`)

// controllerLeader asks a live node which node leads the KRaft quorum.
func (c *cluster) controllerLeader(ctx context.Context) *node {
	c.t.Helper()
	for _, n := range c.nodes {
		out, err := docker(ctx, "exec", n.name, "/opt/kafka/bin/kafka-metadata-quorum.sh",
			"--bootstrap-server", "localhost:9092", "describe", "--status")
		if err != nil {
			continue // a stopped node: ask the next
		}
		if m := leaderID.FindStringSubmatch(out); m != nil {
			id, _ := strconv.Atoi(m[1])
			return c.node(int32(id))
		}
	}
	c.t.Fatal("no node named the controller quorum's leader (kafka-metadata-quorum.sh describe --status)")
	return nil
}

// (f) SIGKILL the node leading the KRaft controller quorum, restart it.
func killControllerLeader(ctx context.Context, r *run) (string, snapshot) {
	target := r.c.controllerLeader(ctx)
	at := r.obs.snapshot()
	r.bounce(ctx, target, down)
	return fmt.Sprintf("kill -9 %s (controller quorum leader), down %s, restarted", target.alias, down), at
}
