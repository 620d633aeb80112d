package verify

import (
	"hash/maphash"
	"math"
	"slices"

	"github.com/phasegate/phasegate/markers"
)

// Config sets up a Checker.
type Config struct {
	// Partitions is the topic's partition count; Records name partitions
	// 0 to Partitions-1.
	Partitions int32
	// OnViolation is called once per violation, as soon as it is found.
	OnViolation func(Violation)
	// OnPhase is called once per phase with a marker, in phase order, as
	// soon as every partition has passed it and its checks are done. The
	// summary is the caller's.
	OnPhase func(*PhaseSummary)
	// KeepSources keeps every data record's phasegate.source and
	// phasegate.id for Account and the published-twice rule: memory then
	// grows with the records read.
	KeepSources bool
}

// Checker checks an output topic as it is read, partition by partition in
// offset order (partitions may interleave freely). Create it with New,
// call StartsMidLog for partitions whose read does not start at the log
// start, Feed every record, EndPartition when a partition's read is done,
// then Finish. Not safe for concurrent use.
type Checker struct {
	cfg   Config
	parts []*partState
	open  map[uint64]*phaseState
	order []uint64        // ids of open, ascending
	seeds [2]maphash.Seed // two seeds: a 128-bit hash of each phasegate.id
	stats Stats
	hist  map[string]*SourceHistograms
	keep  *kept // nil unless Config.KeepSources
}

// partState is one partition's progress.
type partState struct {
	r        *markers.Reader
	idx      int32
	leadIn   bool   // its read started mid-log and no marker came yet
	from     uint64 // phases <= from are before its range (when hasFrom)
	hasFrom  bool
	last     uint64 // phase of its last accepted marker (when hasLast)
	hasLast  bool
	done     bool  // EndPartition was called
	cut      bool  // its range ended before the topic's end
	end      int64 // offset its read ended at
	ts       []stamp
	st       PartitionStats
	primeBuf []byte
}

// stamp is a pending data record's timestamp (ms), found again by offset
// when its phase closes.
type stamp struct {
	off, ms int64
}

// New returns a Checker for a topic of cfg.Partitions partitions.
func New(cfg Config) *Checker {
	c := &Checker{cfg: cfg, open: map[uint64]*phaseState{}, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, hist: map[string]*SourceHistograms{}}
	for p := range cfg.Partitions {
		c.parts = append(c.parts, &partState{r: markers.NewReader(p), idx: p, st: PartitionStats{Partition: p, FirstOffset: -1}})
	}
	if cfg.KeepSources {
		c.keep = &kept{published: map[string]uint64{}, ids: map[uint64]map[string]int{}}
	}
	return c
}

// StartsMidLog says that partition p's read does not start at the log
// start: its records up to and including its first marker are a phase
// whose beginning was not read, and are skipped (counted as lead-in).
// Call it before the first Feed of p.
func (c *Checker) StartsMidLog(p int32) { c.parts[p].leadIn = true }

// Feed takes the next record of rec.Partition, in offset order.
func (c *Checker) Feed(rec *Record) {
	p := c.parts[rec.Partition]
	c.stats.Records++
	p.st.Records++
	if p.st.FirstOffset < 0 {
		p.st.FirstOffset = rec.Offset
	}
	p.st.LastOffset = rec.Offset
	meta, herr := markers.Inspect(rec.Headers)
	if p.leadIn {
		p.st.LeadIn++
		if herr == nil && meta.Marker {
			c.leaveLeadIn(p, rec, meta.Phase)
		}
		return
	}
	if herr == nil && !meta.Marker {
		p.ts = append(p.ts, stamp{rec.Offset, rec.Timestamp.UnixMilli()})
	}
	ph, err := p.r.Feed(markers.Record{Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Offset: rec.Offset})
	for _, mv := range markers.Violations(err) {
		if mv.Kind == markers.MissingMarker {
			p.dropStamps(mv.Offset - 1) // the reader discarded the phase's records
		}
		c.violate(fromMarkers(mv))
	}
	// On a partition with several writers one record can complete several
	// phases (MARKERS.md 3.3, rule M8): the reader hands the rest to Next.
	for ; ph != nil; ph = p.r.Next() {
		c.closePart(p, ph)
	}
}

// leaveLeadIn starts checking p after its first marker, when that marker
// is well formed: a synthetic empty marker of the same phase tells p's
// reader where the range starts without counting the skipped records.
//
// A mid-log read of a partition with several writers is not supported:
// its lanes interleave, so one writer's first marker does not start the
// others' phases. Its lead-in never ends; the partition is left unchecked
// (every record counted as lead-in) rather than misread.
func (c *Checker) leaveLeadIn(p *partState, rec *Record, phase uint64) {
	m, err := markers.DecodeOutputMarker(rec.Value)
	if err != nil || m.Phase != phase || m.Writers >= 2 {
		return
	}
	p.primeBuf = markers.Marker{Phase: phase, Partition: p.idx, SealedBy: markers.SealedByWatermark, Emitter: "verify"}.AppendOutput(p.primeBuf[:0])
	_, _ = p.r.Feed(markers.Record{Value: p.primeBuf, Offset: rec.Offset,
		Headers: markers.AppendMarkerHeaders[markers.Header](nil, markers.AppendPhase(nil, phase))})
	p.leadIn = false
	p.from, p.hasFrom = phase, true
	p.last, p.hasLast = phase, true
	c.advance()
}

// EndPartition says p's read is over at offset end (exclusive). cut says
// the range ended before the topic's end offsets, so a phase without its
// marker at the end is not a violation but unchecked (lead-out).
func (c *Checker) EndPartition(p int32, end int64, cut bool) {
	st := c.parts[p]
	if st.done {
		return
	}
	st.done, st.cut, st.end = true, cut, end
	if st.leadIn { // no marker in its range: nothing of it can be checked
		st.leadIn = false
		st.from, st.hasFrom = math.MaxUint64, true
	}
	if cut {
		st.st.LeadOut = int64(len(st.ts))
	} else if err := st.r.End(); err != nil {
		for _, mv := range markers.Violations(err) {
			c.violate(fromMarkers(mv))
		}
	}
	st.ts = nil
	c.advance()
}

// Finish ends the check and returns its report. With interrupted (the
// read stopped early, e.g. on Ctrl-C), phases not yet closed on every
// partition are left unchecked and counted in Report.Unchecked; otherwise
// every partition must have been ended with EndPartition first, and the
// partitions that were not are ended as cut at their last offset.
func (c *Checker) Finish(interrupted bool) *Report {
	if !interrupted {
		for _, p := range c.parts {
			if !p.done {
				c.EndPartition(p.idx, p.st.LastOffset+1, true)
			}
		}
	}
	r := &Report{Stats: c.stats, Unchecked: len(c.order), Interrupted: interrupted}
	for _, p := range c.parts {
		r.Partitions = append(r.Partitions, p.st)
		r.Stats.LeadIn += p.st.LeadIn
		r.Stats.LeadOut += p.st.LeadOut
	}
	for _, topic := range sortedKeys(c.hist) {
		r.Sources = append(r.Sources, c.hist[topic])
	}
	return r
}

// Stats is what was read and checked so far.
func (c *Checker) Stats() Stats { return c.stats }

// Kept is what Config.KeepSources kept, as an Output for Account (only
// Published and IDs are set); nil without KeepSources.
func (c *Checker) Kept() *Output {
	if c.keep == nil {
		return nil
	}
	return &Output{Partitions: len(c.parts), Published: c.keep.published, IDs: c.keep.ids}
}

// Open is the number of phases seen on some partition and not yet passed
// by every partition: what the Checker's memory grows with. A reader that
// sees it grow past its bound pauses the partitions for which Behind is
// false.
func (c *Checker) Open() int { return len(c.order) }

// Behind reports whether p holds the oldest open phases back (or has not
// found its first marker yet): such a partition must never be paused.
func (c *Checker) Behind(p int32) bool {
	st := c.parts[p]
	if st.done {
		return false
	}
	if st.leadIn || !st.hasLast {
		return true
	}
	f, ok := c.frontier()
	return ok && st.last <= f // !ok: another partition has no marker yet and holds everything back
}

func (c *Checker) violate(v Violation) {
	c.stats.Violations++
	if c.cfg.OnViolation != nil {
		c.cfg.OnViolation(v)
	}
}

// frontier is the highest phase every partition has passed: the lowest
// last marker of the partitions still being read. ok is false while some
// partition still being read has no marker yet.
func (c *Checker) frontier() (f uint64, ok bool) {
	f = math.MaxUint64
	for _, p := range c.parts {
		if p.done {
			continue
		}
		if !p.hasLast {
			return 0, false
		}
		f = min(f, p.last)
	}
	return f, true
}

// advance closes, in phase order, every open phase all partitions passed.
func (c *Checker) advance() {
	f, ok := c.frontier()
	if !ok {
		return
	}
	n := 0
	for _, id := range c.order {
		if id > f {
			break
		}
		c.finish(c.open[id], n)
		delete(c.open, id)
		n++
	}
	c.order = slices.Delete(c.order, 0, n)
}

// dropStamps forgets the timestamps of records at or below off.
func (p *partState) dropStamps(off int64) {
	i := 0
	for i < len(p.ts) && p.ts[i].off <= off {
		i++
	}
	p.ts = p.ts[:copy(p.ts, p.ts[i:])]
}

// dropPhaseStamps forgets the timestamps of recs (in offset order, as a
// phase holds them).
func (p *partState) dropPhaseStamps(recs []markers.Record) {
	i := 0
	p.ts = slices.DeleteFunc(p.ts, func(s stamp) bool {
		for i < len(recs) && recs[i].Offset < s.off {
			i++
		}
		return i < len(recs) && recs[i].Offset == s.off
	})
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
