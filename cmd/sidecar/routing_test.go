package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/phasegate/phasegate/internal/config"
	"github.com/phasegate/phasegate/internal/kafkatest"
)

// Partition routing over fork topics of different partition counts is
// refused unless overridden; everything else starts.
func TestCheckRouting(t *testing.T) {
	uneven := map[string]int{"orders": 3, "payments": 2}
	cases := []struct {
		name       string
		inputs     []string
		counts     map[string]int
		routing    string
		allowSplit bool
		refused    bool
	}{
		{"partition, uneven: refused", []string{"orders", "payments"}, uneven, "partition", false, true},
		{"partition, uneven, third topic even with the first: refused", []string{"orders", "refunds", "payments"},
			map[string]int{"orders": 3, "refunds": 3, "payments": 2}, "partition", false, true},
		{"partition, uneven, overridden", []string{"orders", "payments"}, uneven, "partition", true, false},
		{"key, uneven", []string{"orders", "payments"}, uneven, "key", false, false},
		{"partition, even", []string{"orders", "payments"}, map[string]int{"orders": 4, "payments": 4}, "partition", false, false},
		{"partition, one topic", []string{"orders"}, map[string]int{"orders": 3}, "partition", false, false},
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

// Against a broker: the default refuses the demo's topology (orders 3,
// payments 2) with exit status 2 and one line before consuming anything;
// key routing and the override start.
func TestRoutingRefusedAtStart(t *testing.T) {
	c, err := kafkatest.Kfake(map[string]int32{"orders": 3, "payments": 2, "aligned": 3, "aligned.quarantine": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := func(extra ...string) map[string]string {
		e := map[string]string{
			"PHASEGATE_BROKERS":         strings.Join(c.ListenAddrs(), ","),
			"PHASEGATE_INPUT_TOPICS":    "orders,payments",
			"PHASEGATE_OUTPUT_TOPIC":    "aligned",
			"PHASEGATE_HTTP_ADDR":       "127.0.0.1:0",
			"PHASEGATE_SESSION_TIMEOUT": "6s", "PHASEGATE_TRANSACTION_TIMEOUT": "5s",
		}
		for i := 0; i < len(extra); i += 2 {
			e[extra[i]] = extra[i+1]
		}
		return e
	}
	t.Run("default refused, exit 2", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run(nil, env(), &stdout, &stderr)
		var errs []string
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(l, "level=ERROR") {
				errs = append(errs, l)
			}
		}
		if code != 2 || len(errs) != 1 || !strings.Contains(errs[0], "orders: 3, payments: 2") {
			t.Fatalf("exit %d, error lines %q: want 2 and one error line naming both topics' partition counts", code, errs)
		}
	})
	for _, c := range []struct{ name, key, value string }{
		{"key routing starts", "PHASEGATE_ROUTING", "key"},
		{"override starts", "PHASEGATE_ALLOW_SPLIT_KEYS", "true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _, err := config.Load(env(c.key, c.value))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			srv, reg, err := listen(cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			pipe, err := start(ctx, cfg, log, srv, reg)
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			cancel()
			if err := runPipeline(ctx, pipe, srv, log); err != nil {
				t.Fatalf("run after cancel: %v", err)
			}
		})
	}
}
