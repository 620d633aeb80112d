package align

import (
	"errors"
	"testing"
)

func TestCommitMetaRoundTrip(t *testing.T) {
	cases := []commitMeta{
		{global: 0, consumed: 0},
		{global: 1733140800, consumed: 123456, marker: 1733140799, hasMarker: true},
		{global: ^uint64(0), consumed: 1<<62 + 5, marker: 0, hasMarker: true},
		{global: 7, consumed: 9, idle: true, idleLSO: 11},
	}
	for _, want := range cases {
		t.Run(want.String(), func(t *testing.T) {
			got, err := parseCommitMeta(want.String())
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("round trip: got %+v, want %+v", got, want)
			}
		})
	}
}

func TestParseCommitMetaRejects(t *testing.T) {
	cases := []struct {
		name, in string
		foreign  bool
	}{
		{"empty: never committed by phasegate", "", true},
		{"another tool's metadata", "checkpoint-7", true},
		{"missing field", "pg1;g=1;h=2", false},
		{"bad number", "pg1;g=x;h=2;m=-", false},
		{"no equals", "pg1;g;h=2;m=-", false},
		{"negative global", "pg1;g=-1;h=2;m=-", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseCommitMeta(c.in)
			if err == nil {
				t.Fatalf("parseCommitMeta(%q) accepted", c.in)
			}
			if errors.Is(err, errForeignMeta) != c.foreign {
				t.Fatalf("parseCommitMeta(%q) = %v, foreign=%v", c.in, err, c.foreign)
			}
		})
	}
}

// TestStartNewer: which of two commits of one partition a new session
// starts from (proxy prefers what it committed itself only when Newer).
func TestStartNewer(t *testing.T) {
	at := func(off int64, meta string) Start { return Start{TP: TP{"in", 0}, Offset: off, Metadata: meta} }
	tests := []struct {
		name string
		s, o Start
		want bool
	}{
		{"a higher offset is newer", at(11, "pg1;g=5;h=11;m=-"), at(10, "pg1;g=9;h=12;m=-"), true},
		{"a lower offset is older", at(10, "pg1;g=9;h=12;m=-"), at(11, "pg1;g=5;h=11;m=-"), false},
		// The issue: an owner's own commit at offset 10 with g=5, while the
		// task's next owner sealed phases 5 to 7 from the same offset and
		// committed g=8. The returning owner must start from g=8.
		{"same offset: a higher g is newer", at(10, "pg1;g=8;h=14;m=-"), at(10, "pg1;g=5;h=14;m=-"), true},
		{"same offset: a lower g is older", at(10, "pg1;g=5;h=14;m=-"), at(10, "pg1;g=8;h=14;m=-"), false},
		{"same offset and g: a higher h is newer", at(10, "pg1;g=5;h=15;m=-"), at(10, "pg1;g=5;h=14;m=-"), true},
		{"the same commit is not newer", at(10, "pg1;g=5;h=14;m=-"), at(10, "pg1;g=5;h=14;m=-"), false},
		{"phasegate metadata is newer than none at one offset", at(10, "pg1;g=1;h=10;m=-"), at(10, ""), true},
		{"foreign metadata counts as g 0", at(10, "other"), at(10, "pg1;g=0;h=10;m=-"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Newer(tt.o); got != tt.want {
				t.Errorf("%+v.Newer(%+v) = %v, want %v", tt.s, tt.o, got, tt.want)
			}
		})
	}
}

// i=1 is optional: metadata without it (an earlier version's) parses as
// not idle, and an earlier version's parser, which skips unknown fields,
// reads the rest unchanged.
func TestCommitMetaIdle(t *testing.T) {
	for _, c := range []struct {
		in   string
		idle bool
		lso  int64
	}{
		{"pg1;g=1;h=2;m=-", false, 0},
		{"pg1;g=1;h=2;m=-;i=3", true, 3},
		{"pg1;g=1;h=2;m=-;i=0", true, 0},
	} {
		m, err := parseCommitMeta(c.in)
		if err != nil || m.idle != c.idle || m.idleLSO != c.lso || m.global != 1 || m.consumed != 2 {
			t.Errorf("parseCommitMeta(%q) = %+v, %v; want idle %v at %d", c.in, m, err, c.idle, c.lso)
		}
	}
	if _, err := parseCommitMeta("pg1;g=1;h=2;m=-;i=x"); err == nil {
		t.Error("i=x parsed")
	}
}
