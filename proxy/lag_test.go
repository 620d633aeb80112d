package proxy

import (
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
)

// After a leader moved, a failed measurement refreshes the leaders, so the
// next one asks the new leader: the lag client fetches nothing, and without
// the refresh it asked the old leader until sarama's 10-minute metadata
// refresh (e2e/cluster (a): NOT_LEADER_OR_FOLLOWER on every measurement
// after the broker restart, no partition idle, the fleet stalled).
func TestLagFollowsAMovedLeader(t *testing.T) {
	seed, old, next := sarama.NewMockBroker(t, 1), sarama.NewMockBroker(t, 2), sarama.NewMockBroker(t, 3)
	defer seed.Close()
	defer old.Close()
	defer next.Close()
	meta := func(leader *sarama.MockBroker) map[string]sarama.MockResponse {
		return map[string]sarama.MockResponse{"MetadataRequest": sarama.NewMockMetadataResponse(t).
			SetBroker(seed.Addr(), seed.BrokerID()).SetBroker(old.Addr(), old.BrokerID()).SetBroker(next.Addr(), next.BrokerID()).
			SetLeader("in", 0, leader.BrokerID())}
	}
	seed.SetHandlerByMap(meta(old))
	notLeader := &sarama.OffsetResponse{Version: 5}
	notLeader.AddTopicPartition("in", 0, -1)
	notLeader.Blocks["in"][0].Err = sarama.ErrNotLeaderForPartition
	old.SetHandlerByMap(map[string]sarama.MockResponse{"OffsetRequest": sarama.NewMockWrapper(notLeader)})
	found := &sarama.OffsetResponse{Version: 5}
	found.AddTopicPartition("in", 0, 42)
	next.SetHandlerByMap(map[string]sarama.MockResponse{"OffsetRequest": sarama.NewMockWrapper(found)})

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_5_0_0
	cfg.Metadata.Retry.Max = 0
	cfg.Net.ReadTimeout = 5 * time.Second
	cfg.ApiVersionsRequest = false // the mock brokers answer only what the test needs
	c, err := sarama.NewClient([]string{seed.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parts := []align.TP{{Topic: "in", Partition: 0}}
	if _, err := lastStableOffsets(c, parts); !errors.Is(err, sarama.ErrNotLeaderForPartition) {
		t.Fatalf("measurement at the old leader: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	seed.SetHandlerByMap(meta(next)) // the leader moved
	refreshLeaders(c, parts)
	lso, err := lastStableOffsets(c, parts)
	if err != nil || lso[parts[0]] != 42 {
		t.Fatalf("measurement after the refresh: %v, %v; want offset 42 from the new leader", lso, err)
	}
}
