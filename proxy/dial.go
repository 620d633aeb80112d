package proxy

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasegate/phasegate/tasks"
	"github.com/phasegate/phasegate/txn"
)

// Kafka holds what the clients need beyond the pipeline's Config.
type Kafka struct {
	Brokers []string
	// Base returns a fresh sarama configuration carrying the protocol
	// version, client ID and security settings; Dial adds the rest.
	Base func() *sarama.Config
	// TransactionTimeout must stay below the group's session timeout.
	TransactionTimeout time.Duration
	// MaxRecordBytes caps one produce batch and one record; it must not
	// exceed the brokers' message.max.bytes (1,048,588 by default) or the
	// output topic's max.message.bytes.
	MaxRecordBytes int
	SessionTimeout time.Duration
}

// ProducerConfig is the transactional producer's configuration.
func (k Kafka) ProducerConfig(transactionalID string) *sarama.Config {
	c := k.Base()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	// Retries outlast a leader's failover (the controller fences a dead
	// broker after its 9 s session timeout, e2e/cluster (a): 10.9 s), so
	// that the transaction in flight completes once leadership moved
	// instead of aborting and reading everything again; and they end
	// well inside the transaction timeout (retryBudget).
	c.Producer.Retry.Max, c.Producer.Retry.BackoffFunc = retryBudget(100*time.Millisecond, k.TransactionTimeout)
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	// A broker that stops answering (paused, cut off) holds a request
	// for Net.ReadTimeout: 30 s by default, past the transaction timeout,
	// so that the broker aborted the transaction and the instance exited
	// fenced (e2e/cluster (c): two of three sidecars restarted). A produce
	// is answered within Producer.Timeout, the rest at once.
	c.Producer.Timeout = 5 * time.Second
	c.Net.ReadTimeout = requestTimeout
	c.Producer.Transaction.ID = transactionalID
	c.Producer.Transaction.Timeout = k.TransactionTimeout
	// The same for the transaction coordinator's failover, and for the
	// previous transaction still completing (CONCURRENT_TRANSACTIONS,
	// answered to AddPartitionsToTxn for 0.4 s and more after a commit):
	// 50 fixed steps of 100 ms gave up after 5 s.
	c.Producer.Transaction.Retry.Max, c.Producer.Transaction.Retry.BackoffFunc = retryBudget(20*time.Millisecond, k.TransactionTimeout)
	c.Producer.Flush.Bytes = 1 << 20
	c.Producer.Flush.Messages = 10000
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	c.Producer.MaxMessageBytes = k.MaxRecordBytes
	c.Net.MaxOpenRequests = 1
	return c
}

// ConsumerConfig is the consumer group's configuration: read_committed,
// manual offsets (committed only by transactions), static membership when
// instanceID is set. Dial sizes the fetches (FetchBytes) and adds the task
// assignment strategy once it knows the layout.
func (k Kafka) ConsumerConfig(instanceID string) *sarama.Config {
	c := k.Base()
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Return.Errors = false
	c.Consumer.Group.Session.Timeout = k.SessionTimeout
	c.Consumer.Group.Heartbeat.Interval = k.SessionTimeout / 5
	c.Consumer.Group.InstanceId = instanceID
	c.Consumer.MaxProcessingTime = time.Second
	// A partition whose leader moved is fetched again half a second
	// later, not two (sarama's default); a fetch from a broker that stops
	// answering is given up after requestTimeout, not 30 s, while the
	// controller moves its partitions' leadership after 9 s.
	c.Consumer.Retry.Backoff = 500 * time.Millisecond
	c.Net.ReadTimeout = requestTimeout
	return c
}

// requestTimeout bounds a request to a broker that does not answer: a
// fetch answers within its MaxWaitTime, a produce within Producer.Timeout.
// A JoinGroup that waits longer for the other members is sent again.
const requestTimeout = 10 * time.Second

// retryBudget returns sarama retry settings that back off exponentially
// from first, at most a second apart, and stop after about 60 % of the
// transaction timeout: long enough for a broker's failover, short enough
// that the transaction they belong to can still commit.
func retryBudget(first, transactionTimeout time.Duration) (int, func(retries, maxRetries int) time.Duration) {
	backoff := func(retries, _ int) time.Duration { return min(first<<min(retries, 10), time.Second) }
	budget := transactionTimeout * 6 / 10
	n := 0
	for total := time.Duration(0); total < budget; n++ {
		total += backoff(n, 0)
	}
	return max(n, 3), backoff
}

// FetchBytes is what one fetch asks of a partition: the buffer bound
// shared out so that the claims of every input partition, each queuing up
// to twice it (ConsumeClaim), hold an 8th of the bound between them, and
// at most a 64th of it; within 16 KiB..1 MiB. What sarama fetched sits
// outside the bound. With a fixed 64th, e2e P1 (512 partitions, 8 MiB)
// fetched its whole backlog, 64 MiB, in the first round; sharing out the
// whole bound, 2,048 partitions with a backlog over the bound held 246 MB
// in sarama's responses and records, over the soft memory limit of then
// (the bound + 48 MiB), and the garbage collector took most of the CPU
// (bench/results/2026-12-06-3d1219c7-15.md).
func FetchBytes(maxBufferBytes int64, partitions int) int64 {
	return min(max(maxBufferBytes/max(64, 16*int64(partitions)), 16<<10), 1<<20)
}

// Dial connects a pipeline. The transactional producer comes first: its
// InitProducerId completes or aborts what the previous owner of the
// transactional ID left open, so the offsets the group fetches next are
// stable (sarama never sets RequireStable on offset fetches). The task
// layout comes from the topics' partition counts; the watermark topic is
// created when missing.
func Dial(k Kafka, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pcfg := k.ProducerConfig(cfg.TransactionalID)
	prod, err := txn.New(func() (sarama.AsyncProducer, error) {
		return sarama.NewAsyncProducer(k.Brokers, pcfg)
	}, k.TransactionTimeout, log, txn.NewMetrics(reg))
	if err != nil {
		return nil, fmt.Errorf("transactional producer PHASEGATE_TRANSACTIONAL_ID=%s: %w", cfg.TransactionalID, err)
	}
	closers := []func() error{prod.Close}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	client, err := sarama.NewClient(k.Brokers, k.ConsumerConfig(cfg.InstanceID))
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("connect consumer: %w", err)
	}
	closers = append(closers, client.Close)
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("admin client: %w", err)
	}
	out, err := client.Partitions(cfg.OutputTopic)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("output topic %s: %w (create it before starting phasegate)", cfg.OutputTopic, err)
	}
	layout, err := newLayout(client, cfg, int32(len(out)))
	if err != nil {
		closeAll()
		return nil, err
	}
	if err := checkOutput(client, cfg.OutputTopic, int32(len(out)), layout); err != nil {
		closeAll()
		return nil, err
	}
	strategy := tasks.NewStrategy(layout)
	reports, err := dialReports(k, cfg, client, admin)
	if err != nil {
		closeAll()
		return nil, err
	}
	closers = append(closers, reports.close)
	// The group fetches on connections of its own: a broker answers one
	// request of a connection at a time, and a fetch waits up to
	// Consumer.MaxWaitTime (500 ms) for data, so a lag measurement or an
	// offset lookup sent behind it waited as long.
	gcfg := k.ConsumerConfig(cfg.InstanceID)
	gcfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	gcfg.Consumer.Fetch.Default = int32(FetchBytes(cfg.Watermarks.MaxBufferBytes, layout.InputPartitions()))
	group, err := sarama.NewConsumerGroup(k.Brokers, cfg.GroupID, gcfg)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("consumer group %s: %w", cfg.GroupID, err)
	}
	p, err := New(cfg, Deps{
		Client: client, Admin: admin, Group: group, Producer: prod, Logger: log,
		Metrics: NewMetrics(reg, cfg.InputTopics), Layout: layout, Strategy: strategy, Reports: reports,
	})
	if err != nil {
		_ = group.Close()
		closeAll()
		return nil, err
	}
	p.closers = append(p.closers, reports.close, client.Close)
	return p, nil
}
