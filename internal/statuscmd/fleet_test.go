package statuscmd

import (
	"strings"
	"testing"

	"github.com/phasegate/phasegate/proxy"
)

// sidecar status prints the fleet: the tasks this instance owns, the
// count per owner, the lowest tasks, and every task with -all.
func TestWriteFleet(t *testing.T) {
	st := &proxy.Phases{Instance: "pg-a", Tasks: []proxy.TaskStatus{
		{Task: 0, Owner: "pg-a", Mine: true, Reported: true, Low: 12},
		{Task: 1, Owner: "pg-b", Reported: true, Low: 10, Generation: 4},
		{Task: 2},
	}}
	st.Fleet = proxy.FleetSummary{Tasks: 3, Owned: []int32{0}, PerOwner: map[string]int{"pg-a": 1, "pg-b": 1}, Unreported: 1,
		Lowest: []proxy.TaskStatus{st.Tasks[1]}}
	cases := []struct {
		all        bool
		want, none []string
	}{
		{false, []string{"TASKS (3): this instance (pg-a) owns 1 [0]; 1 not reported yet", "per owner: pg-a=1 pg-b=1", "lowest watermark", "1     pg-b"}, []string{"(no report)"}},
		{true, []string{"every task", "(no report)", "0     pg-a"}, []string{"lowest watermark"}},
	}
	for _, c := range cases {
		var b strings.Builder
		if err := writeFleet(&b, st, c.all); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("all=%v: no %q in\n%s", c.all, w, b.String())
			}
		}
		for _, n := range c.none {
			if strings.Contains(b.String(), n) {
				t.Errorf("all=%v: %q in\n%s", c.all, n, b.String())
			}
		}
	}
}
