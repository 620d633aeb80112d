package proxy

import (
	"context"
	"errors"
	"log/slog"
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

// A measurement that hangs (its broker paused) makes the lag measured
// before it unknown after lagOverdue, not after the request timeout: with
// the old lag of zero, a partition led by a paused broker went idle 5 s
// after its last record (e2e/cluster (c)). The measurement's own result
// follows when it ends.
func TestLagOverdue(t *testing.T) {
	b := sarama.NewMockBroker(t, 1)
	defer b.Close()
	found := &sarama.OffsetResponse{Version: 5}
	found.AddTopicPartition("in", 0, 42)
	b.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": sarama.NewMockMetadataResponse(t).SetBroker(b.Addr(), b.BrokerID()).SetLeader("in", 0, b.BrokerID()),
		"OffsetRequest":   sarama.NewMockWrapper(found),
	})
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_5_0_0
	cfg.Net.ReadTimeout = 10 * time.Second
	cfg.ApiVersionsRequest = false
	c, err := sarama.NewClient([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const hang = lagOverdue + time.Second
	b.SetLatency(hang)

	p := &Pipeline{cfg: Config{LagInterval: time.Hour}, deps: Deps{Client: c}, log: slog.New(slog.DiscardHandler),
		lags: make(chan lagReport), lagNow: make(chan struct{}, 1)}
	parts := []align.TP{{Topic: "in", Partition: 0}}
	p.assigned.Store(&parts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.pollLag(ctx)
	start := time.Now()
	p.lagNow <- struct{}{}
	first := <-p.lags
	if took := time.Since(start); !errors.Is(first.err, errLagOverdue) || took < lagOverdue || took >= hang {
		t.Fatalf("first report after %s: %+v; want errLagOverdue after %s, before the answer at %s", took, first, lagOverdue, hang)
	}
	second := <-p.lags
	if took := time.Since(start); second.err != nil || second.lso[parts[0]] != 42 || took < hang {
		t.Fatalf("second report after %s: %+v; want offset 42 once the broker answered", took, second)
	}
}
