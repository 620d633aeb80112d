package main

import (
	"slices"
	"sort"
	"time"
)

// laneView is an output topic's markers as a reader sees them over time:
// per partition and lane, the markers in the order they became visible to
// read_committed. MARKERS.md 3.3, rule M8: phase N is complete on a
// partition once every lane 0 .. W-1 has a visible marker for a phase >= N.
type laneView struct {
	parts map[int32]*partLanes
}

// partLanes is one output partition's lanes.
type partLanes struct {
	writers int32
	lanes   map[int32][]laneMark // ascending in visibility time (and phase)
	data    map[int32][]laneMark // per lane: the first visible data record of each newer phase
	phases  []uint64             // every phase some lane marked, ascending
}

// laneMark is a marker (or a lane's first data record of a phase) and when
// it became visible.
type laneMark struct {
	phase  uint64
	at     time.Time
	sealed time.Time // the marker's record timestamp (zero for data)
}

// newLaneView builds the view; vis gives each record's visibility.
func newLaneView(marks []markEv, data []dataEv, vis func(part int32, off int64, recv time.Time) time.Time) *laneView {
	v := &laneView{parts: map[int32]*partLanes{}}
	get := func(p int32) *partLanes {
		pl := v.parts[p]
		if pl == nil {
			pl = &partLanes{writers: 1, lanes: map[int32][]laneMark{}, data: map[int32][]laneMark{}}
			v.parts[p] = pl
		}
		return pl
	}
	for _, m := range marks {
		pl := get(m.part)
		pl.writers = max(pl.writers, m.writers)
		pl.lanes[m.lane] = append(pl.lanes[m.lane], laneMark{phase: m.phase, at: vis(m.part, m.off, m.recv), sealed: m.sealed})
		pl.phases = append(pl.phases, m.phase)
	}
	for _, d := range data {
		if !d.hasPhase {
			continue
		}
		pl := get(d.part)
		ls := pl.data[d.lane]
		if n := len(ls); n > 0 && ls[n-1].phase >= d.phase {
			continue
		}
		pl.data[d.lane] = append(ls, laneMark{phase: d.phase, at: vis(d.part, d.off, d.recv)})
	}
	for _, pl := range v.parts {
		for l, ms := range pl.lanes {
			pl.lanes[l] = monotone(ms)
		}
		for l, ms := range pl.data {
			pl.data[l] = monotone(ms)
		}
		slices.Sort(pl.phases)
		pl.phases = slices.Compact(pl.phases)
	}
	return v
}

// monotone sorts a lane's records by phase (they were read in offset
// order, which is phase order per lane) and makes the visibility times
// non-decreasing: a later offset is never visible before an earlier one.
func monotone(ms []laneMark) []laneMark {
	slices.SortStableFunc(ms, func(a, b laneMark) int {
		switch {
		case a.phase < b.phase:
			return -1
		case a.phase > b.phase:
			return 1
		}
		return 0
	})
	for i := len(ms) - 2; i >= 0; i-- {
		if ms[i].at.After(ms[i+1].at) {
			ms[i].at = ms[i+1].at
		}
	}
	return ms
}

// completeAt is when phase n became complete on part: the latest, over
// its lanes, of the first visible marker for a phase >= n. ok is false
// while some lane has none.
func (v *laneView) completeAt(part int32, n uint64) (time.Time, bool) {
	pl := v.parts[part]
	if pl == nil {
		return time.Time{}, false
	}
	var at time.Time
	for l := range pl.writers {
		ms := pl.lanes[l]
		i := sort.Search(len(ms), func(i int) bool { return ms[i].phase >= n })
		if i == len(ms) {
			return time.Time{}, false
		}
		if ms[i].at.After(at) {
			at = ms[i].at
		}
	}
	return at, true
}

// firstSeal is the earliest seal time of a lane's marker for exactly phase
// n on part: when the fastest lane sealed it.
func (v *laneView) firstSeal(part int32, n uint64) (time.Time, bool) {
	pl := v.parts[part]
	if pl == nil {
		return time.Time{}, false
	}
	var first time.Time
	for _, ms := range pl.lanes {
		i := sort.Search(len(ms), func(i int) bool { return ms[i].phase >= n })
		if i < len(ms) && ms[i].phase == n && (first.IsZero() || ms[i].sealed.Before(first)) {
			first = ms[i].sealed
		}
	}
	return first, !first.IsZero()
}

// newest is the newest phase of ms visible at t; ok is false when none was.
func newest(ms []laneMark, t time.Time) (uint64, bool) {
	i := sort.Search(len(ms), func(i int) bool { return ms[i].at.After(t) })
	if i == 0 {
		return 0, false
	}
	return ms[i-1].phase, true
}

// completeThrough is the highest phase complete on part at t (every
// lane's newest visible marker is at or past it); ok is false while some
// lane has no visible marker.
func (v *laneView) completeThrough(part int32, t time.Time) (uint64, bool) {
	pl := v.parts[part]
	if pl == nil {
		return 0, false
	}
	var low uint64
	for l := range pl.writers {
		n, ok := newest(pl.lanes[l], t)
		if !ok {
			return 0, false
		}
		if l == 0 || n < low {
			low = n
		}
	}
	return low, true
}

// globalThrough is completeThrough's minimum over every partition of the
// view (a join reads them all); ok is false while one has none.
func (v *laneView) globalThrough(t time.Time) (uint64, bool) {
	var low uint64
	first := true
	for p := range v.parts {
		n, ok := v.completeThrough(p, t)
		if !ok {
			return 0, false
		}
		if first || n < low {
			low, first = n, false
		}
	}
	return low, !first
}

// nextGlobal is the first time after t at which globalThrough rose above
// its value at t, and that value; ok is false when it never did.
func (v *laneView) nextGlobal(t time.Time) (time.Time, uint64, bool) {
	base, ok := v.globalThrough(t)
	var times []time.Time
	for _, pl := range v.parts {
		for _, ms := range pl.lanes {
			for _, m := range ms {
				if m.at.After(t) {
					times = append(times, m.at)
				}
			}
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for _, at := range times {
		if n, ok2 := v.globalThrough(at); ok2 && (!ok || n > base) {
			return at, base, true
		}
	}
	return time.Time{}, base, false
}

// laneSpread is the distance, in phases, between lanes of one partition,
// sampled over time.
type laneSpread struct {
	Samples int
	// Marker distance: the fastest lane's newest visible marker minus the
	// slowest lane's, per partition and sample.
	P50, P99, Max float64
	MaxPart       int32
	MaxAt         time.Time
	// Data ahead: a lane's newest visible data phase minus the slowest
	// lane's newest visible marker (what a reader holds unfinished), max.
	DataAhead float64
}

// spread samples every partition with several lanes every step from
// from to to.
func (v *laneView) spread(from, to time.Time, step time.Duration) laneSpread {
	var s laneSpread
	var ds []float64
	for t := from; !t.After(to); t = t.Add(step) {
		for p, pl := range v.parts {
			if pl.writers < 2 {
				continue
			}
			var lo, hi uint64
			ok := true
			for l := range pl.writers {
				n, seen := newest(pl.lanes[l], t)
				if !seen {
					ok = false
					break
				}
				if l == 0 || n < lo {
					lo = n
				}
				hi = max(hi, n)
			}
			if !ok {
				continue
			}
			d := float64(hi - lo)
			ds = append(ds, d)
			if d > s.Max {
				s.Max, s.MaxPart, s.MaxAt = d, p, t
			}
			for l := range pl.writers {
				if n, seen := newest(pl.data[l], t); seen && n > lo {
					s.DataAhead = max(s.DataAhead, float64(n-lo))
				}
			}
		}
	}
	s.Samples = len(ds)
	if len(ds) > 0 {
		s.P50, s.P99 = percentile(ds, 50), percentile(ds, 99)
	}
	return s
}

// phaseLatencies are, for every (partition, phase) some lane marked with
// phase in [lo, hi]: phase end → complete and the fastest lane's seal →
// complete, in ms.
func (v *laneView) phaseLatencies(lo, hi uint64, phase time.Duration) (endMs, sealMs []float64) {
	for p, pl := range v.parts {
		for _, n := range pl.phases {
			if n < lo || n > hi {
				continue
			}
			at, ok := v.completeAt(p, n)
			if !ok {
				continue
			}
			end := time.UnixMilli(int64(n+1) * phase.Milliseconds())
			endMs = append(endMs, ms(at.Sub(end)))
			if s, ok := v.firstSeal(p, n); ok {
				sealMs = append(sealMs, ms(at.Sub(s)))
			}
		}
	}
	return endMs, sealMs
}

// phaseSplit breaks phase end → complete into its parts, over the same
// (partition, phase) pairs as phaseLatencies, for the phases every lane
// marked: phase end → the last lane's seal (the fleet's watermark
// reaching every lane), the last lane's seal → complete (the commits, and
// on a partition with several writers, an open transaction of another
// lane holding the last stable offset below the markers), the spread of
// the lanes' seal times, and how many phases became complete with every
// lane's marker in one LSO poll (the lanes' transactions overlapped: the
// last stable offset stayed below the earlier lanes' markers until the
// last of them committed).
type phaseSplit struct {
	EndSeal, SealComplete, SealSpread []float64 // ms
	OnePoll, N                        int
	// From the watermark topic: phase end → the last task's report past
	// the phase (per phase), and that report → each lane's seal (per
	// phase and lane; the seal is the lane's marker's record timestamp).
	EndReport, ReportSeal []float64
}

// reportSplit fills EndReport and ReportSeal from passed (phase → the last
// task's report past it) and the markers' seal times.
func (s *phaseSplit) reportSplit(passed map[uint64]time.Time, marks []markEv, phase time.Duration) {
	type key struct {
		phase uint64
		lane  int32
	}
	sealed := map[key]time.Time{}
	for _, m := range marks {
		k := key{m.phase, m.lane}
		if t, ok := sealed[k]; !ok || m.sealed.Before(t) {
			sealed[k] = m.sealed
		}
	}
	for n, at := range passed {
		s.EndReport = append(s.EndReport, ms(at.Sub(time.UnixMilli(int64(n+1)*phase.Milliseconds()))))
	}
	for k, t := range sealed {
		if at, ok := passed[k.phase]; ok {
			s.ReportSeal = append(s.ReportSeal, ms(t.Sub(at)))
		}
	}
}

func (v *laneView) phaseSplit(lo, hi uint64, phase time.Duration) phaseSplit {
	var s phaseSplit
	for p, pl := range v.parts {
		for _, n := range pl.phases {
			if n < lo || n > hi {
				continue
			}
			at, ok := v.completeAt(p, n)
			if !ok {
				continue
			}
			var first, last, vis time.Time
			lanes, same := 0, true
			for l := range pl.writers {
				ms := pl.lanes[l]
				i := sort.Search(len(ms), func(i int) bool { return ms[i].phase >= n })
				if i == len(ms) || ms[i].phase != n {
					break
				}
				lanes++
				if first.IsZero() || ms[i].sealed.Before(first) {
					first = ms[i].sealed
				}
				last = maxTime(last, ms[i].sealed)
				if lanes > 1 && !ms[i].at.Equal(vis) {
					same = false
				}
				vis = ms[i].at
			}
			if lanes != int(pl.writers) {
				continue // a lane skipped the phase
			}
			end := time.UnixMilli(int64(n+1) * phase.Milliseconds())
			s.EndSeal = append(s.EndSeal, ms(last.Sub(end)))
			s.SealComplete = append(s.SealComplete, ms(at.Sub(last)))
			s.SealSpread = append(s.SealSpread, ms(last.Sub(first)))
			s.N++
			if same && pl.writers > 1 {
				s.OnePoll++
			}
		}
	}
	return s
}
