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
