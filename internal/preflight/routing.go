package preflight

import (
	"fmt"
	"strings"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/internal/config"
)

// Why partition routing refuses fork topics of different partition counts:
// under PHASEGATE_ROUTING=partition input partition p goes to output
// partition p mod P_out. A producer puts a key on hash(key) mod N of each
// fork topic, so with orders on 3 partitions and payments on 2 the same key
// sits on orders/2 and payments/1 and reaches two different output
// partitions: a join that pairs records by key within an output partition
// silently misses the match. Nothing downstream can detect it, so the
// sidecar refuses to start instead. Key routing (murmur2, as Kafka's Java
// producer) keeps a key on one output partition whatever the fork topics'
// partition counts. The override exists for joins that never pair records
// by key across fork topics (a per-phase aggregate, a union): for them the
// split is harmless and partition routing keeps each input partition's
// order on one output partition.

// routingCheck asks the brokers for the fork topics' partition counts and
// applies checkRouting. Called by preflight once the topics are known to
// exist.
func routingCheck(client sarama.Client, cfg config.Config) error {
	counts := make(map[string]int, len(cfg.InputTopics))
	for _, t := range cfg.InputTopics {
		parts, err := client.Partitions(t)
		if err != nil {
			return fmt.Errorf("partitions of input topic %s: %w", t, err)
		}
		counts[t] = len(parts)
	}
	routing, err := align.ParseRouting(cfg.Routing)
	if err != nil {
		return err // config.Load refused it before
	}
	return checkRouting(cfg.InputTopics, counts, routing, cfg.AllowSplitKeys)
}

// checkRouting returns a *config.Error (exit status 2) when partition routing
// would send one key of different fork topics to different output
// partitions: the fork topics differ in partition count and allowSplit is
// false. inputs gives the order in which the topics are named.
func checkRouting(inputs []string, counts map[string]int, routing align.Routing, allowSplit bool) error {
	if routing != align.RoutePartition || allowSplit || len(inputs) < 2 {
		return nil
	}
	uneven := false
	for _, t := range inputs[1:] {
		if counts[t] != counts[inputs[0]] {
			uneven = true
		}
	}
	if !uneven {
		return nil
	}
	named := make([]string, len(inputs))
	for i, t := range inputs {
		named[i] = fmt.Sprintf("%s: %d", t, counts[t])
	}
	return &config.Error{Msg: fmt.Sprintf("%sROUTING=%q with fork topics of different partition counts (%s): one key would reach "+
		"different output partitions and a join by key would miss matches; set %sROUTING=key, or give every fork topic "+
		"the same partition count, or set %sALLOW_SPLIT_KEYS=true if the join never pairs records by key across fork topics",
		config.Prefix, routing.String(), strings.Join(named, ", "), config.Prefix, config.Prefix)}
}
