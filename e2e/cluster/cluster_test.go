//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	mnet "github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// nodes is the cluster's size: three combined broker+controller nodes.
const nodes = 3

// cluster is three Kafka nodes on a Docker network of their own.
type cluster struct {
	t      *testing.T
	id     string // prefix of container names
	net    *testcontainers.DockerNetwork
	nodes  []*node
	cl     *kgo.Client
	adm    *kadm.Client
	logDir string
}

// node is one broker+controller container.
type node struct {
	id       int32
	alias    string // kafka-N: its name inside the network
	name     string // the container's name
	hostPort int    // its client listener on the host, 127.0.0.1:hostPort
	c        testcontainers.Container
}

// hostAddrs are the brokers' addresses from the host.
func (c *cluster) hostAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, "127.0.0.1:"+strconv.Itoa(n.hostPort))
	}
	return out
}

// innerAddrs are the brokers' addresses inside the network, in node order:
// the sidecars' PHASEGATE_BROKERS (kafka-1 first).
func (c *cluster) innerAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.alias+":9092")
	}
	return out
}

// node returns the node with a broker ID.
func (c *cluster) node(id int32) *node {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	c.t.Fatalf("no node %d", id)
	return nil
}

// startCluster starts three nodes and waits until the cluster serves a
// topic replicated three times. Everything is removed at the test's end.
func startCluster(t *testing.T, ctx context.Context) *cluster {
	t.Helper()
	id := fmt.Sprintf("pg%d", time.Now().UnixNano()%1_000_000_000)
	nw, err := network.New(ctx)
	if err != nil {
		t.Fatalf("docker network: %v", err)
	}
	c := &cluster{t: t, id: id, net: nw, logDir: filepath.Join(suite.work, t.Name())}
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Cleanups run last-in first-out: the sidecars and clients are gone.
		for _, n := range c.nodes {
			c.saveLogs(n.name, n.alias)
			if n.c != nil {
				if err := testcontainers.TerminateContainer(n.c); err != nil {
					t.Errorf("remove %s: %v", n.name, err)
				}
			}
		}
		if err := nw.Remove(context.Background()); err != nil {
			t.Errorf("remove network %s: %v", nw.Name, err)
		}
	})
	ports, err := freePorts(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var voters []string
	for i := range nodes {
		n := &node{id: int32(i + 1), alias: fmt.Sprintf("kafka-%d", i+1), hostPort: ports[i]}
		n.name = id + "-" + n.alias
		c.nodes = append(c.nodes, n)
		voters = append(voters, fmt.Sprintf("%d@%s:9093", n.id, n.alias))
	}
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.c, errs[i] = runNode(ctx, nw, n, strings.Join(voters, ","), id)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %s: %v", c.nodes[i].name, err)
		}
	}
	c.cl, err = kgo.NewClient(kgo.SeedBrokers(c.hostAddrs()...), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.cl.Close)
	c.adm = kadm.NewClient(c.cl)
	c.waitHealthy(ctx, 2*time.Minute)
	return c
}

// runNode starts one node: KRaft, three voters, RF 3 / min ISR 2 for
// every topic, the transaction log and the offsets topic.
func runNode(ctx context.Context, nw *testcontainers.DockerNetwork, n *node, voters, clusterID string) (testcontainers.Container, error) {
	host := strconv.Itoa(n.hostPort)
	env := map[string]string{
		// 16 bytes, URL-safe base64, as Kafka's storage tool wants.
		"CLUSTER_ID":                                             fmt.Sprintf("%-22s", "phasegate-"+clusterID)[:22],
		"KAFKA_NODE_ID":                                          strconv.Itoa(int(n.id)),
		"KAFKA_PROCESS_ROLES":                                    "broker,controller",
		"KAFKA_CONTROLLER_QUORUM_VOTERS":                         voters,
		"KAFKA_LISTENERS":                                        "INTERNAL://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093,HOST://0.0.0.0:" + host,
		"KAFKA_ADVERTISED_LISTENERS":                             "INTERNAL://" + n.alias + ":9092,HOST://127.0.0.1:" + host,
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":                   "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,HOST:PLAINTEXT",
		"KAFKA_INTER_BROKER_LISTENER_NAME":                       "INTERNAL",
		"KAFKA_CONTROLLER_LISTENER_NAMES":                        "CONTROLLER",
		"KAFKA_DEFAULT_REPLICATION_FACTOR":                       "3",
		"KAFKA_MIN_INSYNC_REPLICAS":                              "2",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                 "3",
		"KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS":                     "10",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":         "3",
		"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                    "2",
		"KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS":             "10",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "3",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":            "2",
		"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                 "0",
		"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                        "false",
		"KAFKA_LOG_CLEANER_DEDUPE_BUFFER_SIZE":                   "8388608",
		"KAFKA_NUM_NETWORK_THREADS":                              "2",
		"KAFKA_NUM_IO_THREADS":                                   "2",
		"KAFKA_HEAP_OPTS":                                        "-Xmx384m -Xms128m",
	}
	port := mnet.MustParsePort(host + "/tcp")
	return testcontainers.Run(ctx, kafkaImage,
		testcontainers.WithName(n.name),
		testcontainers.WithEnv(env),
		network.WithNetwork([]string{n.alias}, nw),
		testcontainers.WithExposedPorts(host+"/tcp"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			// A fixed host port: a restarted broker must come back on the
			// address it advertises.
			hc.PortBindings = mnet.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: host}}}
		}),
		testcontainers.WithWaitStrategyAndDeadline(3*time.Minute, wait.ForLog("Kafka Server started").WithStartupTimeout(3*time.Minute)),
	)
}

// freePorts are n loopback ports nothing listens on now.
func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// waitHealthy polls until every broker is registered and every partition of
// every topic has its full replica set in sync.
func (c *cluster) waitHealthy(ctx context.Context, within time.Duration) {
	c.t.Helper()
	var last string
	ok := poll(ctx, within, 250*time.Millisecond, func() bool {
		last = c.health(ctx)
		return last == ""
	})
	if !ok {
		c.t.Fatalf("cluster not healthy within %s: %s", within, last)
	}
}

// health is "" when the cluster is whole, else what is missing.
func (c *cluster) health(ctx context.Context) string {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.adm.Metadata(rctx)
	if err != nil {
		return err.Error()
	}
	if len(md.Brokers) != nodes {
		return fmt.Sprintf("%d brokers registered", len(md.Brokers))
	}
	for _, td := range md.Topics {
		for _, pd := range td.Partitions {
			if pd.Err != nil || len(pd.ISR) < len(pd.Replicas) || pd.Leader < 0 {
				return fmt.Sprintf("%s/%d: leader %d, isr %v of %v (%v)", td.Topic, pd.Partition, pd.Leader, pd.ISR, pd.Replicas, pd.Err)
			}
		}
	}
	return ""
}

// createTopics creates topics (name -> partitions) replicated 3 times.
func (c *cluster) createTopics(ctx context.Context, topics map[string]int32) {
	c.t.Helper()
	for name, parts := range topics {
		resp, err := c.adm.CreateTopic(ctx, parts, 3, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			c.t.Fatalf("create topic %s: %v", name, err)
		}
	}
	// Every broker's metadata must list them with leaders before a sidecar
	// starts: a sidecar asking a broker that has not caught up yet stops
	// with "missing on the brokers" (seen in (a): one restart).
	var missing string
	if !poll(ctx, time.Minute, 200*time.Millisecond, func() bool {
		missing = c.unseen(ctx, topics)
		return missing == ""
	}) {
		c.t.Fatalf("topics not in every broker's metadata within 1 min: %s", missing)
	}
}

// unseen is "" when every broker's own metadata lists every topic with a
// leader for each partition, else what is missing where.
func (c *cluster) unseen(ctx context.Context, topics map[string]int32) string {
	for _, n := range c.nodes {
		req := kmsg.NewPtrMetadataRequest()
		for name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := req.RequestWith(rctx, c.cl.Broker(int(n.id)))
		cancel()
		if err != nil {
			return fmt.Sprintf("%s: %v", n.alias, err)
		}
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 || int32(len(t.Partitions)) != topics[*t.Topic] {
				return fmt.Sprintf("%s: topic %s: error %d, %d partitions", n.alias, *t.Topic, t.ErrorCode, len(t.Partitions))
			}
			for _, p := range t.Partitions {
				if p.Leader < 0 {
					return fmt.Sprintf("%s: %s/%d has no leader", n.alias, *t.Topic, p.Partition)
				}
			}
		}
	}
	return ""
}

// leaders maps each partition of topic to its leader.
func (c *cluster) leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	td, err := c.adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int32{}
	for _, pd := range td[topic].Partitions {
		out[pd.Partition] = pd.Leader
	}
	return out, nil
}

// saveLogs writes a container's log, stdout and stderr, to the test's log
// directory (kept when a test failed or with PHASEGATE_E2E_KEEP=1).
func (c *cluster) saveLogs(name, file string) {
	out, err := exec.Command("docker", "logs", name).CombinedOutput()
	if err != nil {
		c.t.Logf("logs of %s: %v", name, err)
	}
	_ = os.WriteFile(filepath.Join(c.logDir, file+".log"), out, 0o644)
}

// poll calls cond every step until it returns true (true) or within
// passes or ctx ends (false).
func poll(ctx context.Context, within, step time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(step):
		}
	}
}
