//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// kafkaImage is the same Apache Kafka release that kafka.sh fetches:
// apache/kafka, or PHASEGATE_E2E_KAFKA_IMAGE (the local image that
// images/build.sh makes where no registry is reachable:
// phasegate-local/kafka:4.1.2). It is never pulled: without it locally the
// suite goes on to kafka.sh.
var kafkaImage = cmp.Or(os.Getenv("PHASEGATE_E2E_KAFKA_IMAGE"), "apache/kafka:4.1.2")

// starterPath is the start script the container waits for: the advertised
// listener needs the mapped port, known only after the container started
// (the pattern of testcontainers-java's KafkaContainer).
const starterPath = "/tmp/phasegate-kafka-start.sh"

// containerBroker runs apache/kafka as a single-node KRaft broker with the
// transaction settings, when a Docker engine answers. It returns an error
// wrapping errNoDocker when none does.
func containerBroker(ctx context.Context) (*broker, error) {
	// Ryuk, testcontainers' reaper, is an image of its own that may not be
	// had (no registry); the broker is terminated by the suite instead.
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	// With a local engine the mapped port is on the loopback. On these
	// machines testcontainers believes it runs inside a container and
	// answers the default gateway (192.0.2.1) as the host, which refuses.
	if dh := os.Getenv("DOCKER_HOST"); os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" && (dh == "" || strings.HasPrefix(dh, "unix://")) {
		os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	}
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoDocker, err)
	}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = provider.Health(hctx) // closes the provider
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoDocker, err)
	}
	// Never pull: a registry may be unreachable (and the pull would take
	// its timeout before kafka.sh is tried).
	if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f", "{{.Id}}", kafkaImage).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: image %s is not on this machine (make images builds phasegate-local/kafka:4.1.2; set PHASEGATE_E2E_KAFKA_IMAGE to use it): %s",
			errNoDocker, kafkaImage, strings.TrimSpace(string(out)))
	}
	c, err := testcontainers.Run(ctx, kafkaImage,
		testcontainers.WithExposedPorts("9092/tcp"),
		testcontainers.WithEnv(map[string]string{
			"CLUSTER_ID":                                             "cGhhc2VnYXRlLWUyZS0xMQ",
			"KAFKA_NODE_ID":                                          "1",
			"KAFKA_PROCESS_ROLES":                                    "broker,controller",
			"KAFKA_LISTENERS":                                        "PLAINTEXT://0.0.0.0:9092,BROKER://0.0.0.0:9093,CONTROLLER://0.0.0.0:9094",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":                   "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":                       "BROKER",
			"KAFKA_CONTROLLER_LISTENER_NAMES":                        "CONTROLLER",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                         "1@localhost:9094",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                 "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                    "1",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                 "0",
			"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                        "false",
			"KAFKA_LOG_CLEANER_DEDUPE_BUFFER_SIZE":                   "8388608",
			"KAFKA_HEAP_OPTS":                                        "-Xmx512m",
		}),
		testcontainers.WithEntrypoint("sh"),
		testcontainers.WithCmd("-c", "while [ ! -f "+starterPath+" ]; do sleep 0.1; done; exec sh "+starterPath),
		testcontainers.WithLifecycleHooks(testcontainers.ContainerLifecycleHooks{
			PostStarts: []testcontainers.ContainerHook{writeStarter},
		}),
		testcontainers.WithWaitStrategyAndDeadline(3*time.Minute, wait.ForLog("Kafka Server started").WithStartupTimeout(3*time.Minute)),
	)
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return nil, fmt.Errorf("run %s: %w", kafkaImage, err)
	}
	host, err := c.Host(ctx)
	if err == nil {
		var port interface{ Num() uint16 }
		if port, err = c.MappedPort(ctx, "9092/tcp"); err == nil {
			return &broker{
				addrs:     []string{fmt.Sprintf("%s:%d", host, port.Num())},
				source:    "testcontainers (" + kafkaImage + ")",
				terminate: func() error { return testcontainers.TerminateContainer(c) },
			}, nil
		}
	}
	_ = testcontainers.TerminateContainer(c)
	return nil, err
}

// writeStarter copies the start script that advertises the mapped port.
func writeStarter(ctx context.Context, c testcontainers.Container) error {
	host, err := c.Host(ctx)
	if err != nil {
		return err
	}
	port, err := c.MappedPort(ctx, "9092/tcp")
	if err != nil {
		return err
	}
	script := fmt.Sprintf("export KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://%s:%d,BROKER://$(hostname):9093\nexec /etc/kafka/docker/run\n", host, port.Num())
	return c.CopyToContainer(ctx, []byte(script), starterPath, 0o755)
}
