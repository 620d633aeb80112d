package proxy

import (
	"cmp"
	"slices"
	"time"

	"github.com/phasegate/phasegate/dedupe"
)

// DefaultTop is how many partitions /phases lists as the most lagging (and
// at most as holders of the global watermark) when the request names no
// ?top=.
const DefaultTop = 10

// FullListPath is the request that returns every partition's row; a
// summary without the rows names it so a user can find them.
const FullListPath = "/phases?partitions=all"

// Query is what a GET /phases asks for beyond the summary.
type Query struct {
	// Top is how many holders and most lagging partitions the summary lists.
	Top int
	// Rows names the partitions whose rows to send (one of RowStates); ""
	// sends none.
	Rows string
	// Offset and Limit cut a window out of those rows, for paging; Limit 0
	// sends every row from Offset.
	Offset, Limit int
}

// RowStates lists the values of ?partitions= (Query.Rows): which
// partitions' rows to send.
const RowStates = "all, live, paused, idle, holding, lagging"

// InState reports whether p is in state, one of RowStates; ok is false for
// any other name. The states are the Summary's: an idle partition is idle,
// not paused; holding and lagging cut across the others.
func InState(p *PartitionStatus, state string) (in, ok bool) {
	switch state {
	case "all":
		return true, true
	case "live":
		return !p.Idle && !p.Paused, true
	case "paused":
		return !p.Idle && p.Paused, true
	case "idle":
		return p.Idle, true
	case "holding":
		return p.HoldsWatermark, true
	case "lagging":
		return p.LagKnown && p.Lag > 0, true
	}
	return false, false
}

// Selection says which rows a Phases holds: those of the partitions in
// State, from Offset, out of Matched.
type Selection struct {
	State   string `json:"state"`
	Matched int    `json:"matched"`
	Offset  int    `json:"offset"`
}

// Phases is the body of GET /phases: the Status with its partitions
// summarised (Summary) and the per-partition rows only when asked for
// (?partitions=all). At 2,048 partitions the rows are most of the body;
// the summary stays a few KiB whatever the partition count.
type Phases struct {
	Updated           time.Time         `json:"updated"`
	Joined            bool              `json:"joined"`
	Ready             bool              `json:"ready"`
	GlobalWatermark   uint64            `json:"global_watermark_phase"`
	GlobalMs          int64             `json:"global_watermark_ms"`
	LastSealed        *uint64           `json:"last_sealed_phase,omitempty"`
	SealTimeout       string            `json:"seal_timeout"`
	BufferedBytes     int64             `json:"buffered_bytes"`
	MaxBufferBytes    int64             `json:"max_buffer_bytes"`
	PeakBufferedBytes int64             `json:"peak_buffered_bytes"`
	Summary           *Summary          `json:"summary"`
	Selection         *Selection        `json:"selection,omitempty"` // set when rows are asked for
	Partitions        []PartitionStatus `json:"partitions,omitzero"` // nil (left out) unless asked for
	OpenPhases        []OpenPhaseStatus `json:"open_phases"`
	Sealed            []SealStatus      `json:"sealed"`
	Dedupe            *dedupe.Stats     `json:"dedupe,omitempty"`
	// Instance is this instance's transactional ID; Fleet its view of every
	// task, summarised; Tasks every task's row, sent with the partitions'.
	Instance string       `json:"instance"`
	Fleet    FleetSummary `json:"fleet"`
	Tasks    []TaskStatus `json:"tasks,omitzero"`
}

// Summary is the partitions of a Status in counts and a few rows. Every
// partition is in exactly one of Live, Idle and Paused (an idle partition
// counts as idle even when paused).
type Summary struct {
	Partitions int `json:"partitions"`
	Live       int `json:"live"`
	Idle       int `json:"idle"`
	Paused     int `json:"paused"`
	// PausedBy counts the paused partitions per pause reason; a partition
	// paused for two reasons counts under both.
	PausedBy map[string]int `json:"paused_by_reason"`
	// PauseDeferred counts the partitions with a pause requested but not in
	// effect (the slowest live partition is never paused).
	PauseDeferred int `json:"pause_deferred"`
	// AtWatermark counts the partitions that are not idle and whose
	// watermark phase is at (or below) the global watermark phase.
	AtWatermark int `json:"at_global_watermark"`
	// Holding counts the partitions that hold the global watermark back
	// (holds_watermark); Holders lists at most Top of them.
	Holding         int            `json:"holding_watermark"`
	Lag             int64          `json:"lag_total"`
	WithLag         int            `json:"with_lag"`
	LagUnknown      int            `json:"lag_unknown"`
	BufferedRecords int            `json:"buffered_records"`
	Topics          []TopicSummary `json:"topics"`
	// Top is the most rows Holders and MostLagging hold (?top=).
	Top int `json:"top"`
	// Holders are partitions holding the global watermark back, most
	// lagging first, then by topic and partition.
	Holders []PartitionStatus `json:"holders"`
	// MostLagging are the partitions with the most consumer lag (lag > 0
	// only), most first.
	MostLagging []PartitionStatus `json:"most_lagging"`
	// FullList is the request for every row, set when they are left out.
	FullList string `json:"full_list,omitempty"`
}

// TopicSummary is one fork topic's partitions in a Summary.
type TopicSummary struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	Live       int    `json:"live"`
	Idle       int    `json:"idle"`
	Paused     int    `json:"paused"`
	Lag        int64  `json:"lag_total"`
}

// Summarize counts st's partitions and picks at most top holders and top
// most lagging partitions (top < 0 counts as 0). It reads st only: the
// published Status is shared by every request. O(partitions log partitions).
func Summarize(st *Status, top int) *Summary {
	top = max(top, 0)
	s := &Summary{Partitions: len(st.Partitions), PausedBy: map[string]int{}, Top: top,
		Topics: []TopicSummary{}, Holders: []PartitionStatus{}, MostLagging: []PartitionStatus{}}
	topic := map[string]int{} // topic -> index in s.Topics
	var holders, lagging []int
	for i := range st.Partitions {
		p := &st.Partitions[i]
		ti, ok := topic[p.Topic]
		if !ok {
			ti = len(s.Topics)
			topic[p.Topic] = ti
			s.Topics = append(s.Topics, TopicSummary{Topic: p.Topic})
		}
		ts := &s.Topics[ti]
		ts.Partitions++
		switch {
		case p.Idle:
			s.Idle++
			ts.Idle++
		case p.Paused:
			s.Paused++
			ts.Paused++
			for _, r := range p.PauseReasons {
				s.PausedBy[r]++
			}
		default:
			s.Live++
			ts.Live++
		}
		if !p.Paused && len(p.PauseReasons) > 0 {
			s.PauseDeferred++
		}
		if !p.Idle && p.Watermark <= st.GlobalWatermark {
			s.AtWatermark++
		}
		if p.HoldsWatermark {
			s.Holding++
			holders = append(holders, i)
		}
		switch {
		case !p.LagKnown:
			s.LagUnknown++
		case p.Lag > 0:
			s.Lag += p.Lag
			ts.Lag += p.Lag
			s.WithLag++
			lagging = append(lagging, i)
		}
		s.BufferedRecords += p.BufferedRecords
	}
	slices.SortFunc(s.Topics, func(a, b TopicSummary) int { return cmp.Compare(a.Topic, b.Topic) })
	byLag := func(i, j int) int {
		a, b := &st.Partitions[i], &st.Partitions[j]
		return cmp.Or(cmp.Compare(b.Lag, a.Lag), cmp.Compare(a.Watermark, b.Watermark),
			cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	}
	for _, pick := range []struct {
		from []int
		to   *[]PartitionStatus
	}{{holders, &s.Holders}, {lagging, &s.MostLagging}} {
		slices.SortFunc(pick.from, byLag)
		for _, i := range pick.from[:min(top, len(pick.from))] {
			*pick.to = append(*pick.to, st.Partitions[i])
		}
	}
	return s
}

// NewPhases shapes st for GET /phases: the summary with q.Top rows, and
// the rows q asks for (q.Rows one of RowStates, else none). It copies no
// row it leaves out.
func NewPhases(st *Status, q Query) *Phases {
	ph := &Phases{
		Updated: st.Updated, Joined: st.Joined, Ready: st.Ready,
		GlobalWatermark: st.GlobalWatermark, GlobalMs: st.GlobalMs, LastSealed: st.LastSealed,
		SealTimeout: st.SealTimeout, BufferedBytes: st.BufferedBytes, MaxBufferBytes: st.MaxBufferBytes,
		PeakBufferedBytes: st.PeakBufferedBytes, Summary: Summarize(st, q.Top),
		OpenPhases: st.OpenPhases, Sealed: st.Sealed, Dedupe: st.Dedupe,
		Instance: st.Instance, Fleet: summarizeFleet(st.Tasks, q.Top),
	}
	if _, ok := InState(&PartitionStatus{}, q.Rows); !ok {
		ph.Summary.FullList = FullListPath
		return ph
	}
	ph.Tasks = st.Tasks
	sel := &Selection{State: q.Rows, Offset: max(q.Offset, 0)}
	ph.Selection, ph.Partitions = sel, []PartitionStatus{} // asked for: an empty list, not a missing one
	if q.Rows == "all" && sel.Offset == 0 && q.Limit <= 0 && st.Partitions != nil {
		ph.Partitions, sel.Matched = st.Partitions, len(st.Partitions) // shared, read-only: no copy of 2,048 rows
		return ph
	}
	for i := range st.Partitions {
		p := &st.Partitions[i]
		if in, _ := InState(p, q.Rows); !in {
			continue
		}
		if sel.Matched >= sel.Offset && (q.Limit <= 0 || len(ph.Partitions) < q.Limit) {
			ph.Partitions = append(ph.Partitions, *p)
		}
		sel.Matched++
	}
	return ph
}
