package align

import (
	"slices"
	"testing"
	"time"
)

func TestHolders(t *testing.T) {
	p := func(topic string, wm uint64, ms int64, idle bool) PartitionStatus {
		return PartitionStatus{Topic: topic, Watermark: wm, WatermarkMs: ms, Idle: idle}
	}
	cases := []struct {
		name  string
		parts []PartitionStatus
		want  []int
	}{
		{"none", nil, nil},
		{"one live partition holds nothing back", []PartitionStatus{p("a", 1, 100, false)}, nil},
		{"all level: nobody is behind", []PartitionStatus{p("a", 2, 200, false), p("b", 2, 200, false)}, nil},
		{"the lowest phase holds", []PartitionStatus{p("a", 3, 300, false), p("b", 2, 290, false), p("c", 4, 400, false)}, []int{1}},
		{"same phase: the lower time watermark holds", []PartitionStatus{p("a", 2, 250, false), p("b", 2, 210, false)}, []int{1}},
		{"ties hold together", []PartitionStatus{p("a", 2, 210, false), p("b", 2, 210, false), p("c", 3, 300, false)}, []int{0, 1}},
		{"idle partitions never hold", []PartitionStatus{p("a", 1, 100, true), p("b", 2, 200, false), p("c", 3, 300, false)}, []int{1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Holders(c.parts); !slices.Equal(got, c.want) {
				t.Fatalf("Holders = %v, want %v", got, c.want)
			}
		})
	}
}

// View is a pure copy: asking for it (as /phases does, five times a
// second) consumes no transition that Step reports.
func TestViewChangesNothing(t *testing.T) {
	h := newHarness(t, map[string]int32{"a": 1, "b": 1}, 1)
	h.feed(in{topic: "a", ms: 10})
	h.feed(in{topic: "b", ms: 20})
	h.feed(in{topic: "a", ms: 2000})
	h.caughtUp()
	h.clk.add(1500 * time.Millisecond)
	if st := h.step(); len(st.Idle) != 2 {
		t.Fatalf("Idle = %+v, want both partitions idle", st.Idle)
	}
	h.feed(in{topic: "b", ms: 2100}) // live again: Step reports it, View only shows it
	before := h.s.View()
	for range 5 {
		if v := h.s.View(); v.GlobalWatermark != before.GlobalWatermark || len(v.OpenPhases) != len(before.OpenPhases) {
			t.Fatalf("View changed between calls: %+v then %+v", before, v)
		}
	}
	st := h.step()
	if len(st.Idle) != 1 || st.Idle[0].TP != tp("b", 0) || st.Idle[0].Idle {
		t.Fatalf("Step after View: Idle = %+v, want b/0 live again (View must not consume it)", st.Idle)
	}
}
