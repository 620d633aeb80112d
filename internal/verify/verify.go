package verify

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/phasegate/phasegate/markers"
)

// Phase summarises one phase across the whole output topic.
type Phase struct {
	ID       uint64
	Records  int
	Sources  map[string]int64 // data records by input topic, from the markers
	SealedBy markers.SealedBy
	Markers  int // markers seen for this phase (one per output partition)
}

// Output is what the verifier learned from a whole output topic held in
// memory (the tests' form; the command streams with a Checker).
type Output struct {
	Partitions int
	Phases     map[uint64]*Phase
	Data       int
	Markers    int
	// Published maps each data record's phasegate.source to its phase.
	Published map[string]uint64
	// IDs maps phase -> phasegate.id -> count across the topic.
	IDs map[uint64]map[string]int
	// Violations are Violation values, in the order found.
	Violations []error
	// Report is the Checker's report.
	Report *Report
}

// Sorted returns the phases in ascending order.
func (o *Output) Sorted() []*Phase {
	out := make([]*Phase, 0, len(o.Phases))
	for _, p := range o.Phases {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Err joins the violations found, or nil.
func (o *Output) Err() error { return errors.Join(o.Violations...) }

// CheckOutput checks a whole output topic read with read_committed from
// the log start to its end: partitions[p] holds partition p's records in
// offset order. It is a Checker with KeepSources, fed partition by
// partition.
func CheckOutput(partitions [][]markers.Record) *Output {
	recs := make([][]Record, len(partitions))
	for p, rs := range partitions {
		recs[p] = make([]Record, len(rs))
		for i, r := range rs {
			recs[p][i] = Record{Partition: int32(p), Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: r.Headers}
		}
	}
	return Check(recs)
}

// Check is CheckOutput for Records, which carry their timestamps.
func Check(partitions [][]Record) *Output {
	o := &Output{Partitions: len(partitions), Phases: map[uint64]*Phase{}}
	c := New(Config{
		Partitions:  int32(len(partitions)),
		KeepSources: true,
		OnViolation: func(v Violation) { o.Violations = append(o.Violations, v) },
		OnPhase: func(s *PhaseSummary) {
			ph := &Phase{ID: s.ID, Records: int(s.Records), Sources: map[string]int64{}, SealedBy: s.SealedBy}
			for _, pp := range s.Partitions {
				if !pp.Marker {
					continue
				}
				ph.Markers++
				for t, n := range pp.Sources {
					ph.Sources[t] += n
				}
			}
			o.Phases[s.ID] = ph
		},
	})
	for p, rs := range partitions {
		for i := range rs {
			c.Feed(&rs[i])
		}
		c.EndPartition(int32(p), 0, false)
	}
	o.Report = c.Finish(false)
	o.Data, o.Markers = int(o.Report.Stats.Data), int(o.Report.Stats.Markers)
	o.Published, o.IDs = c.keep.published, c.keep.ids
	return o
}

// kept is what Config.KeepSources keeps for Account.
type kept struct {
	published map[string]uint64         // phasegate.source -> phase
	ids       map[uint64]map[string]int // phase -> phasegate.id -> records
}

func (k *kept) add(part int32, off int64, phase uint64, meta *markers.Meta, c *Checker) {
	src := string(meta.Source)
	if prev, dup := k.published[src]; dup && prev != phase {
		c.violate(Violation{Partition: part, Offset: off, Phase: phase, Rule: RulePublishedTwice,
			Detail: fmt.Sprintf("input record %s is also in phase %d", src, prev)})
	}
	k.published[src] = phase
	if k.ids[phase] == nil {
		k.ids[phase] = map[string]int{}
	}
	k.ids[phase][string(meta.ID)]++
}

// Input is one record written to a fork topic, as the test wrote it.
type Input struct {
	Source string // <topic>/<partition>/<offset>
	ID     string // its phasegate.id, or the source when it had none
	Phase  uint64 // its phase, when known (a malformed header has none)
	Marker bool   // an input marker: never published as data
}

// Accounting is the fate of every input record.
type Accounting struct {
	In, Out, Quarantined, Duplicates, Markers int
	Reasons                                   map[markers.Reason]int
	Violations                                []error
}

// Err joins the violations found, or nil.
func (a *Accounting) Err() error { return errors.Join(a.Violations...) }

// String is the one line of counts a scenario prints.
func (a *Accounting) String() string {
	var rs []string
	for r, n := range a.Reasons {
		rs = append(rs, fmt.Sprintf("%s=%d", r, n))
	}
	sort.Strings(rs)
	return fmt.Sprintf("in=%d out=%d quarantined=%d (%s) duplicates=%d markers_in=%d",
		a.In, a.Out, a.Quarantined, strings.Join(rs, " "), a.Duplicates, a.Markers)
}

// Account checks that every input record is in the output or the quarantine
// exactly once, or is a proven duplicate: another record with the same
// phasegate.id in the same phase is in the output or in the quarantine
// (MARKERS.md 5: a retry of a late record is dropped, its first copy is
// quarantined). Input markers are never in the output; they may be in the
// quarantine.
func Account(inputs []Input, out *Output, quarantine []markers.Record) *Accounting {
	a := &Accounting{In: len(inputs), Reasons: map[markers.Reason]int{}}
	quarantined := map[string]markers.Reason{}
	for _, rec := range quarantine {
		src := string(header(rec.Headers, markers.HeaderSource))
		reason := markers.Reason(header(rec.Headers, markers.HeaderReason))
		if _, dup := quarantined[src]; dup {
			a.Violations = append(a.Violations, fmt.Errorf("input record %s quarantined twice", src))
		}
		quarantined[src] = reason
		a.Reasons[reason]++
	}
	quarantinedIDs := map[uint64]map[string]bool{}
	for _, in := range inputs {
		if _, ok := quarantined[in.Source]; ok && !in.Marker {
			if quarantinedIDs[in.Phase] == nil {
				quarantinedIDs[in.Phase] = map[string]bool{}
			}
			quarantinedIDs[in.Phase][in.ID] = true
		}
	}
	for _, in := range inputs {
		phase, published := out.Published[in.Source]
		reason, isQuarantined := quarantined[in.Source]
		switch {
		case published && isQuarantined:
			a.Violations = append(a.Violations, fmt.Errorf("input record %s is in the output (phase %d) and in the quarantine (%s)", in.Source, phase, reason))
		case in.Marker && published:
			a.Violations = append(a.Violations, fmt.Errorf("input marker %s was published as data", in.Source))
		case published:
			a.Out++
			if phase != in.Phase {
				a.Violations = append(a.Violations, fmt.Errorf("input record %s of phase %d published in phase %d", in.Source, in.Phase, phase))
			}
		case isQuarantined:
			a.Quarantined++
		case in.Marker:
			a.Markers++
		case out.IDs[in.Phase][in.ID] > 0 || quarantinedIDs[in.Phase][in.ID]:
			a.Duplicates++
		default:
			a.Violations = append(a.Violations, fmt.Errorf("input record %s (id %s, phase %d) is neither in the output nor in the quarantine, and no record with its id and phase is in either", in.Source, in.ID, in.Phase))
		}
	}
	return a
}

func header(hs []markers.Header, key string) []byte {
	for _, h := range hs {
		if string(h.Key) == key {
			return h.Value
		}
	}
	return nil
}
