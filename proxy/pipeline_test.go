package proxy_test

import (
	"testing"
	"time"
)

// Two fork topics with different partition counts, several phases: every
// input is published once, in its phase, with markers on every partition.
func TestPipelineAlignsTwoForks(t *testing.T) {
	e := newEnv(t, map[string]int32{"a": 3, "b": 2}, 4)
	base := phaseBase()
	var recs []rec
	for ph := range 5 {
		for p := range int32(3) {
			recs = append(recs, rec{topic: "a", partition: p, ts: at(base, ph, 10*int(p))})
		}
		for p := range int32(2) {
			recs = append(recs, rec{topic: "b", partition: p, ts: at(base, ph, 5)})
		}
	}
	e.write(recs...)
	e.start()
	out, acc := e.settle(15 * time.Second)
	if acc.Out != len(recs) {
		t.Fatalf("published %d of %d records", acc.Out, len(recs))
	}
	if len(out.Phases) != 5 {
		t.Fatalf("got %d phases, want 5", len(out.Phases))
	}
}
