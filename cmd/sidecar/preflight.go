package main

import (
	"errors"
	"fmt"
	"log/slog"

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
		return fmt.Errorf("cannot reach PHASEGATE_BROKERS=%v: %w (check the addresses and that the brokers are up)", k.Brokers, err)
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
	brokers := client.Brokers()
	if len(brokers) == 0 {
		return errors.New("no broker in the cluster metadata")
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
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("quarantine topic %q does not exist and cannot be created: %w (create it, or set PHASEGATE_QUARANTINE_TOPIC to an existing topic)", cfg.QuarantineTopic, err)
	}
	log.Info("quarantine topic created", "topic", cfg.QuarantineTopic, "partitions", len(parts), "replication_factor", rf)
	return client.RefreshMetadata(cfg.QuarantineTopic)
}
