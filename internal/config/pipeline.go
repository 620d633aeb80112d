package config

import (
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/proxy"
	"github.com/phasegate/phasegate/tasks"
	"github.com/phasegate/phasegate/watermarks"
)

// routing is PHASEGATE_ROUTING, read by align.ParseRouting.
func (c Config) routing() (align.Routing, error) {
	r, err := align.ParseRouting(c.Routing)
	if err != nil {
		return 0, BadVar("ROUTING", c.Routing, "partition or key")
	}
	return r, nil
}

// tasks is PHASEGATE_TASKS: 1 with key routing when unset or empty, so
// that an output topic written before several tasks existed stays version
// 1 (MARKERS.md 3.3: the writers of a partition never change), and 0 (the
// layout's) with partition routing.
// A count is refused with partition routing (tasks.CheckTasks, the one
// rule), in a line that names both variables.
func (c Config) tasks(routing align.Routing) (int32, error) {
	if c.Tasks == "" {
		if routing == align.RouteKey {
			return 1, nil
		}
		return 0, nil
	}
	n, err := strconv.ParseInt(c.Tasks, 10, 32)
	if err != nil || n < 1 {
		return 0, BadVar("TASKS", c.Tasks, "a whole number of at least 1 (unset: 1)")
	}
	if tasks.CheckTasks(routing, int32(n)) != nil {
		return 0, &Error{fmt.Sprintf("%sTASKS=%q is set but %sROUTING=%q: the tasks of partition routing follow the output partitions; set %sROUTING=key or unset %sTASKS",
			Prefix, c.Tasks, Prefix, c.Routing, Prefix, Prefix)}
	}
	return int32(n), nil
}

// ParseKafkaVersion is PHASEGATE_KAFKA_VERSION as sarama's version, or an
// *Error when it is not a version or below 2.5.0. `sidecar verify` checks
// its own PHASEGATE_KAFKA_VERSION with it too.
func ParseKafkaVersion(s string) (sarama.KafkaVersion, error) {
	v, err := sarama.ParseKafkaVersion(s)
	// 2.5 is where TxnOffsetCommit carries the group generation and member
	// (KIP-447, protocol version 3, sent by sarama from V2_5_0_0): each
	// instance has its own transactional ID, so a former owner of a task
	// that resumes after the task moved is fenced only by that check.
	if err != nil || !v.IsAtLeast(sarama.V2_5_0_0) {
		return v, BadVar("KAFKA_VERSION", s, "a Kafka version of at least 2.5.0 (KIP-447: a former owner of a task is fenced by its group generation), such as 3.9.0")
	}
	return v, nil
}

// Pipeline is the proxy's part of the configuration. Load has checked it
// (proxy.Config.Validate), so on a Config from Load it does not fail.
func (c Config) Pipeline() (proxy.Config, error) {
	routing, err := c.routing()
	if err != nil {
		return proxy.Config{}, err
	}
	policy, err := watermarks.ParsePolicy(c.SealPolicy)
	if err != nil {
		return proxy.Config{}, BadVar("SEAL_POLICY", c.SealPolicy, "wait or seal")
	}
	taskCount, err := c.tasks(routing)
	if err != nil {
		return proxy.Config{}, err
	}
	return proxy.Config{
		InputTopics: c.InputTopics, OutputTopic: c.OutputTopic, QuarantineTopic: c.QuarantineTopic,
		WatermarkTopic: c.WatermarkTopic, GroupID: c.GroupID, TransactionalID: c.TransactionalID, InstanceID: c.InstanceID, Routing: routing,
		Tasks: taskCount,
		Watermarks: watermarks.Config{
			PhaseLength: c.PhaseLength, MaxOutOfOrderness: c.MaxOutOfOrderness, IdleTimeout: c.IdleTimeout,
			MaxBufferBytes: c.MaxBufferBytes, SealTimeoutMin: c.SealTimeoutMin, SealTimeoutMax: c.SealTimeoutMax,
			SealPolicy: policy, Now: time.Now,
		},
		Dedupe:          dedupe.Config{MaxSealedPhases: c.DedupePhases, MaxIdentities: c.DedupeIDs},
		Tick:            20 * time.Millisecond,
		LagInterval:     time.Second,
		QuarantineDelay: time.Second,
	}, nil
}

// dialTimeout bounds a connection's set-up to a broker (TCP, and TLS when
// on): see Kafka's Base.
const dialTimeout = 3 * time.Second

// Kafka builds the client settings shared by the consumer and the
// producer, TLS and SASL included (Security.Apply).
func (c Config) Kafka() proxy.Kafka {
	version, _ := ParseKafkaVersion(c.KafkaVersion)
	return proxy.Kafka{
		Brokers: c.Brokers,
		Base: func() *sarama.Config {
			sc := sarama.NewConfig()
			sc.Version = version
			sc.ClientID = c.ClientID
			// A metadata request never creates a topic: on brokers with
			// auto.create.topics.enable a mistyped or missing topic would
			// otherwise appear with the broker's defaults.
			sc.Metadata.AllowAutoTopicCreation = false
			// A dead broker's address must not hold a client for sarama's
			// 30 s default dial: metadata refreshes try it first while
			// the cluster still names it leader, and each failed try
			// delayed the move to the new leader (e2e/cluster (b): a
			// lookup of the killed broker's name took 4.5 s to fail, so
			// the watermark reports resumed 4.5 s after the controller
			// had moved its partitions). Kafka's Java clients wait 10 s
			// (socket.connection.setup.timeout.ms); a TCP and TLS
			// handshake with a live broker takes milliseconds.
			sc.Net.DialTimeout = dialTimeout
			c.Security.Apply(sc)
			return sc
		},
		TransactionTimeout: c.TransactionTimeout,
		SessionTimeout:     c.SessionTimeout,
		MaxRecordBytes:     c.MaxRecordBytes,
	}
}
