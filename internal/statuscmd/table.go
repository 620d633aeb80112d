package statuscmd

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/phasegate/phasegate/proxy"
)

// printStatus writes st as the terminal's phase view: the process, the
// partitions summarised (counts, holders of the global watermark, the most
// lagging), every partition's row when all is set, then open phases and the
// last sealed phases (newest first, at most sealed of them). Ages are
// relative to st.Updated, so the output depends on st alone.
func printStatus(out io.Writer, base string, st *proxy.Phases, sealed int, all bool) error {
	var b bytes.Buffer
	if err := writeStatus(&b, base, st, sealed, all); err != nil {
		return err
	}
	// tabwriter pads the last cell of a row too; drop that padding.
	for line := range strings.Lines(b.String()) {
		if _, err := io.WriteString(out, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func writeStatus(w io.Writer, base string, st *proxy.Phases, sealed int, all bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "phasegate at %s, as of %s\n", base, fmtStamp(st.Updated))
	fmt.Fprintf(tw, "in group:\t%s, ready: %s\n", yesNo(st.Joined), yesNo(st.Ready))
	fmt.Fprintf(tw, "global watermark:\tphase %d (event time %s)\n", st.GlobalWatermark, fmtMs(st.GlobalMs))
	last := "none yet"
	if st.LastSealed != nil {
		last = "phase " + strconv.FormatUint(*st.LastSealed, 10)
	}
	fmt.Fprintf(tw, "last sealed:\t%s\n", last)
	fmt.Fprintf(tw, "buffered:\t%s of %s (peak %s)\n", fmtBytes(st.BufferedBytes), fmtBytes(st.MaxBufferBytes), fmtBytes(st.PeakBufferedBytes))
	fmt.Fprintf(tw, "seal timeout:\t%s\n", orDash(st.SealTimeout))
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeSummary(w, st, all); err != nil {
		return err
	}
	if err := writeFleet(w, st, all); err != nil {
		return err
	}
	if all {
		fmt.Fprintf(w, "\nALL PARTITIONS (%d)\n", len(st.Partitions))
		if err := writeRows(w, st, st.Partitions, true); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\nOPEN PHASES (%d)\n", len(st.OpenPhases))
	if len(st.OpenPhases) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PHASE\tRECORDS\tBYTES\tOPEN FOR\t")
		for _, o := range st.OpenPhases {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t\n", o.Phase, o.Records, fmtBytes(o.Bytes), st.Updated.Sub(o.Opened).Round(time.Millisecond))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	shown := st.Sealed[max(0, len(st.Sealed)-max(sealed, 0)):]
	fmt.Fprintf(w, "\nLAST SEALED PHASES (%d of %d kept, newest first)\n", len(shown), len(st.Sealed))
	if len(shown) == 0 {
		fmt.Fprintln(w, "  none yet")
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tSEALED BY\tRECORDS\tPER TOPIC\tTOOK\tCV\tSLOWEST PARTITION\tSEALED AT\t")
	for i := len(shown) - 1; i >= 0; i-- {
		s := shown[i]
		took := time.Duration(s.Duration * float64(time.Second)).Round(time.Millisecond)
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%.2f\t%s\t%s\t\n", s.Phase, s.SealedBy, s.Records, fmtPerTopic(s.PerTopic),
			took, s.CV, orDash(s.Straggler), fmtStamp(s.Sealed))
	}
	return tw.Flush()
}

// fmtLead is how far p's watermark is ahead of the global one: in event
// time when both have a time watermark, else in phases.
func fmtLead(p proxy.PartitionStatus, st *proxy.Phases) string {
	if p.WatermarkMs > 0 && st.GlobalMs > 0 {
		d := time.Duration(p.WatermarkMs-st.GlobalMs) * time.Millisecond
		if d > 0 {
			return "+" + d.String()
		}
		return d.String()
	}
	d := int64(p.Watermark - st.GlobalWatermark) // two's complement: behind is negative
	return fmt.Sprintf("%+d ph", d)
}

func fmtPerTopic(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, t+"="+strconv.Itoa(m[t]))
	}
	return strings.Join(parts, " ")
}

func fmtBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n), ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f, unit = f/1024, u
		if f < 1024 {
			break
		}
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + unit
}

func fmtStamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func fmtMs(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return fmtStamp(time.UnixMilli(ms))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
