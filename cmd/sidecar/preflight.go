package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/proxy"
)

// apiInitProducerID is the Kafka API key of InitProducerId: a broker that
// lacks it cannot run transactions.
const apiInitProducerID = 22

// preflight checks, before anything is consumed, what would otherwise fail
// later: the brokers answer and support transactions, the input and output
// topics exist, the quarantine topic exists or can be created.
func preflight(k proxy.Kafka, cfg Config, log *slog.Logger) error {
	client, err := sarama.NewClient(k.Brokers, k.Base())
	if err != nil {
		return diagnose(k, err)
	}
	defer client.Close()
	if err := checkTransactions(client); err != nil {
		return err
	}
	topics, err := client.Topics()
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	exists := map[string]bool{}
	for _, t := range topics {
		exists[t] = true
	}
	for _, t := range cfg.InputTopics {
		if !exists[t] {
			return fmt.Errorf("input topic %q does not exist: create it or fix PHASEGATE_INPUT_TOPICS", t)
		}
	}
	if !exists[cfg.OutputTopic] {
		return fmt.Errorf("output topic %q does not exist: create it (as many partitions as the join expects) or fix PHASEGATE_OUTPUT_TOPIC", cfg.OutputTopic)
	}
	if exists[cfg.QuarantineTopic] {
		return nil
	}
	return createQuarantine(client, cfg, log)
}

// checkTransactions asks a broker for its API versions.
func checkTransactions(client sarama.Client) error {
	if err := client.RefreshMetadata(); err != nil {
		return fmt.Errorf("read the cluster metadata: %w", err)
	}
	brokers := client.Brokers()
	if len(brokers) == 0 {
		return errors.New("the cluster metadata lists no broker")
	}
	b := brokers[0]
	if err := b.Open(client.Config()); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
		return fmt.Errorf("connect to broker %s: %w", b.Addr(), err)
	}
	resp, err := b.ApiVersions(&sarama.ApiVersionsRequest{Version: 0})
	if err != nil {
		return fmt.Errorf("ask broker %s for its API versions: %w", b.Addr(), err)
	}
	for _, api := range resp.ApiKeys {
		if api.ApiKey == apiInitProducerID {
			return nil
		}
	}
	return fmt.Errorf("broker %s does not support transactions (no InitProducerId API): phasegate needs Kafka 0.11 or later with transactions enabled", b.Addr())
}

// createQuarantine creates the quarantine topic with the output topic's
// partition count.
func createQuarantine(client sarama.Client, cfg Config, log *slog.Logger) error {
	parts, err := client.Partitions(cfg.OutputTopic)
	if err != nil {
		return fmt.Errorf("partitions of output topic %s: %w", cfg.OutputTopic, err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	rf := int16(min(3, len(client.Brokers())))
	err = admin.CreateTopic(cfg.QuarantineTopic, &sarama.TopicDetail{NumPartitions: int32(len(parts)), ReplicationFactor: rf}, false)
	switch {
	case errors.Is(err, sarama.ErrTopicAlreadyExists):
		log.Info("quarantine topic created meanwhile by another client", "topic", cfg.QuarantineTopic)
	case err != nil:
		return fmt.Errorf("quarantine topic %q does not exist and cannot be created: %w (create it, or set PHASEGATE_QUARANTINE_TOPIC to an existing topic)", cfg.QuarantineTopic, err)
	default:
		log.Info("quarantine topic created", "topic", cfg.QuarantineTopic, "partitions", len(parts), "replication_factor", rf)
	}
	return waitForLeaders(client, cfg.QuarantineTopic, topicReadyTimeout)
}

// topicReadyTimeout bounds the wait for a new topic's partitions to have
// leaders (a broker that has just started may still be creating its
// internal topics).
const topicReadyTimeout = 30 * time.Second

// waitForLeaders waits until every partition of topic has a leader.
func waitForLeaders(client sarama.Client, topic string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := client.RefreshMetadata(topic)
		var parts []int32
		if err == nil {
			parts, err = client.Partitions(topic)
		}
		for _, p := range parts {
			if err == nil {
				_, err = client.Leader(topic, p)
			}
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %q has no leader for every partition after %s: %w", topic, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// diagnose finds out why no broker answered: sarama only says it ran out of
// brokers, so the first broker is dialled alone and its error explained.
func diagnose(k proxy.Kafka, err error) error {
	addr := k.Brokers[0]
	b := sarama.NewBroker(addr)
	conf := k.Base()
	conf.Net.DialTimeout = 10 * conf.Net.DialTimeout / 30 // a third of the default: enough to see the cause
	if oerr := b.Open(conf); oerr == nil {
		_, err = b.Connected()
		_ = b.Close()
	}
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var recordHeader tls.RecordHeaderError
	switch {
	case errors.Is(err, sarama.ErrSASLAuthenticationFailed):
		return fmt.Errorf("SASL authentication failed at %s for user %q with %s: check PHASEGATE_SASL_USERNAME, PHASEGATE_SASL_PASSWORD (or _FILE) and PHASEGATE_SASL_MECHANISM",
			addr, conf.Net.SASL.User, conf.Net.SASL.Mechanism)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("TLS: the certificate of %s is signed by an authority this sidecar does not trust (%v): set PHASEGATE_TLS_CA_FILE to the CA that signed it", addr, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("TLS: the certificate of %s is not valid for that name (%v): connect by a name it lists, or set PHASEGATE_TLS_SERVER_NAME", addr, err)
	case errors.As(err, &invalid):
		return fmt.Errorf("TLS: the certificate of %s is invalid (%v)", addr, err)
	case errors.As(err, &recordHeader):
		return fmt.Errorf("TLS: %s does not answer in TLS: is it a PLAINTEXT or SASL_PLAINTEXT listener? Check PHASEGATE_SECURITY_PROTOCOL and the port", addr)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing listens at %s (connection refused): check PHASEGATE_BROKERS and that the broker is up", addr)
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("%s closed the connection: its listener probably expects another PHASEGATE_SECURITY_PROTOCOL (TLS or SASL) than %s", addr, protocolOf(conf))
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return fmt.Errorf("%s did not answer in time (%v): check PHASEGATE_BROKERS, the network, and PHASEGATE_SECURITY_PROTOCOL", addr, err)
	}
	return fmt.Errorf("cannot reach PHASEGATE_BROKERS=%v: %w (check the addresses, that the brokers are up, and PHASEGATE_SECURITY_PROTOCOL)", k.Brokers, err)
}

func protocolOf(c *sarama.Config) string {
	switch {
	case c.Net.TLS.Enable && c.Net.SASL.Enable:
		return "SASL_SSL"
	case c.Net.TLS.Enable:
		return "SSL"
	case c.Net.SASL.Enable:
		return "SASL_PLAINTEXT"
	}
	return "PLAINTEXT"
}
