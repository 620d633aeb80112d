package align

import (
	"fmt"
	"math"
	"strconv"
)

// A lane is one writer's records on one output partition (MARKERS.md 3.3):
// the session has one per Output entry. With partition routing every
// output partition has one lane; with key routing and several tasks, a
// session owning k tasks has k lanes on every output partition, and each
// counts, marks and tags (phasegate.task) only the records of its own
// task's inputs, so that a reader can check every writer's stream on its
// own whichever instance owns which task.
type lane struct {
	Output
	// from is the first phase the lane marks: below it, the task's earlier
	// owner did (the highest committed global watermark of its Inputs).
	from uint64
	// slot names the lane among its partition's lanes: 0 on a partition
	// with one writer, Task+1 with several. Write carries it (it fits in
	// Write's padding, where a lane index would not) and the Batch turns
	// it back into the header and the marker value.
	slot uint16
}

// lanes is the session's lane table, built once by newLanes.
type lanes struct {
	all []lane
	// bySlot is, per output partition, the lane index of each slot (-1:
	// not this session's).
	bySlot [][]int32
	// hdr is the phasegate.task value of each slot: nil for slot 0.
	hdr [][]byte
	// ofInput is, per input partition, the lane index of each output
	// partition it writes (-1: none); nil for an input of no lane.
	ofInput map[TP][]int32
	// sealedBelow is, per input partition, the highest from of its lanes:
	// its records of earlier phases are late.
	sealedBelow map[TP]uint64
	// shared is true when another session may write one of the session's
	// output partitions: a writer slot there is not the session's.
	shared bool
}

// newLanes builds the lane table of outputs over the session's inputs all,
// whose committed global watermarks are global. It refuses what would let
// two lanes claim one record or write one marker slot: an input in two
// lanes of one partition, a task twice on a partition, one-writer and
// several-writer lanes mixed on a partition (rules M1, M2).
func newLanes(outputs []Output, outParts int32, all []TP, global map[TP]uint64) (lanes, error) {
	ls := lanes{all: make([]lane, len(outputs)), bySlot: make([][]int32, outParts), hdr: [][]byte{nil},
		ofInput: map[TP][]int32{}, sealedBelow: map[TP]uint64{}}
	writers := make([]int32, outParts) // per partition: 1 for one writer, W for several
	for i, o := range outputs {
		l := lane{Output: o}
		if l.Inputs == nil {
			l.Inputs = all
		}
		w := max(o.Writers, 1)
		switch {
		case o.Writers < 0 || o.Writers > math.MaxUint16:
			return lanes{}, fmt.Errorf("align: output partition %d: %d writers, want 0 to %d", o.Partition, o.Writers, math.MaxUint16)
		case w >= 2 && (o.Task < 0 || o.Task >= w):
			return lanes{}, fmt.Errorf("align: output partition %d: task %d of %d writers", o.Partition, o.Task, w)
		case writers[o.Partition] != 0 && writers[o.Partition] != w:
			return lanes{}, fmt.Errorf("align: output partition %d has lanes of %d and %d writers", o.Partition, writers[o.Partition], w)
		}
		writers[o.Partition] = w
		if w >= 2 {
			l.slot = uint16(o.Task) + 1
		}
		slots := ls.bySlot[o.Partition]
		if slots == nil {
			slots = make([]int32, w+min(w-1, 1)) // slot 0, or slots 1..W
			for j := range slots {
				slots[j] = -1
			}
			ls.bySlot[o.Partition] = slots
		}
		if slots[l.slot] >= 0 {
			return lanes{}, fmt.Errorf("align: output partition %d: task %d has two lanes", o.Partition, o.Task)
		}
		slots[l.slot] = int32(i)
		for _, k := range l.Inputs {
			l.from = max(l.from, global[k])
		}
		ls.all[i] = l
	}
	for q, slots := range ls.bySlot {
		for j, i := range slots {
			ls.shared = ls.shared || i < 0 && (j > 0 || writers[q] == 1)
		}
	}
	for i, l := range ls.all {
		for _, k := range l.Inputs {
			of := ls.ofInput[k]
			if of == nil {
				of = make([]int32, outParts)
				for j := range of {
					of[j] = -1
				}
				ls.ofInput[k] = of
			}
			if of[l.Partition] >= 0 {
				return lanes{}, fmt.Errorf("align: input %s is in two lanes of output partition %d", k, l.Partition)
			}
			of[l.Partition] = int32(i)
			ls.sealedBelow[k] = max(ls.sealedBelow[k], l.from)
		}
		for int(l.slot) >= len(ls.hdr) {
			ls.hdr = append(ls.hdr, nil)
		}
		if l.slot > 0 {
			ls.hdr[l.slot] = strconv.AppendInt(nil, int64(l.Task), 10) // MARKERS.md 2
		}
	}
	return ls, nil
}

// of returns the lane of a record of partition ps routed to output
// partition out, -1 when the session has none there. A record of an input
// in no lane of out (a configuration proxy does not build) falls to out's
// first lane, so that a marker still counts it.
func (ls *lanes) of(ps *part, out int32) int32 {
	if ps.lanes != nil && ps.lanes[out] >= 0 {
		return ps.lanes[out]
	}
	for _, i := range ls.bySlot[out] {
		if i >= 0 {
			return i
		}
	}
	return -1
}
