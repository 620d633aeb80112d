package align

import (
	"time"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/watermarks"
)

// part is the session's view of one input partition.
type part struct {
	TP
	p   watermarks.P
	key dedupe.PartitionKey
	// next is the next offset to consume: the consumed position.
	next int64
	// replayBelow and resolvedBelow come from the committed offset's
	// metadata: a record at an offset below replayBelow whose phase is
	// below resolvedBelow (or that is malformed or a marker) was resolved
	// by a committed transaction before this session started.
	replayBelow   int64
	resolvedBelow uint64
	// sealedBelow: every phase below it was sealed on the outputs of this
	// partition's task before this session (the highest committed global
	// watermark among the partitions of the task, Output.Inputs). A new
	// record of such a phase is late, whatever the session's own global
	// watermark, which starts at the lowest of its tasks'.
	sealedBelow uint64
	// replaying is true until the partition has been read again up to
	// replayBelow (or its log ends before): see Session.replaying.
	replaying bool
	// marker is the last input marker read before the restart (committed
	// metadata), hasMarker whether there is one. The tracker learns it only
	// once the partition is read again up to replayBelow: the records
	// before it, of the phases it closes, are read again first, and must
	// not find those phases passed.
	marker    uint64
	hasMarker bool
	// counts holds, per phase, the data records read from this partition
	// (proven duplicates not counted), to check an input marker's count.
	counts map[uint64]int64
	// topic indexes Config.InputTopics, for the markers' sources.
	topic int
	// lanes is, per output partition, the lane of this partition's records
	// routed there (lanes.ofInput): built once, read at each Batch.
	lanes []int32
	lag   lagState
	// idleLSO, when above 0, is the last stable offset the partition was
	// idle at when its position was committed (commitMeta i): the same
	// one at the same position is no lag, at once.
	idleLSO int64
	// paused mirrors the tracker's effective pause state, as last reported.
	paused bool
	// idle is the idleness last reported by Step; holds, whether Step last
	// reported it holding the session's watermark.
	idle, holds bool
	// pausedSeen is the pause time already reported in Actions.
	pausedSeen time.Duration
}

// maxCountedPhases bounds counts: markers for phases older than the last
// maxCountedPhases phases seen on a partition are not count-checked.
const maxCountedPhases = 256

// count records one data record of phase.
func (ps *part) count(phase uint64) {
	ps.counts[phase]++
	if len(ps.counts) <= maxCountedPhases {
		return
	}
	lowest := phase
	for ph := range ps.counts {
		lowest = min(lowest, ph)
	}
	delete(ps.counts, lowest)
}

// settle forgets the counts of phases up to and including phase, after its
// marker was checked.
func (ps *part) settle(phase uint64) {
	for ph := range ps.counts {
		if ph <= phase {
			delete(ps.counts, ph)
		}
	}
}
