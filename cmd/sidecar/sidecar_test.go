package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/internal/config"
	"github.com/phasegate/phasegate/internal/kafkatest"
)

// The program's whole start (HTTP first, preflight, quarantine topic
// creation, the pipeline) against a broker, then a clean shutdown on cancel.
func TestStartServeAndShutDown(t *testing.T) {
	c, err := kafkatest.Kfake(map[string]int32{"orders": 2, "payments": 1, "aligned": 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := map[string]string{
		"PHASEGATE_BROKERS":         strings.Join(c.ListenAddrs(), ","),
		"PHASEGATE_INPUT_TOPICS":    "orders,payments",
		"PHASEGATE_OUTPUT_TOPIC":    "aligned",
		"PHASEGATE_HTTP_ADDR":       "127.0.0.1:0",
		"PHASEGATE_ROUTING":         "key", // orders 2, payments 1 (routing.go)
		"PHASEGATE_SESSION_TIMEOUT": "6s", "PHASEGATE_TRANSACTION_TIMEOUT": "5s",
	}
	cfg, _, err := config.Load(env)
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
	base := "http://" + srv.Addr()
	if code := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz before start: %d, want 200", code)
	}
	if code := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before start: %d, want 503", code)
	}
	pipe, err := start(ctx, cfg, log, srv, reg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- runPipeline(ctx, pipe, srv, log) }()
	pollUntil(t, 20*time.Second, "/readyz never answered 200", func() bool { return get(t, base+"/readyz") == http.StatusOK })
	for _, path := range []string{"/healthz", "/metrics", "/phases", "/"} {
		if code := get(t, base+path); code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
	}
	// The quarantine topic was created by preflight.
	parts, err := kafkatest.ReadTopic(ctx, c.ListenAddrs(), "aligned.quarantine", true, 100*time.Millisecond)
	if err != nil || len(parts) != 2 {
		t.Fatalf("quarantine topic: %d partitions, %v", len(parts), err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after shutdown: %v", err)
		}
	case <-time.After(shutdownGrace + time.Second):
		t.Fatal("shutdown took longer than the grace period")
	}
}

// get returns the status code of GET url, 0 when it cannot connect.
func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// An HTTP address the sidecar cannot listen on is configuration that
// cannot work: exit status 2 and one ERROR line naming the variable, before
// any broker is asked.
func TestHTTPAddressUnusable(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tests := []struct{ name, addr, line string }{
		{"in use", taken.Addr().String(), `PHASEGATE_HTTP_ADDR="` + taken.Addr().String() + `": cannot listen there (address already in use): use a free port on an address of this host`},
		{"not an address of this host", "192.0.2.1:9464", `PHASEGATE_HTTP_ADDR="192.0.2.1:9464": cannot listen there (cannot assign requested address): use a free port on an address of this host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := validEnv()
			env["PHASEGATE_HTTP_ADDR"] = tt.addr
			env["PHASEGATE_LOG_FORMAT"] = "json"
			var out bytes.Buffer
			if code := run(nil, env, &out, &out); code != 2 {
				t.Fatalf("exit %d, want 2:\n%s", code, out.String())
			}
			var errs []string
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var ll struct{ Level, Msg string }
				if json.Unmarshal([]byte(l), &ll) == nil && ll.Level == "ERROR" {
					errs = append(errs, ll.Msg)
				}
			}
			if len(errs) != 1 || errs[0] != tt.line {
				t.Errorf("ERROR lines %q, want %q", errs, tt.line)
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
