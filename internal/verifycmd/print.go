package verifycmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/phasegate/phasegate/internal/verify"
)

// printer writes what `sidecar verify` found: violations as they are
// found, the phase table (spooled to a temporary file while the read runs,
// so that memory stays bounded and it comes after the violations), the
// histograms and the summary. With --json every item is one JSON object
// per line, in the order found.
type printer struct {
	w          *bufio.Writer
	json       bool
	spool      *os.File // text mode: the phase table so far
	table      *bufio.Writer
	rows       int64
	violations int
	err        error // the first write error of the spool
}

func newPrinter(w io.Writer, asJSON bool) *printer {
	p := &printer{w: bufio.NewWriter(w), json: asJSON}
	if !asJSON {
		f, err := os.CreateTemp("", "phasegate-verify-*.txt")
		if err != nil {
			p.err = err
		} else {
			_ = os.Remove(f.Name()) // unlinked: gone when closed, whatever happens
			p.spool, p.table = f, bufio.NewWriter(f)
		}
	}
	return p
}

func (p *printer) violation(v verify.Violation) {
	p.violations++
	if p.json {
		p.object("violation", map[string]any{"partition": v.Partition, "offset": v.Offset, "phase": v.Phase,
			"rule": v.Rule, "detail": v.Detail, "do": v.Do()})
		return
	}
	fmt.Fprintln(p.w, v.String())
	p.w.Flush() // a violation is news: show it at once
}

func (p *printer) phase(s *verify.PhaseSummary) {
	if p.json {
		parts := make([]map[string]any, 0, len(s.Partitions))
		for _, pp := range s.Partitions {
			row := map[string]any{"partition": pp.Partition, "records": pp.Records, "marker": pp.Marker}
			if pp.Marker {
				row["offset"], row["count"], row["sealed_by"], row["sources"] = pp.MarkerOffset, pp.Count, pp.SealedBy, pp.Sources
			}
			if pp.OutOfRange {
				row["out_of_range"] = true
			}
			parts = append(parts, row)
		}
		p.object("phase", map[string]any{"phase": s.ID, "records": s.Records, "sealed_by": s.SealedBy, "partitions": parts})
		return
	}
	if p.table == nil {
		return
	}
	for _, pp := range s.Partitions {
		p.rows++
		count, sealed, sources := "-", "-", ""
		switch {
		case pp.Marker:
			count, sealed, sources = strconv.FormatInt(pp.Count, 10), string(pp.SealedBy), formatSources(pp.Sources)
		case pp.OutOfRange:
			sources = "(not in the range read)"
		default:
			sources = "(no marker)"
		}
		fmt.Fprintf(p.table, "%12d %9d %9d %9s  %-9s  %s\n", s.ID, pp.Partition, pp.Records, count, sealed, sources)
	}
}

func formatSources(m map[string]int64) string {
	var b strings.Builder
	for i, t := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t + "=" + strconv.FormatInt(m[t], 10))
	}
	return b.String()
}

func (p *printer) object(kind string, v map[string]any) {
	b, _ := json.Marshal(map[string]any{kind: v})
	p.w.Write(b)
	p.w.WriteByte('\n')
}

// summary prints the table, the histograms and the verdict, and flushes.
func (p *printer) summary(v *verifier, rep *verify.Report, acc *verify.Accounting) {
	defer p.w.Flush()
	el := v.took
	rate := float64(rep.Stats.Records) / max(el.Seconds(), 1e-9)
	verdict := verdictOf(rep, acc)
	if p.json {
		s := map[string]any{"topic": v.o.topic, "verdict": verdict, "records": rep.Stats.Records, "data": rep.Stats.Data,
			"markers": rep.Stats.Markers, "phases": rep.Stats.Phases, "phases_with_data": rep.Stats.PhasesWithData,
			"violations": rep.Stats.Violations, "lead_in": rep.Stats.LeadIn, "lead_out": rep.Stats.LeadOut,
			"unchecked_open_phases": rep.Unchecked, "interrupted": rep.Interrupted, "seconds": el.Seconds(),
			"records_per_second": rate, "partitions": rep.Partitions, "sources": rep.Sources}
		if acc != nil {
			s["inputs"] = map[string]any{"in": acc.In, "out": acc.Out, "quarantined": acc.Quarantined, "duplicates": acc.Duplicates,
				"markers_in": acc.Markers, "reasons": acc.Reasons, "violations": errorStrings(acc.Violations)}
		}
		p.object("summary", s)
		return
	}
	fmt.Fprintf(p.w, "\nphases of %s (one row per partition)\n", v.o.topic)
	fmt.Fprintf(p.w, "%12s %9s %9s %9s  %-9s  %s\n", "PHASE", "PARTITION", "RECORDS", "MARKER", "SEALED_BY", "SOURCES (marker)")
	if p.table != nil {
		p.table.Flush()
		if _, err := p.spool.Seek(0, io.SeekStart); err == nil {
			_, _ = io.Copy(p.w, p.spool)
		}
		p.spool.Close()
	} else if p.err != nil {
		fmt.Fprintf(p.w, "(no table: %v)\n", p.err)
	}
	for _, h := range rep.Sources {
		writeHistograms(p.w, h)
	}
	if acc != nil {
		fmt.Fprintf(p.w, "\ninputs %s: %s\n", strings.Join(v.o.inputs, ","), acc)
		for _, e := range acc.Violations {
			fmt.Fprintf(p.w, "input accounting: %v\n", e)
		}
	}
	fmt.Fprintf(p.w, "\n%s: %d partitions, %d records read (%d data, %d markers", v.o.topic, len(rep.Partitions), rep.Stats.Records, rep.Stats.Data, rep.Stats.Markers)
	if rep.Stats.LeadIn > 0 || rep.Stats.LeadOut > 0 {
		fmt.Fprintf(p.w, "; not checked: %d up to and including the first marker of a range starting mid-log, %d after the last marker of a range ending mid-phase", rep.Stats.LeadIn, rep.Stats.LeadOut)
	}
	fmt.Fprintf(p.w, ") in %s, %.0f records/s; %d phases checked (%d with data)", el.Round(time.Millisecond), rate, rep.Stats.Phases, rep.Stats.PhasesWithData)
	if rep.Interrupted {
		fmt.Fprintf(p.w, "; interrupted: %d open phases not checked", rep.Unchecked)
	}
	fmt.Fprintf(p.w, "; %d violations: %s\n", rep.Stats.Violations, verdict)
}

func verdictOf(rep *verify.Report, acc *verify.Accounting) string {
	switch {
	case rep.Stats.Violations > 0 || (acc != nil && len(acc.Violations) > 0):
		return "NOT WHOLE"
	case rep.Interrupted:
		return "INTERRUPTED (whole so far)"
	}
	return "WHOLE"
}

func errorStrings(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

// writeHistograms prints one source topic's two histograms with bars.
func writeHistograms(w io.Writer, h *verify.SourceHistograms) {
	fmt.Fprintf(w, "\nsource %s: %d phases, %d records, longest phase %s\n", h.Topic, h.Phases, h.Records, h.MaxDuration)
	writeHistogram(w, "phase duration", h.DurationsMs, "ms")
	writeHistogram(w, "records per phase", h.RecordsByPhase, "")
}

func writeHistogram(w io.Writer, title string, h verify.Histogram, unit string) {
	first, last, peak := -1, -1, int64(0)
	for i, n := range h.Counts {
		if n > 0 {
			if first < 0 {
				first = i
			}
			last = i
			peak = max(peak, n)
		}
	}
	fmt.Fprintf(w, "  %-22s %8s\n", title, "phases")
	if first < 0 {
		return
	}
	for i := first; i <= last; i++ {
		label := "> " + formatBound(h.Bounds[len(h.Bounds)-1]) + unit
		if i < len(h.Bounds) {
			label = "<= " + formatBound(h.Bounds[i]) + unit
		}
		fmt.Fprintf(w, "  %-22s %8d %s\n", label, h.Counts[i], strings.Repeat("#", int((h.Counts[i]*40+peak-1)/peak)))
	}
}

func formatBound(b float64) string { return strconv.FormatFloat(b, 'f', -1, 64) }
