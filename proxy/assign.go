package proxy

import (
	"encoding/binary"
	"sort"

	"github.com/IBM/sarama"
)

// singleOwner is the consumer group's assignment strategy: every partition
// of every input topic goes to ONE member, the one that started last; the
// others get nothing and wait as standbys. One instance must see every
// partition, or its global watermark would seal phases that other members'
// partitions have not passed. The newest member wins because a restarted
// instance with the same transactional ID has already fenced the old one's
// producer: the old one (a zombie) must not get partitions back.
type singleOwner struct{}

// singleOwnerName is the protocol name the group members agree on.
const singleOwnerName = "phasegate-single-owner"

// memberUserData is what each member announces: its start time.
func memberUserData(startNanos int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(startNanos))
}

func (singleOwner) Name() string { return singleOwnerName }

// Plan gives every partition to the member with the latest start time (ties
// broken by member ID).
func (singleOwner) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	started := func(id string) uint64 {
		if u := members[id].UserData; len(u) == 8 {
			return binary.BigEndian.Uint64(u)
		}
		return 0
	}
	sort.Slice(ids, func(i, j int) bool {
		si, sj := started(ids[i]), started(ids[j])
		if si != sj {
			return si > sj
		}
		return ids[i] > ids[j]
	})
	plan := sarama.BalanceStrategyPlan{}
	if len(ids) == 0 {
		return plan, nil
	}
	for topic, partitions := range topics {
		plan.Add(ids[0], topic, partitions...)
	}
	return plan, nil
}

func (singleOwner) AssignmentData(string, map[string][]int32, int32) ([]byte, error) {
	return nil, nil
}
