package proxy

import (
	"github.com/IBM/sarama"
)

// openPhase holds the records of one phase that is not sealed yet, in the
// order they were read.
type openPhase struct {
	records []*sarama.ConsumerMessage
	// first holds, per partition handle, the offset of the partition's first
	// record in this phase (-1: none). The committed offset of a partition is
	// the minimum over open phases.
	first []int64
}

// buffer is the phase buffer: the records of every open phase.
type buffer struct {
	phases map[uint64]*openPhase
}

func newBuffer() *buffer { return &buffer{phases: map[uint64]*openPhase{}} }

// add buffers msg in phase; partitions is the number of partition handles.
func (b *buffer) add(phase uint64, ps *partState, msg *sarama.ConsumerMessage, partitions int) {
	ph := b.phases[phase]
	if ph == nil {
		ph = &openPhase{first: make([]int64, partitions)}
		for i := range ph.first {
			ph.first[i] = -1
		}
		b.phases[phase] = ph
	}
	if int(ps.p) >= len(ph.first) {
		grown := make([]int64, int(ps.p)+1)
		copy(grown, ph.first)
		for i := len(ph.first); i < len(grown); i++ {
			grown[i] = -1
		}
		ph.first = grown
	}
	if ph.first[ps.p] < 0 {
		ph.first[ps.p] = msg.Offset
	}
	ph.records = append(ph.records, msg)
}

// commitOffset is the offset to commit for ps: its first buffered record,
// else its consumed position. Phases in skip (being sealed) do not count.
func (b *buffer) commitOffset(ps *partState, skip map[uint64]bool) int64 {
	off := ps.next
	for phase, ph := range b.phases {
		if skip[phase] || int(ps.p) >= len(ph.first) {
			continue
		}
		if f := ph.first[ps.p]; f >= 0 && f < off {
			off = f
		}
	}
	return off
}
