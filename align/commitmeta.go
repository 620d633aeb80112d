package align

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// commitMeta is what phasegate stores in the metadata of each committed input
// offset, so a restart resumes exactly where the last transaction left off:
//
//		pg1;g=<global>;h=<consumed>;m=<marker>[;i=<last stable offset>]
//
//	  - g: the global watermark (first unsealed phase) after the transaction. A
//	    sealed phase never reopens: the next owner starts its tracker at g.
//	  - h: the partition's consumed position (next offset to read) when the
//	    transaction committed. The committed offset is the first record still
//	    buffered, so records in [offset, h) are read again after a restart;
//	    those of a phase below g, malformed ones and markers were already
//	    resolved (published, quarantined or dropped as duplicates) by a
//	    committed transaction and are not resolved twice.
//	  - m: the highest input marker phase seen on the partition, or "-" for
//	    none, so repeated and stale markers stay recognisable across restarts.
//	  - i: present when the partition was idle when the transaction
//	    committed, with the last stable offset that measured it idle: after
//	    a restart it is idle again as soon as its position is still h and
//	    its last stable offset still i (the gap between them is control
//	    records, proven before), without waiting PHASEGATE_IDLE_TIMEOUT or
//	    the gap's settling time again (watermarks.Tracker.WasIdle).
//	    Earlier versions ignore the field.
type commitMeta struct {
	global    uint64
	consumed  int64
	marker    uint64
	hasMarker bool
	idle      bool
	idleLSO   int64 // valid when idle
}

const commitMetaPrefix = "pg1;"

// errForeignMeta means the committed offset's metadata was not written by
// this version of phasegate.
var errForeignMeta = errors.New("align: offset metadata not written by phasegate v1")

func (m commitMeta) String() string {
	marker := "-"
	if m.hasMarker {
		marker = strconv.FormatUint(m.marker, 10)
	}
	idle := ""
	if m.idle {
		idle = ";i=" + strconv.FormatInt(m.idleLSO, 10)
	}
	return fmt.Sprintf("%sg=%d;h=%d;m=%s%s", commitMetaPrefix, m.global, m.consumed, marker, idle)
}

// parseCommitMeta parses metadata written by String. An empty string (a group
// that phasegate never committed for) is errForeignMeta.
func parseCommitMeta(s string) (commitMeta, error) {
	rest, ok := strings.CutPrefix(s, commitMetaPrefix)
	if !ok {
		return commitMeta{}, errForeignMeta
	}
	var m commitMeta
	seen := 0
	for _, field := range strings.Split(rest, ";") {
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			return commitMeta{}, fmt.Errorf("align: offset metadata %q: field %q has no '='", s, field)
		}
		var err error
		switch k {
		case "g":
			m.global, err = strconv.ParseUint(v, 10, 64)
		case "h":
			m.consumed, err = strconv.ParseInt(v, 10, 64)
		case "m":
			if v != "-" {
				m.marker, err = strconv.ParseUint(v, 10, 64)
				m.hasMarker = true
			}
		case "i": // optional: not counted in seen
			if m.idleLSO, err = strconv.ParseInt(v, 10, 64); err != nil {
				return commitMeta{}, fmt.Errorf("align: offset metadata %q: field i: %w", s, err)
			}
			m.idle = true
			continue
		default:
			continue // later versions may add fields
		}
		if err != nil {
			return commitMeta{}, fmt.Errorf("align: offset metadata %q: field %s: %w", s, k, err)
		}
		seen++
	}
	if seen != 3 {
		return commitMeta{}, fmt.Errorf("align: offset metadata %q: want fields g, h and m", s)
	}
	return m, nil
}

// Newer reports whether s is a later commit of its partition than o: a
// higher offset, or the same offset with a higher g, then a higher h in
// its metadata. Each of the three only grows from one commit of a
// partition to the next, whichever instance made it; the offset alone
// does not order two commits, because it is the first record still
// buffered, and another owner can seal more phases without moving it.
// Metadata that is not phasegate's counts as g 0 and h the offset.
func (s Start) Newer(o Start) bool {
	if s.Offset != o.Offset {
		return s.Offset > o.Offset
	}
	a, b := s.meta(), o.meta()
	if a.global != b.global {
		return a.global > b.global
	}
	return a.consumed > b.consumed
}

// meta is s's metadata, or the metadata of a commit that resolved nothing
// beyond its offset when it is not phasegate's.
func (s Start) meta() commitMeta {
	m, err := parseCommitMeta(s.Metadata)
	if err != nil {
		return commitMeta{consumed: s.Offset}
	}
	return m
}
