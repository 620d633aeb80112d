package watermarks

import (
	"slices"
	"time"
)

// maxFree bounds the sealed phase states kept for reuse, so a burst of open
// phases does not pin its memory for the tracker's life.
const maxFree = 64

// phase is one open phase: a phase that holds buffered records.
type phase struct {
	id       uint64
	records  int
	bytes    int64
	opened   time.Time
	timedOut bool        // a timeout was already counted for it (PolicyWait)
	parts    []phaseSlot // by P; grown when partitions are added later
}

// phaseSlot is one partition's share of a phase.
type phaseSlot struct {
	records int
	bytes   int64
	passed  time.Time // when the partition passed the phase while it was open
}

// slot returns p's share of ph, growing the table for partitions added after
// the phase opened.
func (ph *phase) slot(p P) *phaseSlot {
	if int(p) >= len(ph.parts) {
		ph.parts = slices.Grow(ph.parts, int(p)+1-len(ph.parts))[:int(p)+1]
	}
	return &ph.parts[p]
}

// openPhase creates the state of phase id (id >= Global) and inserts it in
// ID order. It reuses the state of a sealed phase when one is kept, so a
// steady stream of phases does not allocate per phase either.
func (t *Tracker) openPhase(id uint64, now time.Time) *phase {
	var ph *phase
	if n := len(t.free); n > 0 {
		ph, t.free = t.free[n-1], t.free[:n-1]
		clear(ph.parts[:cap(ph.parts)])
		*ph = phase{parts: ph.parts[:0]}
	} else {
		ph = &phase{}
	}
	ph.id, ph.opened = id, now
	ph.parts = slices.Grow(ph.parts, len(t.parts))[:len(t.parts)]
	t.phases[id] = ph

	// Phases usually open in ascending order: append, else insert in place.
	i := len(t.open)
	for i > 0 && t.open[i-1].id > id {
		i--
	}
	t.open = slices.Insert(t.open, i, ph)
	return ph
}

// release frees a sealed phase's buffered bytes and keeps its state for reuse.
// ph must be t.open[0].
func (t *Tracker) release(ph *phase) {
	if t.fault != faultLeakBytes {
		t.bufBytes -= ph.bytes
		for i := range ph.parts {
			s := &ph.parts[i]
			t.parts[i].bufRecords -= s.records
			t.parts[i].bufBytes -= s.bytes
		}
	}
	delete(t.phases, ph.id)
	t.open = slices.Delete(t.open, 0, 1)
	if len(t.free) < maxFree {
		t.free = append(t.free, ph)
	}
}
