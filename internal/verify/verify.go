// Package verify is the one verifier every phasegate test uses, on kfake and
// on a real broker: it checks an output topic read with read_committed
// against every guarantee of MARKERS.md section 3.2, and accounts for every
// input record (in the output or the quarantine exactly once, or a proven
// duplicate). It holds no Kafka client: callers read the topics with any
// client and hand over the records.
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

// Output is what the verifier learned from an output topic.
type Output struct {
	Partitions int
	Phases     map[uint64]*Phase
	Data       int
	Markers    int
	// Published maps each data record's phasegate.source to its phase.
	Published map[string]uint64
	// IDs maps phase -> phasegate.id -> count across the topic.
	IDs        map[uint64]map[string]int
	Violations []error
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

// CheckOutput runs markers.Reader over every output partition (records in
// offset order, read with read_committed) and checks the topic-wide rules:
// every phase with data has a marker on every partition, each phasegate.id
// appears at most once per phase across the topic, markers of one phase
// agree, and no input marker was republished as data.
func CheckOutput(partitions [][]markers.Record) *Output {
	o := &Output{
		Partitions: len(partitions),
		Phases:     map[uint64]*Phase{},
		Published:  map[string]uint64{},
		IDs:        map[uint64]map[string]int{},
	}
	for part, recs := range partitions {
		r := markers.NewReader(int32(part))
		for _, rec := range recs {
			ph, err := r.Feed(rec)
			if err != nil {
				o.Violations = append(o.Violations, fmt.Errorf("partition %d: %w", part, err))
			}
			if ph != nil {
				o.phase(part, ph)
			}
		}
		if err := r.End(); err != nil {
			o.Violations = append(o.Violations, fmt.Errorf("partition %d: %w", part, err))
		}
	}
	for _, ph := range o.Phases {
		if ph.Records > 0 && ph.Markers != o.Partitions {
			o.Violations = append(o.Violations, fmt.Errorf("phase %d has data but markers on %d of %d partitions", ph.ID, ph.Markers, o.Partitions))
		}
	}
	for phase, ids := range o.IDs {
		for id, n := range ids {
			if n > 1 {
				o.Violations = append(o.Violations, fmt.Errorf("phase %d: phasegate.id %q appears %d times across the topic", phase, id, n))
			}
		}
	}
	return o
}

func (o *Output) phase(part int, ph *markers.Phase) {
	p := o.Phases[ph.ID]
	if p == nil {
		p = &Phase{ID: ph.ID, Sources: map[string]int64{}, SealedBy: ph.Marker.SealedBy}
		o.Phases[ph.ID] = p
	}
	p.Markers++
	o.Markers++
	if p.SealedBy != ph.Marker.SealedBy {
		o.Violations = append(o.Violations, fmt.Errorf("phase %d: partition %d says sealed_by %s, another partition %s", ph.ID, part, ph.Marker.SealedBy, p.SealedBy))
	}
	var sum int64
	for t, n := range ph.Marker.Sources {
		p.Sources[t] += n
		sum += n
	}
	if sum != ph.Marker.Count {
		o.Violations = append(o.Violations, fmt.Errorf("phase %d partition %d: sources add up to %d, count is %d", ph.ID, part, sum, ph.Marker.Count))
	}
	if o.IDs[ph.ID] == nil {
		o.IDs[ph.ID] = map[string]int{}
	}
	for _, rec := range ph.Records {
		p.Records++
		o.Data++
		meta, _ := markers.Inspect(rec.Headers)
		if meta.Marker {
			o.Violations = append(o.Violations, fmt.Errorf("phase %d partition %d offset %d: a marker republished as data", ph.ID, part, rec.Offset))
		}
		o.IDs[ph.ID][string(meta.ID)]++
		src := string(header(rec.Headers, markers.HeaderSource))
		if prev, dup := o.Published[src]; dup {
			o.Violations = append(o.Violations, fmt.Errorf("input record %s published twice (phases %d and %d)", src, prev, ph.ID))
		}
		o.Published[src] = ph.ID
	}
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
