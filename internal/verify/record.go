package verify

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/phasegate/phasegate/markers"
)

// Record is one record of the topic being verified, as any Kafka client
// reads it. A nil Key is a null key. The Checker keeps Key, Value and
// Headers until the record's phase is closed: do not reuse their buffers.
type Record struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []markers.Header
}

// Topic-wide rules, which no single partition's reader can see. The
// partition rules are the markers.ViolationKind names (count-mismatch,
// phase-backwards, data-after-marker, missing-marker, malformed,
// duplicate-id, and any kind markers.Reader learns later).
const (
	// RuleMarkerNotEverywhere: a phase holds data on some partition and
	// has no marker on this one (MARKERS.md 3.2: a marker on EVERY
	// partition).
	RuleMarkerNotEverywhere = "marker-not-on-every-partition"
	// RuleDuplicateAcross: one phasegate.id on two partitions in one phase.
	RuleDuplicateAcross = "duplicate-id"
	// RulePublishedTwice: one input record (phasegate.source) in two
	// phases (only checked with Config.KeepSources).
	RulePublishedTwice = "published-twice"
)

// Violation is one broken rule, found at one place of the topic.
type Violation struct {
	Partition int32
	Offset    int64 // the record that revealed it; -1 when none
	Phase     uint64
	Rule      string // a markers.ViolationKind name or one of the Rule constants
	Detail    string
}

// String is the one line `sidecar verify` prints for v:
//
//	partition 1 offset 7 phase 3 data-after-marker: <detail>; do: <advice>
func (v Violation) String() string {
	var b strings.Builder
	b.WriteString("partition ")
	b.WriteString(strconv.FormatInt(int64(v.Partition), 10))
	b.WriteString(" offset ")
	if v.Offset < 0 {
		b.WriteString("-")
	} else {
		b.WriteString(strconv.FormatInt(v.Offset, 10))
	}
	b.WriteString(" phase ")
	b.WriteString(strconv.FormatUint(v.Phase, 10))
	b.WriteString(" ")
	b.WriteString(v.Rule)
	b.WriteString(": ")
	b.WriteString(v.Detail)
	b.WriteString("; do: ")
	b.WriteString(v.Do())
	return b.String()
}

// Error makes a Violation usable as an error.
func (v Violation) Error() string { return v.String() }

// Do is what the join team should do about v: which results to distrust
// and where to look.
func (v Violation) Do() string {
	switch v.Rule {
	case markers.CountMismatch.String():
		return "do not trust this phase's join results on this partition; records were lost or added after phasegate wrote it: look for another producer writing to this topic"
	case markers.DataAfterMarker.String():
		return "the record is not part of any whole phase; another producer (not phasegate) wrote it, or the join read with read_uncommitted: find the writer by this offset"
	case markers.MissingMarker.String():
		return "this phase is torn: do not join it; if the topic is still being written, verify again later, else a producer wrote without phasegate"
	case markers.PhaseBackwards.String():
		return "two writers on one partition, or an unfenced restart: give every phasegate instance its own stable PHASEGATE_TRANSACTIONAL_ID"
	case markers.DuplicateID.String():
		return "the join counts this record twice: check the producer's retries and PHASEGATE_DEDUPE_PHASES / PHASEGATE_DEDUPE_IDS"
	case markers.Malformed.String():
		return "this record was not written by phasegate (wire format v1): find its producer; a join must skip it"
	case RuleMarkerNotEverywhere:
		return "this phase is not whole on this partition: do not join it; check that phasegate owns every partition of this topic"
	case RulePublishedTwice:
		return "an input record was published in two phases: the join counts it twice; report it to the phasegate maintainers with both offsets"
	}
	return "see docs/MARKERS.md for rule " + v.Rule
}

// fromMarkers turns a markers.Reader violation into a Violation.
func fromMarkers(mv *markers.Violation) Violation {
	v := Violation{Partition: mv.Partition, Offset: mv.Offset, Phase: mv.Phase, Rule: mv.Kind.String()}
	switch mv.Kind {
	case markers.CountMismatch:
		v.Detail = fmt.Sprintf("the marker counts %d data records, %d came before it", mv.Want, mv.Got)
	case markers.MissingMarker:
		v.Detail = fmt.Sprintf("%d data records of phase %d and no marker for it (%s)", mv.Got, mv.Phase, mv.Detail)
	case markers.DataAfterMarker:
		v.Detail = fmt.Sprintf("a data record of phase %d after the marker for phase %d", mv.Phase, mv.Prior)
	case markers.PhaseBackwards:
		v.Detail = fmt.Sprintf("phase %d after phase %d (%s)", mv.Phase, mv.Prior, mv.Detail)
	default:
		v.Detail = mv.Detail
		if mv.Err != nil {
			if v.Detail != "" {
				v.Detail += ": "
			}
			v.Detail += strings.TrimPrefix(mv.Err.Error(), "markers: ")
		}
	}
	return v
}
