package markers

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Checkpoint is where a reader of one output partition commits, and where
// a reader starts again (MARKERS.md section 6): an offset and the commit
// metadata that goes with it. Commit both in one offset commit; give both
// to NewReaderAt.
type Checkpoint struct {
	Offset   int64
	Metadata string
}

// Skip is a phase a Reader handed over without returning it (MARKERS.md
// section 6, rule C4): it started without a checkpoint and cannot prove the
// phase whole. Records is the number of its records the Reader read and
// discarded.
type Skip struct {
	Phase   uint64
	Records int
}

// AppendCheckpointMetadata appends the checkpoint metadata of rule C2 to
// dst: {"phasegate":1,"done":done}, or {"phasegate":1} when hasDone is
// false.
func AppendCheckpointMetadata(dst []byte, done uint64, hasDone bool) []byte {
	dst = append(dst, `{"phasegate":1`...)
	if hasDone {
		dst = append(dst, `,"done":`...)
		dst = strconv.AppendUint(dst, done, 10)
	}
	return append(dst, '}')
}

// ParseCheckpointMetadata reads checkpoint metadata (rule C2): ok is true
// for a JSON object whose "phasegate" is 1, and hasDone when it also has
// "done", an unsigned 64-bit integer. Other fields are ignored, and so is
// one trailing NUL byte (confluent-kafka 2.16.1 commits one). Any other
// string, "" included, is not checkpoint metadata: ok is false. Safe for
// concurrent use.
func ParseCheckpointMetadata(s string) (done uint64, hasDone, ok bool) {
	var version bool
	raw := []byte(strings.TrimSuffix(s, "\x00"))
	if !json.Valid(raw) {
		return 0, false, false
	}
	bad := walkObject("", raw, func(key string, v []byte) *MalformedError {
		switch key {
		case "phasegate":
			if version {
				return malformed(key, "given twice")
			}
			n, err := jsonUint(key, v, 64)
			if err != nil || n != 1 {
				return malformed(key, "is not 1")
			}
			version = true
		case "done":
			if hasDone {
				return malformed(key, "given twice")
			}
			n, err := jsonUint(key, v, 64)
			if err != nil {
				return err
			}
			done, hasDone = n, true
		}
		return nil
	})
	if bad != nil || !version {
		return 0, false, false
	}
	return done, hasDone, true
}

// deliver hands over a complete phase (rule C4): into ready when it is
// provably whole, else as a Skip with its records discarded.
func (r *Reader) deliver(p *Phase) {
	if !r.proving || p.ID >= r.wholeFrom() {
		r.ready = append(r.ready, p)
		return
	}
	// Once a lane of each writer is anchored (complete needs that) a
	// proving reader's wholeFrom is fixed, so skips precede every phase
	// it returns: none is queued in ready now, and the skip is handed
	// over at once.
	r.done, r.hasDone = p.ID, true
	r.skips = append(r.skips, Skip{Phase: p.ID, Records: len(p.Records)})
	clear(p.Records)
}

// wholeFrom is, for a reader proving phases (rule C4), the lowest phase
// from which every lane is known whole: P of rule C5. It is
// math.MaxUint64 while a lane has no marker read.
func (r *Reader) wholeFrom() uint64 {
	switch r.kind {
	case kindOne:
		if r.solo.anchored {
			return r.solo.whole
		}
	case kindSeveral:
		if r.writers == 0 {
			break
		}
		var p uint64
		for task := range r.writers {
			l := r.lanes[task]
			if l == nil || !l.anchored {
				return math.MaxUint64
			}
			p = max(p, l.whole)
		}
		return p
	}
	return math.MaxUint64
}

// Checkpoint returns what to commit for the partition once the caller
// has processed every phase it took from Feed and Next (MARKERS.md
// section 6, rules C1 and C2). ok is false while a reader that started
// without a checkpoint has proven nothing yet (rule C5): commit nothing
// then. Phases still queued for Next are not handed over: the checkpoint
// keeps them ahead of its offset.
func (r *Reader) Checkpoint() (c Checkpoint, ok bool) {
	done, hasDone := r.done, r.hasDone
	if r.proving {
		p := r.wholeFrom()
		if p == math.MaxUint64 || p > 0 && (!hasDone || done < p-1) {
			return Checkpoint{}, false
		}
	}
	off := r.next
	r.eachKept(func(o int64) { off = min(off, o) })
	return Checkpoint{Offset: off, Metadata: string(AppendCheckpointMetadata(nil, done, hasDone))}, true
}

// eachKept calls fn with the lowest offset of each group of records the
// reader keeps: pending data, marked phases waiting for the other
// writers, and complete phases not taken yet.
func (r *Reader) eachKept(fn func(int64)) {
	for _, p := range r.ready {
		fn(phaseLow(p))
	}
	keptLane := func(l *lane) {
		if len(l.done) > 0 {
			fn(phaseLow(l.done[0])) // a lane's records are in offset order
		} else if l.pending {
			fn(l.records[0].Offset)
		}
	}
	keptLane(&r.solo)
	for _, l := range r.lanes {
		keptLane(l)
	}
}

// phaseLow is the lowest offset among a phase's records and markers.
func phaseLow(p *Phase) int64 {
	low := p.MarkerOffset
	if len(p.Records) > 0 {
		low = min(low, p.Records[0].Offset) // in offset order
	}
	for _, m := range p.Markers {
		low = min(low, m.Offset)
	}
	return low
}

// Skipped returns the phases handed over without being returned since the
// last call (rule C4), in increasing order, and forgets them.
func (r *Reader) Skipped() []Skip {
	s := r.skips
	r.skips = nil
	return s
}
