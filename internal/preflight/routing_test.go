package preflight

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/internal/config"
)

// Partition routing over fork topics of different partition counts is
// refused unless overridden; everything else starts.
func TestCheckRouting(t *testing.T) {
	uneven := map[string]int{"orders": 3, "payments": 2}
	cases := []struct {
		name       string
		inputs     []string
		counts     map[string]int
		routing    align.Routing
		allowSplit bool
		refused    bool
	}{
		{"partition, uneven: refused", []string{"orders", "payments"}, uneven, align.RoutePartition, false, true},
		{"partition, uneven, third topic even with the first: refused", []string{"orders", "refunds", "payments"},
			map[string]int{"orders": 3, "refunds": 3, "payments": 2}, align.RoutePartition, false, true},
		{"partition, uneven, overridden", []string{"orders", "payments"}, uneven, align.RoutePartition, true, false},
		{"key, uneven", []string{"orders", "payments"}, uneven, align.RouteKey, false, false},
		{"partition, even", []string{"orders", "payments"}, map[string]int{"orders": 4, "payments": 4}, align.RoutePartition, false, false},
		{"partition, one topic", []string{"orders"}, map[string]int{"orders": 3}, align.RoutePartition, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkRouting(c.inputs, c.counts, c.routing, c.allowSplit)
			if !c.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a configuration error", err)
			}
			msg := err.Error()
			want := []string{"PHASEGATE_ROUTING=\"partition\"", "PHASEGATE_ROUTING=key", "PHASEGATE_ALLOW_SPLIT_KEYS=true"}
			for _, tp := range c.inputs {
				want = append(want, fmt.Sprintf("%s: %d", tp, c.counts[tp]))
			}
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q: %s", w, msg)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("message spans lines: %q", msg)
			}
		})
	}
}
