package verify

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/phasegate/phasegate/markers"
)

// PartitionPhase is one phase on one partition.
type PartitionPhase struct {
	Partition    int32
	Records      int64 // data records of the phase read before its marker
	Marker       bool  // its marker was read on this partition
	MarkerOffset int64
	Count        int64 // the marker's count
	SealedBy     markers.SealedBy
	Emitter      string
	Sources      map[string]int64 // the marker's sources
	// OutOfRange: the read of this partition did not cover this phase
	// (it started after it or ended before it), so no marker is expected.
	OutOfRange bool
}

// SourceStat is what the data records of one source topic in one phase
// show: how many, and the first and last record timestamps.
type SourceStat struct {
	Records     int64
	First, Last time.Time
}

// Duration is the time the source took to deliver the phase: last minus
// first record timestamp.
func (s *SourceStat) Duration() time.Duration { return s.Last.Sub(s.First) }

// PhaseSummary is one checked phase across the topic.
type PhaseSummary struct {
	ID         uint64
	Partitions []PartitionPhase // one per partition, in partition order
	Records    int64
	SealedBy   markers.SealedBy
	Sources    map[string]*SourceStat // by source topic, from the data records
	Violations int                    // found by the topic-wide checks of this phase
}

// phaseState is an open phase: seen on some partition, not yet passed by
// every partition.
type phaseState struct {
	sum PhaseSummary
	ids map[[2]uint64]int32 // 128-bit hash of each phasegate.id -> the partition it was on
}

func (c *Checker) phase(id uint64) *phaseState {
	ps := c.open[id]
	if ps != nil {
		return ps
	}
	ps = &phaseState{sum: PhaseSummary{ID: id, Partitions: make([]PartitionPhase, len(c.parts)), Sources: map[string]*SourceStat{}},
		ids: map[[2]uint64]int32{}}
	for i := range ps.sum.Partitions {
		ps.sum.Partitions[i].Partition = int32(i)
	}
	c.open[id] = ps
	// Phases mostly arrive in order: insert from the back.
	i := len(c.order)
	for i > 0 && c.order[i-1] > id {
		i--
	}
	c.order = append(c.order, 0)
	copy(c.order[i+1:], c.order[i:])
	c.order[i] = id
	return ps
}

// closePart takes a phase that p's reader returned whole.
func (c *Checker) closePart(p *partState, ph *markers.Phase) {
	p.last, p.hasLast = ph.ID, true
	nm := int64(max(1, len(ph.Markers))) // several writers: each one's marker of the phase
	p.st.Markers += nm
	c.stats.Markers += nm
	ps := c.phase(ph.ID)
	pp := &ps.sum.Partitions[p.idx]
	n := int64(len(ph.Records))
	if !pp.Marker {
		*pp = PartitionPhase{Partition: p.idx, Marker: true, MarkerOffset: ph.MarkerOffset, SealedBy: ph.Marker.SealedBy,
			Emitter: ph.Marker.Emitter, Sources: map[string]int64{}}
	}
	// A reader that accepts several writers' markers for one phase on one
	// partition hands each back: their records and counts add up.
	pp.Records += n
	pp.Count += ph.Marker.Count
	for t, k := range ph.Marker.Sources {
		pp.Sources[t] += k
	}
	ps.sum.Records += n
	p.st.Data += n
	c.stats.Data += n
	j := 0 // walks p.ts alongside the records, both in offset order
	for i := range ph.Records {
		rec := &ph.Records[i]
		meta, _ := markers.Inspect(rec.Headers) // the reader accepted it: no error
		for j < len(p.ts) && p.ts[j].off < rec.Offset {
			j++
		}
		var ts time.Time
		if j < len(p.ts) && p.ts[j].off == rec.Offset {
			ts = time.UnixMilli(p.ts[j].ms)
		}
		c.sourceStat(ps, meta.Source, ts)
		if meta.ID != nil {
			k := [2]uint64{maphash.Bytes(c.seeds[0], meta.ID), maphash.Bytes(c.seeds[1], meta.ID)}
			if other, dup := ps.ids[k]; dup && other != p.idx {
				ps.sum.Violations++
				c.violate(Violation{Partition: p.idx, Offset: rec.Offset, Phase: ph.ID, Rule: RuleDuplicateAcross,
					Detail: fmt.Sprintf("%s %q is also on partition %d in this phase", markers.HeaderID, meta.ID, other)})
			} else if !dup {
				ps.ids[k] = p.idx
			}
		}
		if c.keep != nil {
			c.keep.add(p.idx, rec.Offset, ph.ID, &meta, c)
		}
	}
	if ph.Markers == nil {
		p.dropStamps(ph.MarkerOffset)
	} else {
		// Several writers interleave: records of later phases can precede
		// this phase's last marker, so only this phase's stamps go.
		p.dropPhaseStamps(ph.Records)
	}
	c.advance()
}

// sourceStat counts one data record for its source topic.
func (c *Checker) sourceStat(ps *phaseState, source []byte, ts time.Time) {
	topic := source
	if i := bytes.LastIndexByte(topic, '/'); i > 0 {
		if k := bytes.LastIndexByte(topic[:i], '/'); k > 0 {
			topic = topic[:k]
		}
	}
	s := ps.sum.Sources[string(topic)]
	if s == nil {
		s = &SourceStat{First: ts, Last: ts}
		ps.sum.Sources[string(topic)] = s
	}
	s.Records++
	if ts.Before(s.First) {
		s.First = ts
	}
	if ts.After(s.Last) {
		s.Last = ts
	}
}

// finish runs the topic-wide checks of an open phase every partition has
// passed, hands it to OnPhase and adds it to the histograms. at is its
// index in c.order.
func (c *Checker) finish(ps *phaseState, at int) {
	s := &ps.sum
	// sealed_by may differ across partitions, even for one emitter: an
	// instance seals a phase for each task it owns when that task's
	// partitions have passed it, and may gain a task after sealing the
	// phase for its others. The summary shows the first.
	for i := range s.Partitions {
		if pp := &s.Partitions[i]; pp.Marker && s.SealedBy == "" {
			s.SealedBy = pp.SealedBy
		}
	}
	for i := range s.Partitions {
		pp := &s.Partitions[i]
		if pp.Marker {
			continue
		}
		p := c.parts[i]
		if (p.hasFrom && s.ID <= p.from) || (p.cut && (!p.hasLast || s.ID > p.last)) {
			pp.OutOfRange = true
			continue
		}
		if s.Records == 0 {
			continue // an empty phase may be skipped (MARKERS.md 3.2)
		}
		s.Violations++
		off, next := c.nextMarker(int32(i), at)
		detail := fmt.Sprintf("the phase has %d data records on other partitions and no marker here (the next marker here is for phase %d)", s.Records, next)
		if off < 0 {
			off = p.end
			detail = fmt.Sprintf("the phase has %d data records on other partitions and no marker here before the end", s.Records)
		}
		c.violate(Violation{Partition: int32(i), Offset: off, Phase: s.ID, Rule: RuleMarkerNotEverywhere, Detail: detail})
	}
	c.stats.Phases++
	if s.Records > 0 {
		c.stats.PhasesWithData++
	}
	for topic, st := range s.Sources {
		h := c.hist[topic]
		if h == nil {
			h = newSourceHistograms(topic)
			c.hist[topic] = h
		}
		h.add(st)
	}
	if c.cfg.OnPhase != nil {
		c.cfg.OnPhase(s)
	}
}

// nextMarker finds, among the open phases after c.order[at], the first
// with a marker on partition p: the marker that skipped the phase at at.
func (c *Checker) nextMarker(p int32, at int) (offset int64, phase uint64) {
	for _, id := range c.order[at+1:] {
		if pp := c.open[id].sum.Partitions[p]; pp.Marker {
			return pp.MarkerOffset, id
		}
	}
	return -1, 0
}
