package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/internal/config"
	"github.com/phasegate/phasegate/proxy"
)

// apiInitProducerID is the Kafka API key of InitProducerId: a broker that
// lacks it cannot run transactions.
const apiInitProducerID = 22

// Check checks, before anything is consumed, what would otherwise fail
// later: the brokers answer Kafka and support transactions, the transaction
// timeout fits the brokers' bound, the input and output topics exist, the
// routing suits their partition counts, the quarantine topic exists or can
// be created. Every step is bounded (Step). A value that the brokers show
// cannot work is a *config.Error (exit status 2); the rest name what to
// check.
func (s *Steps) Check(k proxy.Kafka, cfg config.Config) error {
	if err := s.Step(fmt.Sprintf("an answer from the brokers %v (TCP, then a Kafka ApiVersions request)", k.Brokers),
		"check "+config.Prefix+"BROKERS and the network", probeStepTimeout,
		func(ctx context.Context) error { return probeBrokers(ctx, k.Brokers, cfg) }); err != nil {
		return err
	}
	var client sarama.Client
	if err := s.Step("the cluster metadata from "+strings.Join(k.Brokers, ","), checkBrokerHealth, metadataStepTimeout, func(ctx context.Context) error {
		c, err := sarama.NewClient(k.Brokers, preflightConfig(k))
		if err != nil {
			return diagnose(k, err)
		}
		client = c
		if ctx.Err() != nil { // abandoned: nobody will close it
			c.Close()
		}
		return nil
	}); err != nil {
		return err
	}
	defer client.Close()
	if err := s.Step("transaction.max.timeout.ms from a broker (DescribeConfigs)", checkBrokerHealth, configsStepTimeout,
		func(context.Context) error { return s.checkTransactionTimeout(client, cfg) }); err != nil {
		return err
	}
	if err := s.Step("the list of topics", checkBrokerHealth, metadataStepTimeout, func(context.Context) error { return checkTopics(client, cfg) }); err != nil {
		return err
	}
	if err := routingCheck(client, cfg); err != nil {
		return err
	}
	if hasTopic(client, cfg.QuarantineTopic) {
		return nil
	}
	if topicDenied(client, cfg.QuarantineTopic) {
		return fmt.Errorf("not authorized: the brokers refuse to describe quarantine topic %q of %sQUARANTINE_TOPIC to this principal: grant it WRITE on that topic, and CREATE if phasegate is to create it (docs/SECURITY.md)", cfg.QuarantineTopic, config.Prefix)
	}
	return s.Step("the quarantine topic "+strconv.Quote(cfg.QuarantineTopic)+" to be created", CheckAdvertised, quarantineStepTimeout,
		func(ctx context.Context) error { return s.createQuarantine(ctx, client, cfg) })
}

// preflightConfig is the client configuration with network timeouts short
// enough for the step deadlines: sarama's defaults (30 s per dial and read,
// three metadata retries) add up to minutes.
func preflightConfig(k proxy.Kafka) *sarama.Config {
	c := k.Base()
	c.Net.DialTimeout = 10 * time.Second
	c.Net.ReadTimeout = 10 * time.Second
	c.Net.WriteTimeout = 10 * time.Second
	c.Metadata.Retry.Max = 1
	c.Metadata.Retry.Backoff = 500 * time.Millisecond
	c.Admin.Timeout = 10 * time.Second
	return c
}

// probeBrokers probes every bootstrap broker at once. One that answers
// Kafka is enough (sarama needs one); when none does, the error names what
// each one answered.
func probeBrokers(ctx context.Context, brokers []string, cfg config.Config) error {
	errs := make([]error, len(brokers))
	apis := make([]map[int16]bool, len(brokers))
	var wg sync.WaitGroup
	for i, b := range brokers {
		wg.Go(func() { apis[i], errs[i] = probe(ctx, b, cfg.Security.TLS(), cfg.Security.Protocol) })
	}
	wg.Wait()
	var msgs []string
	for i, err := range errs {
		switch {
		case err == nil && apis[i][apiInitProducerID]:
			return nil
		case err == nil:
			msgs = append(msgs, fmt.Sprintf("broker %s does not support transactions (no InitProducerId API): phasegate needs Kafka 0.11 or later with transactions enabled", brokers[i]))
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			msgs = append(msgs, err.Error())
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// checkTransactionTimeout refuses a transaction timeout the brokers would
// refuse at InitProducerId (INVALID_TRANSACTION_TIMEOUT), with exit status
// 2 and both numbers. When the broker does not tell (no DescribeConfigs
// right), it says so and goes on.
func (s *Steps) checkTransactionTimeout(client sarama.Client, cfg config.Config) error {
	brokers := client.Brokers()
	if len(brokers) == 0 {
		return errors.New("the cluster metadata lists no broker")
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	id := brokers[0].ID()
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: strconv.Itoa(int(id)),
		ConfigNames: []string{"transaction.max.timeout.ms"}})
	var maxMs int64 = -1
	for _, e := range entries {
		if e.Name == "transaction.max.timeout.ms" {
			maxMs, _ = strconv.ParseInt(e.Value, 10, 64)
		}
	}
	if err != nil || maxMs <= 0 {
		s.log.Warn("could not read the brokers' transaction.max.timeout.ms; PHASEGATE_TRANSACTION_TIMEOUT not checked against it", "broker", id, "err", err)
		return nil
	}
	if ms := cfg.TransactionTimeout.Milliseconds(); ms > maxMs {
		return config.BadVar("TRANSACTION_TIMEOUT", cfg.Raw("TRANSACTION_TIMEOUT"), fmt.Sprintf(
			"%d ms is above the brokers' transaction.max.timeout.ms=%d (%s, broker %d): lower it, or raise transaction.max.timeout.ms on every broker",
			ms, maxMs, config.FormatDuration(time.Duration(maxMs)*time.Millisecond), id))
	}
	return nil
}

// checkTopics wants every input topic and the output topic to exist, and
// names all that are missing in one message. A topic this principal may
// not describe is absent from the brokers' list as if it did not exist;
// asked for by name, the brokers answer TOPIC_AUTHORIZATION_FAILED, and
// the message then names the ACL instead (e2e/cluster's ACL test).
func checkTopics(client sarama.Client, cfg config.Config) error {
	var missing, denied []string
	check := func(topic, what string) {
		switch {
		case hasTopic(client, topic):
		case topicDenied(client, topic):
			denied = append(denied, fmt.Sprintf("%s %q", what, topic))
		default:
			missing = append(missing, fmt.Sprintf("%s %q", what, topic))
		}
	}
	for _, t := range cfg.InputTopics {
		check(t, "input topic of "+config.Prefix+"INPUT_TOPICS")
	}
	check(cfg.OutputTopic, "output topic of "+config.Prefix+"OUTPUT_TOPIC")
	var msgs []string
	if len(denied) > 0 {
		msgs = append(msgs, fmt.Sprintf("not authorized: the brokers refuse to describe %s to this principal: grant it READ on every input topic and WRITE on the output topic (docs/SECURITY.md)", strings.Join(denied, ", ")))
	}
	if len(missing) > 0 {
		msgs = append(msgs, fmt.Sprintf("missing on the brokers: %s: create them (the output with as many partitions as the join expects), or fix the variables", strings.Join(missing, ", ")))
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

func hasTopic(client sarama.Client, topic string) bool {
	topics, err := client.Topics()
	if err != nil {
		return false
	}
	for _, t := range topics {
		if t == topic {
			return true
		}
	}
	return false
}

// topicDenied reports whether the brokers answer TOPIC_AUTHORIZATION_FAILED
// to a metadata request naming only topic. The request never creates the
// topic (AllowAutoTopicCreation false, metadata version 4 or later: an
// older version would create it on a broker with auto.create.topics.enable,
// so it is not asked).
func topicDenied(client sarama.Client, topic string) bool {
	req := sarama.NewMetadataRequest(client.Config().Version, []string{topic})
	b := client.LeastLoadedBroker()
	if b == nil || req.Version < 4 {
		return false
	}
	req.AllowAutoTopicCreation = false
	resp, err := b.GetMetadata(req)
	if err != nil {
		return false
	}
	for _, t := range resp.Topics {
		if t.Name == topic && errors.Is(t.Err, sarama.ErrTopicAuthorizationFailed) {
			return true
		}
	}
	return false
}

// createQuarantine creates the quarantine topic with the output topic's
// partition count.
func (s *Steps) createQuarantine(ctx context.Context, client sarama.Client, cfg config.Config) error {
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
		s.log.Info("quarantine topic created meanwhile by another client", "topic", cfg.QuarantineTopic)
	case err != nil:
		return fmt.Errorf("quarantine topic %q does not exist and cannot be created: %w (create it, or set %sQUARANTINE_TOPIC to an existing topic)", cfg.QuarantineTopic, err, config.Prefix)
	default:
		s.log.Info("quarantine topic created", "topic", cfg.QuarantineTopic, "partitions", len(parts), "replication_factor", rf)
	}
	return waitForLeaders(ctx, client, cfg.QuarantineTopic)
}

// waitForLeaders waits until every partition of topic has a leader (a
// broker that has just started may still be creating its internal topics).
func waitForLeaders(ctx context.Context, client sarama.Client, topic string) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
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
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %q has no leader for every partition yet: %w", topic, err)
		case <-tick.C:
		}
	}
}

// diagnose finds out why sarama could not connect although the probe got a
// Kafka answer (SASL, most often): sarama only says it ran out of brokers,
// so the first broker is dialled alone and its error explained.
func diagnose(k proxy.Kafka, err error) error {
	addr := k.Brokers[0]
	b := sarama.NewBroker(addr)
	conf := preflightConfig(k)
	if oerr := b.Open(conf); oerr == nil {
		if _, cerr := b.Connected(); cerr != nil {
			err = cerr
		}
		_ = b.Close()
	}
	switch {
	case errors.Is(err, sarama.ErrSASLAuthenticationFailed):
		return fmt.Errorf("SASL authentication failed at %s for user %q with %s: check %sSASL_USERNAME, %sSASL_PASSWORD (or _FILE) and %sSASL_MECHANISM",
			addr, conf.Net.SASL.User, conf.Net.SASL.Mechanism, config.Prefix, config.Prefix, config.Prefix)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing listens at %s (connection refused): check %sBROKERS and that the broker is up", addr, config.Prefix)
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("%s closed the connection: its listener probably expects another %sSECURITY_PROTOCOL (TLS or SASL) than %s", addr, config.Prefix, protocolOf(conf))
	}
	return fmt.Errorf("cannot use the brokers %s (%v): check the addresses, that the brokers are up, and %sSECURITY_PROTOCOL", strings.Join(k.Brokers, ","), err, config.Prefix)
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
