package watermarks

import (
	"math"
	"testing"
	"time"
)

// TestStraggler: phase 0 opens at t0 on a/0. Each partition passes it
// pass[i] seconds later (-1: never, it is idle when the phase seals at 10s;
// -2: it had passed phase 0 before it opened).
func TestStraggler(t *testing.T) {
	names := []string{"a/0", "a/1", "b/0"}
	tests := []struct {
		name        string
		pass        []int
		wantPer     []time.Duration
		wantTopic   map[string]time.Duration
		wantCV      float64
		wantSlowest P
	}{{
		name:        "slow branch straggles",
		pass:        []int{1, 2, 10},
		wantPer:     []time.Duration{1, 2, 10},
		wantTopic:   map[string]time.Duration{"a": 2, "b": 10},
		wantCV:      4.0 / 6.0, // mean 6s, population stddev 4s
		wantSlowest: 2,
	}, {
		name:        "balanced branches do not",
		pass:        []int{2, 10, 10},
		wantPer:     []time.Duration{2, 10, 10},
		wantTopic:   map[string]time.Duration{"a": 10, "b": 10},
		wantCV:      0,
		wantSlowest: 1,
	}, {
		name:        "idle partition counts until the seal",
		pass:        []int{1, 1, -1},
		wantPer:     []time.Duration{1, 1, 10},
		wantTopic:   map[string]time.Duration{"a": 1, "b": 10},
		wantCV:      4.5 / 5.5,
		wantSlowest: 2,
	}, {
		name:        "passed before the phase opened counts zero",
		pass:        []int{3, 3, -2},
		wantPer:     []time.Duration{3, 3, 0},
		wantTopic:   map[string]time.Duration{"a": 3, "b": 0},
		wantCV:      1,
		wantSlowest: 0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, 0)
			var ps []P
			for _, n := range names {
				p := h.add(n)
				h.tr.Lag(p, 0)
				ps = append(ps, p)
			}
			for i, s := range tt.pass {
				if s == -2 {
					h.at(ps[i], 1500) // Low 1 before phase 0 opens
				}
			}
			h.at(ps[0], 100)
			for sec := 1; sec <= 10; sec++ {
				h.clk.step(time.Second)
				for i, s := range tt.pass {
					if s == sec {
						h.at(ps[i], 1500)
					} else if s > sec {
						h.at(ps[i], 200) // still in phase 0: keeps it live
					}
				}
			}
			seals := h.advance()
			if len(seals) == 0 || seals[0].Phase != 0 { // later phases may seal too: every partition can be idle by 10s
				t.Fatalf("seals = %+v, want phase 0", seals)
			}
			st := seals[0].Stats
			for i, want := range tt.wantPer {
				got := st.PerPartition[i]
				if got.P != ps[i] || got.Duration != want*time.Second {
					t.Errorf("PerPartition[%d] = %+v, want P %d duration %s", i, got, ps[i], want*time.Second)
				}
			}
			if len(st.PerTopic) != len(tt.wantTopic) {
				t.Errorf("PerTopic = %v, want %v", st.PerTopic, tt.wantTopic)
			}
			for topic, want := range tt.wantTopic {
				if st.PerTopic[topic] != want*time.Second {
					t.Errorf("PerTopic[%s] = %s, want %s", topic, st.PerTopic[topic], want*time.Second)
				}
			}
			if math.Abs(st.CV-tt.wantCV) > 1e-9 {
				t.Errorf("CV = %v, want %v", st.CV, tt.wantCV)
			}
			if st.Straggling() != (tt.wantCV > 0.6) {
				t.Errorf("Straggling() = %v with CV %v", st.Straggling(), st.CV)
			}
			if st.Slowest != tt.wantSlowest {
				t.Errorf("Slowest = %d, want %d", st.Slowest, tt.wantSlowest)
			}
		})
	}
}

func TestCV(t *testing.T) {
	tests := []struct {
		name string
		ds   map[string]time.Duration
		want float64
	}{
		{"no topic", nil, 0},
		{"one topic", map[string]time.Duration{"a": time.Second}, 0},
		{"mean zero", map[string]time.Duration{"a": 0, "b": 0}, 0},
		{"equal", map[string]time.Duration{"a": time.Second, "b": time.Second}, 0},
		{"one and three", map[string]time.Duration{"a": time.Second, "b": 3 * time.Second}, 0.5},
		{"three topics", map[string]time.Duration{"a": 2, "b": 4, "c": 6}, math.Sqrt(8.0/3.0) / 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cv(tt.ds); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("cv = %v, want %v", got, tt.want)
			}
		})
	}
}
