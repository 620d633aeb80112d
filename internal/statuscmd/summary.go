package statuscmd

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/phasegate/phasegate/proxy"
)

// writeSummary prints st's partitions in counts, then the partitions that
// hold the global watermark back and the most lagging ones (at most the
// summary's top of each), and how to see every row.
func writeSummary(w io.Writer, st *proxy.Phases, all bool) error {
	s := st.Summary
	fmt.Fprintf(w, "\nPARTITIONS (%d): %d live, %d paused%s, %d idle\n", s.Partitions, s.Live, s.Paused, fmtReasons(s.PausedBy), s.Idle)
	if s.Partitions == 0 {
		if st.Joined {
			fmt.Fprintln(w, "  none assigned")
		} else {
			fmt.Fprintln(w, "  none: not in the consumer group yet")
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "at the global watermark:\t%d (%d holding it back)\n", s.AtWatermark, s.Holding)
	lag := fmt.Sprintf("%d records on %d partition%s", s.Lag, s.WithLag, plural(s.WithLag))
	if s.LagUnknown > 0 {
		lag += fmt.Sprintf(", unknown on %d", s.LagUnknown)
	}
	fmt.Fprintf(tw, "consumer lag:\t%s\n", lag)
	if s.PauseDeferred > 0 {
		fmt.Fprintf(tw, "pause deferred:\t%d (asked for, not in effect)\n", s.PauseDeferred)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Topics) > 1 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tLIVE\tPAUSED\tIDLE\tLAG\t")
		for _, t := range s.Topics {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", t.Topic, t.Partitions, t.Live, t.Paused, t.Idle, t.Lag)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\nHOLDING THE GLOBAL WATERMARK BACK (%s)\n", fmtShown(len(s.Holders), s.Holding, ""))
	if len(s.Holders) == 0 {
		fmt.Fprintln(w, "  none: no live partition is behind another")
	} else if err := writeRows(w, st, s.Holders, false); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nMOST LAGGING (%s)\n", fmtShown(len(s.MostLagging), s.WithLag, " with lag"))
	if len(s.MostLagging) == 0 {
		fmt.Fprintln(w, "  none: no partition has consumer lag")
	} else if err := writeRows(w, st, s.MostLagging, false); err != nil {
		return err
	}
	if !all {
		fmt.Fprintf(w, "\nevery partition: sidecar status -all (GET %s)\n", proxy.FullListPath)
	}
	return nil
}

// writeRows prints one table row per partition; note marks the holders
// (in the full table, where they are not listed apart).
func writeRows(w io.Writer, st *proxy.Phases, rows []proxy.PartitionStatus, note bool) error {
	if len(rows) == 0 {
		fmt.Fprintln(w, "  none assigned")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tWATERMARK\tAHEAD\tLAG\tIDLE\tPAUSED\tBUFFERED\t")
	for _, p := range rows {
		lag := "?"
		if p.LagKnown {
			lag = strconv.FormatInt(p.Lag, 10)
		}
		paused := "no"
		switch {
		case p.Paused:
			paused = "yes: " + orDash(strings.Join(p.PauseReasons, ","))
		case len(p.PauseReasons) > 0:
			paused = "deferred: " + strings.Join(p.PauseReasons, ",")
		}
		hint := ""
		if note && p.HoldsWatermark {
			hint = "<- slowest: holds the global watermark back"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d rec, %s\t%s\n", p.Topic, p.Partition, p.Watermark,
			fmtLead(p, st), lag, yesNo(p.Idle), paused, p.BufferedRecords, fmtBytes(p.BufferedBytes), hint)
	}
	return tw.Flush()
}

// fmtShown is "n of total<what>", with a hint when some are left out.
func fmtShown(n, total int, what string) string {
	s := fmt.Sprintf("%d of %d%s", n, total, what)
	if n < total {
		s += "; -top n lists more"
	}
	return s
}

// fmtReasons is " (buffer 3, align 1)" for the paused partitions' reasons.
func fmtReasons(by map[string]int) string {
	if len(by) == 0 {
		return ""
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, r+" "+strconv.Itoa(by[r]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
