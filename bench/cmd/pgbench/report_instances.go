package main

import (
	"fmt"
	"strings"
)

// renderInstances writes the instances step's table: a row per instance
// count, then the recovery of the run that SIGKILLed one instance.
func renderInstances(b *strings.Builder, c config, s *suiteResult) {
	if len(s.Instances) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Instances (issue 11): %s records of %d B, forks of %d + %d partitions, output %d (partition routing: %d tasks), %s phases\n\n",
		thousands(float64(c.Records)), c.InstancesSize, instancesForkParts, instancesForkParts, instancesOutParts,
		min(instancesForkParts, instancesOutParts), c.InstancesPhase)
	b.WriteString("| instances | records/s | steady records/s | time s | CPU s / M records (all instances) | phases | note |\n|---|---|---|---|---|---|---|\n")
	for _, r := range s.Instances {
		b.WriteString(instancesRow(r))
	}
	for _, r := range s.Instances {
		if line := recoveryLine(r); line != "" {
			b.WriteString("\n" + line + "\n")
		}
	}
	b.WriteString(`
Time is from the first input record read by any instance to a read_committed fetch showing the last
phase's marker on every output partition; steady is from the first commit (any instance) to then. CPU
is utime+stime from /proc summed over the instances (a killed one's up to its death, from its rusage).
One broker and every instance share this machine's cores, so total records/s cannot grow with the
instance count here; CPU per million records shows what the extra instances cost. Recovery: the last
instance is SIGKILLed once half the records are out and restarted at once with the same
PHASEGATE_TRANSACTIONAL_ID (= static group.instance.id); "fleet" is restart → the output's last stable
offsets next moving (any instance committed; a survivor may still seal up to the killed tasks' last
report, so this can be near 0), "own" is restart → the restarted instance's first committed data
records (phasegate_records_out_total > 0), "stood still" is the longest gap between moves of the
output's last stable offsets from the kill to the end. All polled every 100 ms.
`)
}

func instancesRow(r *instancesRun) string {
	if r.Err != nil {
		return fmt.Sprintf("| %d | failed | | | | | %s |\n", r.N, oneLine(r.Err))
	}
	note := "output verified"
	if r.Check != nil {
		note = "not verified: " + oneLine(r.Check)
	}
	if r.Recover != nil {
		note = "one SIGKILLed and restarted mid-way; " + note
	}
	rate := thousands(r.rate())
	if !r.ok() {
		rate = "not verified"
	}
	return fmt.Sprintf("| %d | %s | %s | %.1f | %.1f | %d | %s |\n", r.N, rate, thousands(r.Steady), r.Seconds,
		r.CPU/float64(r.Records)*1e6, r.Phases, note)
}

// recoveryLine says what the restart of r's killed instance cost, "" when
// none was killed.
func recoveryLine(r *instancesRun) string {
	rc := r.Recover
	if rc == nil {
		return ""
	}
	return fmt.Sprintf("Recovery (%d instances, %s SIGKILLed and restarted at once): fleet's next commit %s s after the restart, the restarted instance's own first commit %s s after it; the output stood still at most %s s from the kill on.",
		r.N, rc.Instance, secs(rc.FleetS), secs(rc.OwnS), secs(rc.StallS))
}

// secs formats a recovery time to 10 ms ("-" when not seen): the polls run
// every 100 ms, and optS's 0.1 s would show a fast recovery as 0.0.
func secs(s float64) string {
	if s <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", s)
}
