//go:build e2e

package e2e

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// R2's judge: what the output holds, read independently, against what
// each reader printed across its kills (docs/CONSUMING.md, MARKERS.md
// section 6). It needs no broker; TestR2Judge runs it on made-up runs.

// phaseKey is one phase of one output partition.
type phaseKey struct {
	part  int32
	phase uint64
}

func (k phaseKey) String() string { return fmt.Sprintf("phase=%d partition=%d", k.phase, k.part) }

// truePhase is a phase as markers.Reader returns it reading the partition
// from offset 0: the part of a reader's line it fixes, and where its
// records (data and every writer's marker) lie.
type truePhase struct {
	rest        string // "records=R sources=S marker_count=C sealed_by=B"
	records     int
	first, last int64 // lowest and highest offset of its records and markers
}

// lastMarkers is, per partition and per writer (task, -1 on a one-writer
// partition), the offset of the writer's last marker.
type lastMarkers map[int32]map[int32]int64

// truthOf reads every partition from offset 0 with markers.Reader; an
// error names each broken rule.
func truthOf(parts [][]*kgo.Record) (map[phaseKey]truePhase, lastMarkers, error) {
	truth := map[phaseKey]truePhase{}
	last := lastMarkers{}
	var errs []string
	for p, recs := range parts {
		rd := markers.NewReader(int32(p))
		take := func(ph *markers.Phase, err error) {
			for _, v := range markers.Violations(err) {
				errs = append(errs, fmt.Sprintf("partition %d: %v", p, v))
			}
			for ; ph != nil; ph = rd.Next() {
				tp := truePhase{records: len(ph.Records), first: ph.MarkerOffset, last: ph.MarkerOffset}
				src := map[string]int{}
				for _, r := range ph.Records {
					tp.first, tp.last = min(tp.first, r.Offset), max(tp.last, r.Offset)
					topic := ""
					for _, h := range r.Headers {
						if string(h.Key) == markers.HeaderSource {
							topic, _, _, _ = markers.ParseSource(h.Value)
						}
					}
					src[topic]++
				}
				if last[int32(p)] == nil {
					last[int32(p)] = map[int32]int64{}
				}
				if len(ph.Markers) == 0 {
					last[int32(p)][-1] = ph.MarkerOffset
				}
				for _, m := range ph.Markers {
					tp.first, tp.last = min(tp.first, m.Offset), max(tp.last, m.Offset)
					last[int32(p)][m.Marker.Task] = m.Offset
				}
				var ss []string
				for _, topic := range slices.Sorted(maps.Keys(src)) {
					ss = append(ss, topic+":"+strconv.Itoa(src[topic]))
				}
				tp.rest = fmt.Sprintf("records=%d sources=%s marker_count=%d sealed_by=%s",
					len(ph.Records), strings.Join(ss, ","), ph.Marker.Count, ph.Marker.SealedBy)
				truth[phaseKey{int32(p), ph.ID}] = tp
			}
		}
		for _, r := range recs {
			take(rd.Feed(markers.Record{Key: r.Key, Value: r.Value, Headers: toMarkerHeaders(r.Headers), Offset: r.Offset}))
		}
		take(nil, rd.End())
	}
	if len(errs) > 0 {
		return truth, last, fmt.Errorf("%d violations reading the output from offset 0:\n%s", len(errs), strings.Join(errs[:min(len(errs), maxShown)], "\n"))
	}
	return truth, last, nil
}

// midStart is where a group whose offsets were set by hand, with no
// metadata, started (rule C4), and the output's writers' last markers.
type midStart struct {
	at   map[int32]int64
	last lastMarkers
}

func toMarkerHeaders(hs []kgo.RecordHeader) []markers.Header {
	out := make([]markers.Header, len(hs))
	for i, h := range hs {
		out[i] = markers.Header{Key: []byte(h.Key), Value: h.Value}
	}
	return out
}

// groupCommit is a reader group's commit of one partition, read with
// kadm FetchOffsets right after a reader was killed.
type groupCommit struct {
	offset   int64
	metadata string
}

// readerRun is one process of a reader: the lines it printed, in order,
// and how it ended.
type readerRun struct {
	lines  []string // phase, skipped and VIOLATION lines
	killed bool     // SIGKILLed by the test
	// after is the group's commits read right after the kill (killed
	// runs only), by partition.
	after  map[int32]groupCommit
	code   int    // exit status; -1 when killed by a signal
	ok     bool   // the status is what the reader should end with
	stderr string // the file its stderr went to
}

// readerVerdict counts what a reader group printed and lists what is
// wrong with it.
type readerVerdict struct {
	lines, repeats, skips, kills int
	pending                      int // phases waiting on writers with no marker after a hand-set start
	errs                         []string
}

func (v *readerVerdict) errorf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Sprintf(format, args...))
}

var skipLine = regexp.MustCompile(`^skipped phase=(\d+) partition=(\d+) records=(\d+)$`)

// parseLine splits a reader's line: a phase line (key and the rest the
// truth fixes), a skipped line (key and records), else ok is false.
func parseLine(l string) (k phaseKey, rest string, skipped bool, records int, ok bool) {
	if m := phaseLine.FindStringSubmatch(l); m != nil {
		ph, err1 := strconv.ParseUint(m[1], 10, 64)
		p, err2 := strconv.ParseInt(m[2], 10, 32)
		return phaseKey{int32(p), ph}, fmt.Sprintf("records=%s sources=%s marker_count=%s sealed_by=%s", m[3], m[4], m[5], m[6]),
			false, 0, err1 == nil && err2 == nil
	}
	if m := skipLine.FindStringSubmatch(l); m != nil {
		ph, err1 := strconv.ParseUint(m[1], 10, 64)
		p, err2 := strconv.ParseInt(m[2], 10, 32)
		n, err3 := strconv.Atoi(m[3])
		return phaseKey{int32(p), ph}, "", true, n, err1 == nil && err2 == nil && err3 == nil
	}
	return phaseKey{}, "", false, 0, false
}

// judge checks a reader group's runs against the truth.
//
// In a group that started with no commit (from offset 0) and was killed
// and restarted: every printed phase equals the truth (none short);
// nothing is skipped; no run prints a phase twice; after a kill, the
// restarted reader prints no phase at or below the "done" the group had
// committed for its partition (those were handed over and committed), and
// a phase above it may come again (printed, not yet committed: rule C6);
// every commit read after a kill lies at or before every record of every
// phase above its "done" (rule C1: else the restarted reader returns that
// phase short); every phase of the truth is printed.
//
// mid, when set, is the start of a group whose offsets were set by hand
// with no metadata (rule C4): phases may then be skipped, never also
// printed, and a phase whose records all lie before the start may be
// absent.
func judge(truth map[phaseKey]truePhase, runs []*readerRun, mid *midStart) readerVerdict {
	var v readerVerdict
	printed := map[phaseKey]int{} // over all runs
	skipped := map[phaseKey]bool{}
	var prev *readerRun
	for i, run := range runs {
		if run.killed {
			v.kills++
		}
		if !run.ok {
			v.errorf("run %d ended with status %d by itself (%s: %s)", i+1, run.code, run.stderr, lastLine(run.stderr))
		}
		this := map[phaseKey]bool{}
		for _, l := range run.lines {
			if strings.HasPrefix(l, "VIOLATION") {
				v.errorf("run %d: %s", i+1, l)
				continue
			}
			k, rest, skip, n, ok := parseLine(l)
			if !ok {
				v.errorf("run %d: cannot read the line %q", i+1, l)
				continue
			}
			tp, known := truth[k]
			if this[k] {
				v.errorf("run %d handed %s over twice: %q", i+1, k, l)
			}
			this[k] = true
			if skip {
				v.skips++
				skipped[k] = true
				switch {
				case mid == nil:
					v.errorf("run %d skipped %s, but it started at offset 0 or at a checkpoint with metadata: %q", i+1, k, l)
				case !known:
					v.errorf("run %d skipped %s, which the output does not hold", i+1, k)
				case n > tp.records:
					v.errorf("run %d skipped %s with %d records read; the phase has %d", i+1, k, n, tp.records)
				}
				continue
			}
			v.lines++
			switch {
			case !known:
				v.errorf("run %d printed %s, which the output does not hold: %q", i+1, k, l)
			case rest != tp.rest:
				v.errorf("run %d printed %s %s; the output holds %s", i+1, k, rest, tp.rest)
			}
			if printed[k] > 0 {
				v.repeats++
			}
			printed[k]++
			if prev != nil && prev.after != nil {
				if c, ok := prev.after[k.part]; ok {
					if done, hasDone, meta := parseCommitted(c.metadata); meta && hasDone && k.phase <= done {
						v.errorf("run %d printed %s again after a restart; the group had committed offset %d with %q (run %d printed it %d times before)",
							i+1, k, c.offset, c.metadata, i, printed[k]-1)
					}
				}
			}
		}
		if run.after != nil {
			for p, c := range run.after {
				done, hasDone, meta := parseCommitted(c.metadata)
				if !meta {
					v.errorf("after run %d the group's commit of partition %d is offset %d with metadata %q: no checkpoint metadata", i+1, p, c.offset, c.metadata)
					continue
				}
				for k, tp := range truth {
					if k.part == p && (!hasDone || k.phase > done) && tp.first < c.offset {
						v.errorf("after run %d the group's commit of partition %d is offset %d with %q, past a record of %s at offset %d (rule C1: a resumed reader returns it short or not at all)",
							i+1, p, c.offset, c.metadata, k, tp.first)
					}
				}
			}
		}
		prev = run
	}
	var missing []string
	pending := map[int32][]string{} // by partition: phases waiting on writers silent after the start
	for _, k := range slices.SortedFunc(maps.Keys(truth), func(a, b phaseKey) int {
		return cmp.Or(cmp.Compare(a.part, b.part), cmp.Compare(a.phase, b.phase))
	}) {
		if printed[k] > 0 && skipped[k] {
			v.errorf("%s was both printed and skipped", k)
		}
		if printed[k] > 0 || skipped[k] {
			continue
		}
		if mid != nil {
			if start, ok := mid.at[k.part]; ok && truth[k].last < start {
				continue // every record of it lies before the start
			}
			if silent := mid.silent(k.part); len(silent) > 0 {
				pending[k.part] = append(pending[k.part], k.String())
				continue
			}
		}
		missing = append(missing, k.String())
	}
	if len(missing) > 0 {
		v.errorf("%d phases of the output never printed%s: %s", len(missing),
			map[bool]string{true: " nor skipped", false: ""}[mid != nil], strings.Join(missing[:min(len(missing), 10)], ", "))
	}
	for _, p := range slices.Sorted(maps.Keys(pending)) {
		ks := pending[p]
		v.pending += len(ks)
		v.errorf("%d phases of partition %d, with records after the start offset %d, never printed nor skipped: writers %s wrote their last marker before the start, so no record after it completes these phases (rule M8), and a reader hands over complete phases only (C4); it reports nothing of the records it read (%s ... %s)",
			len(ks), p, mid.at[p], mid.silentString(p), ks[0], ks[len(ks)-1])
	}
	return v
}

// silent is the writers of partition p whose last marker lies before the
// start.
func (m *midStart) silent(p int32) []int32 {
	var out []int32
	for _, task := range slices.Sorted(maps.Keys(m.last[p])) {
		if m.last[p][task] < m.at[p] {
			out = append(out, task)
		}
	}
	return out
}

func (m *midStart) silentString(p int32) string {
	var ss []string
	for _, task := range m.silent(p) {
		ss = append(ss, fmt.Sprintf("%d (last marker at offset %d)", task, m.last[p][task]))
	}
	return strings.Join(ss, ", ")
}

// lastLine is the last line of file path, or why it cannot be read.
func lastLine(path string) string {
	if path == "" {
		return "no stderr kept"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), 1)
}

// parseCommitted reads committed checkpoint metadata as the readers do
// (docs/CONSUMING.md): one trailing NUL dropped, which confluent-kafka
// 2.16.1 (the Python reader's client) commits after the metadata.
func parseCommitted(md string) (done uint64, hasDone, ok bool) {
	return markers.ParseCheckpointMetadata(strings.TrimSuffix(md, "\x00"))
}

// summary is a verdict's counts for the scenario's line.
func (v readerVerdict) summary() string {
	return fmt.Sprintf("lines=%d repeats=%d skips=%d kills=%d errors=%d", v.lines, v.repeats, v.skips, v.kills, len(v.errs))
}
