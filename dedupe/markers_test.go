package dedupe

import "testing"

func TestMarkers(t *testing.T) {
	a0 := PartitionKey{Topic: "orders", Partition: 0}
	a1 := PartitionKey{Topic: "orders", Partition: 1}
	b0 := PartitionKey{Topic: "payments", Partition: 0}

	type step struct {
		op    string // see, restore
		key   PartitionKey
		phase uint64
		want  MarkerVerdict // for see
	}
	type last struct {
		key   PartitionKey
		phase uint64
		ok    bool
	}
	tests := []struct {
		name  string
		steps []step
		last  []last
	}{
		{
			name:  "first marker is new",
			steps: []step{{op: "see", key: a0, phase: 7, want: MarkerNew}},
			last:  []last{{a0, 7, true}, {a1, 0, false}},
		},
		{
			name:  "first marker for phase zero is new",
			steps: []step{{op: "see", key: a0, phase: 0, want: MarkerNew}, {op: "see", key: a0, phase: 0, want: MarkerRepeat}},
			last:  []last{{a0, 0, true}},
		},
		{
			name: "higher phase is new, same is repeat, lower is stale",
			steps: []step{
				{op: "see", key: a0, phase: 5, want: MarkerNew},
				{op: "see", key: a0, phase: 5, want: MarkerRepeat},
				{op: "see", key: a0, phase: 9, want: MarkerNew},
				{op: "see", key: a0, phase: 5, want: MarkerStale},
				{op: "see", key: a0, phase: 8, want: MarkerStale},
				{op: "see", key: a0, phase: 9, want: MarkerRepeat},
			},
			last: []last{{a0, 9, true}},
		},
		{
			name: "partitions and topics are independent",
			steps: []step{
				{op: "see", key: a0, phase: 5, want: MarkerNew},
				{op: "see", key: a1, phase: 3, want: MarkerNew},
				{op: "see", key: b0, phase: 5, want: MarkerNew},
				{op: "see", key: a1, phase: 5, want: MarkerNew},
				{op: "see", key: b0, phase: 4, want: MarkerStale},
			},
			last: []last{{a0, 5, true}, {a1, 5, true}, {b0, 5, true}},
		},
		{
			name: "restore after restart makes a replayed marker a repeat and an older one stale",
			steps: []step{
				{op: "restore", key: a0, phase: 12},
				{op: "see", key: a0, phase: 12, want: MarkerRepeat},
				{op: "see", key: a0, phase: 11, want: MarkerStale},
				{op: "see", key: a0, phase: 13, want: MarkerNew},
			},
			last: []last{{a0, 13, true}},
		},
		{
			name: "restore overwrites a higher phase",
			steps: []step{
				{op: "see", key: a0, phase: 20, want: MarkerNew},
				{op: "restore", key: a0, phase: 10},
				{op: "see", key: a0, phase: 15, want: MarkerNew},
			},
			last: []last{{a0, 15, true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMarkers()
			for i, s := range tt.steps {
				switch s.op {
				case "see":
					if got := m.See(s.key, s.phase); got != s.want {
						t.Fatalf("step %d: See(%v, %d) = %v, want %v", i, s.key, s.phase, got, s.want)
					}
				case "restore":
					m.Restore(s.key, s.phase)
				default:
					t.Fatalf("step %d: unknown op %q", i, s.op)
				}
			}
			for _, l := range tt.last {
				phase, ok := m.Last(l.key)
				if phase != l.phase || ok != l.ok {
					t.Errorf("Last(%v) = %d, %v; want %d, %v", l.key, phase, ok, l.phase, l.ok)
				}
			}
		})
	}
}

func TestMarkerVerdictString(t *testing.T) {
	tests := []struct {
		v    MarkerVerdict
		want string
	}{
		{MarkerNew, "new"},
		{MarkerRepeat, "repeat"},
		{MarkerStale, "stale"},
		{0, "MarkerVerdict(0)"},
		{42, "MarkerVerdict(42)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.v.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}
