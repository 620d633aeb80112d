package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Version is the "v" of every watermark report this package writes and
// the only one it reads.
const Version = 1

// Report is one record of the watermark topic: what a task's owner knows
// of the task's input (docs/FLEET.md). The key is the task; a report
// replaces the task's previous one (the topic is compacted).
type Report struct {
	Task   int32  // the task (tasks.ID); also the record key
	Layout uint64 // tasks.Layout.Fingerprint of the owner's layout
	// Low is the lowest phase the task's live input partitions have not
	// all passed (the minimum of watermarks' Low over its live partitions);
	// with every partition idle, the minimum over all of them.
	Low uint64
	// LowMs is the task's time watermark (ms) computed the same way from
	// its partitions' time watermarks.
	LowMs int64
	// Idle: every input partition of the task is idle (watermarks'
	// invariant 1); the task then holds no one back.
	Idle bool
	// High is, for an idle task, the phase past which it has nothing: the
	// highest Low of its partitions and past its newest open phase (what
	// the single-instance tracker uses when every partition is idle);
	// High >= Low. Equal to Low for a live task.
	High uint64
	// Marked is at or below the first phase the task's committed output
	// has not marked: the committed global watermark its next owner
	// resumes from. A View forgets a data phase only once it is below
	// every task's Marked (docs/FLEET.md, rule F8). Optional on the wire:
	// 0 when absent.
	Marked uint64
	// Open lists, ascending, the phases for which the task holds data it
	// has not sealed yet. Other tasks learn from it which phases hold data
	// somewhere, so that they write a marker for each of them on their
	// own output partitions (docs/FLEET.md, rule F7). At most MaxOpen.
	Open       []uint64
	Owner      string // the owner instance (its transactional ID)
	Generation int32  // the group generation in which Owner holds the task
	AtMs       int64  // the owner's wall clock when it wrote the report; for operators only
}

// MaxOpen bounds Report.Open: a task holding more open phases reports the
// lowest MaxOpen (the others are reported once those are sealed).
const MaxOpen = 4096

// ErrReport: a key or value that is not a watermark report of this
// version; the concrete error says why.
var ErrReport = errors.New("fleet: malformed watermark report")

// wire is the JSON value, in this field order.
type wire struct {
	V          *int      `json:"v"`
	Task       *int32    `json:"task"`
	Layout     *string   `json:"layout"`
	Low        *uint64   `json:"low"`
	LowMs      *int64    `json:"low_ms"`
	Idle       *bool     `json:"idle"`
	High       *uint64   `json:"high"`
	Marked     uint64    `json:"marked"`
	Open       *[]uint64 `json:"open"`
	Owner      *string   `json:"owner"`
	Generation *int32    `json:"generation"`
	AtMs       *int64    `json:"at_ms"`
}

// AppendKey appends the record key, the task ID in decimal ASCII.
func (r Report) AppendKey(dst []byte) []byte { return strconv.AppendInt(dst, int64(r.Task), 10) }

// AppendValue appends the record value: a JSON object with every field, in
// the order of docs/FLEET.md. Call Validate first for a report that does
// not come from DecodeReport.
func (r Report) AppendValue(dst []byte) []byte {
	v, layout, open := Version, fmt.Sprintf("%016x", r.Layout), r.Open
	if open == nil {
		open = []uint64{} // "open":[], never null
	}
	b, _ := json.Marshal(wire{V: &v, Task: &r.Task, Layout: &layout, Low: &r.Low, LowMs: &r.LowMs, Idle: &r.Idle,
		High: &r.High, Marked: r.Marked, Open: &open, Owner: &r.Owner, Generation: &r.Generation, AtMs: &r.AtMs}) // cannot fail: plain fields
	return append(dst, b...)
}

// Validate reports, wrapping ErrReport, what DecodeReport would reject in
// r's encoding: a negative task, High below Low, a live task with High
// different from Low, Open not strictly ascending or longer than MaxOpen,
// an empty owner.
func (r Report) Validate() error {
	switch {
	case r.Task < 0:
		return fmt.Errorf("%w: task %d is negative", ErrReport, r.Task)
	case r.High < r.Low:
		return fmt.Errorf("%w: high %d below low %d", ErrReport, r.High, r.Low)
	case !r.Idle && r.High != r.Low:
		return fmt.Errorf("%w: a live task's high %d differs from its low %d", ErrReport, r.High, r.Low)
	case r.Owner == "":
		return fmt.Errorf("%w: empty owner", ErrReport)
	case len(r.Open) > MaxOpen:
		return fmt.Errorf("%w: %d open phases, at most %d", ErrReport, len(r.Open), MaxOpen)
	}
	for i := 1; i < len(r.Open); i++ {
		if r.Open[i] <= r.Open[i-1] {
			return fmt.Errorf("%w: open phases are not strictly ascending", ErrReport)
		}
	}
	return nil
}

// DecodeKey reads a record key: a canonical decimal task ID in [0,
// 2147483647].
func DecodeKey(key []byte) (int32, error) {
	bad := len(key) == 0 || len(key) > 10 || len(key) > 1 && key[0] == '0'
	var n int64
	for _, c := range key {
		if c < '0' || c > '9' {
			bad = true
			break
		}
		n = n*10 + int64(c-'0')
	}
	if bad || n > 1<<31-1 {
		return 0, fmt.Errorf("%w: key %q is not a task ID", ErrReport, key)
	}
	return int32(n), nil
}

// DecodeReport reads one record of the watermark topic. A nil value is a
// tombstone: it returns ok false and no error, and the caller forgets the
// task's report. Every field but "marked" is required; unknown fields are
// ignored; the value's task must equal the key's. Errors wrap ErrReport.
// Safe for concurrent use.
func DecodeReport(key, value []byte) (r Report, ok bool, err error) {
	task, err := DecodeKey(key)
	if err != nil {
		return Report{}, false, err
	}
	if value == nil {
		return Report{Task: task}, false, nil
	}
	var w wire
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&w); err != nil {
		return Report{}, false, fmt.Errorf("%w: %v", ErrReport, err)
	}
	if dec.More() {
		return Report{}, false, fmt.Errorf("%w: data after the JSON object", ErrReport)
	}
	missing := ""
	for name, set := range map[string]bool{"v": w.V != nil, "task": w.Task != nil, "layout": w.Layout != nil,
		"low": w.Low != nil, "low_ms": w.LowMs != nil, "idle": w.Idle != nil, "high": w.High != nil,
		"open": w.Open != nil && *w.Open != nil, "owner": w.Owner != nil, "generation": w.Generation != nil, "at_ms": w.AtMs != nil} {
		if !set && (missing == "" || name < missing) {
			missing = name
		}
	}
	switch {
	case missing != "":
		return Report{}, false, fmt.Errorf("%w: %q is required", ErrReport, missing)
	case *w.V != Version:
		return Report{}, false, fmt.Errorf("%w: version %d is not %d", ErrReport, *w.V, Version)
	case *w.Task != task:
		return Report{}, false, fmt.Errorf("%w: value names task %d, key %d", ErrReport, *w.Task, task)
	}
	layout, perr := strconv.ParseUint(*w.Layout, 16, 64)
	if perr != nil || len(*w.Layout) != 16 || fmt.Sprintf("%016x", layout) != *w.Layout {
		return Report{}, false, fmt.Errorf("%w: layout %q is not 16 lower-case hex digits", ErrReport, *w.Layout)
	}
	r = Report{Task: task, Layout: layout, Low: *w.Low, LowMs: *w.LowMs, Idle: *w.Idle, High: *w.High,
		Marked: w.Marked, Open: *w.Open, Owner: *w.Owner, Generation: *w.Generation, AtMs: *w.AtMs}
	if len(r.Open) == 0 {
		r.Open = nil
	}
	if err := r.Validate(); err != nil {
		return Report{}, false, err
	}
	return r, true, nil
}
