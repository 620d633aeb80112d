package statuscmd

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/phasegate/phasegate/proxy"
)

// writeFleet prints the tasks of the group: how many, which this instance
// owns, how many each instance owns, and the live tasks with the lowest
// watermark (with all, every task's row).
func writeFleet(w io.Writer, st *proxy.Phases, all bool) error {
	f := st.Fleet
	fmt.Fprintf(w, "\nTASKS (%d): this instance (%s) owns %d %v", f.Tasks, orDash(st.Instance), len(f.Owned), f.Owned)
	if f.Unreported > 0 {
		fmt.Fprintf(w, "; %d not reported yet (they hold the global watermark)", f.Unreported)
	}
	fmt.Fprintln(w)
	var owners []string
	for _, o := range slices.Sorted(maps.Keys(f.PerOwner)) {
		owners = append(owners, fmt.Sprintf("%s=%d", o, f.PerOwner[o]))
	}
	if len(owners) > 0 {
		fmt.Fprintf(w, "  per owner: %s\n", strings.Join(owners, " "))
	}
	rows, title := f.Lowest, "lowest watermark (live tasks)"
	if all && st.Tasks != nil {
		rows, title = st.Tasks, "every task"
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "  %s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TASK\tOWNER\tGENERATION\tWATERMARK PHASE\tIDLE\tOPEN PHASES\t")
	for _, t := range rows {
		owner := t.Owner
		if !t.Reported {
			owner = "(no report)"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%d\t%s\t%d\t\n", t.Task, owner, t.Generation, t.Low, yesNo(t.Idle), t.Open)
	}
	return tw.Flush()
}
