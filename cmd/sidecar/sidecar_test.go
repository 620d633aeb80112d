package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/internal/kafkatest"
)

// The program's whole start (preflight, quarantine topic creation, the
// pipeline, HTTP) against a broker, then a clean shutdown on cancel.
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
		"PHASEGATE_SESSION_TIMEOUT": "6s", "PHASEGATE_TRANSACTION_TIMEOUT": "5s",
	}
	cfg, err := loadConfig(env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.run() }()
	base := "http://" + s.ln.Addr().String()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never answered 200: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, path := range []string{"/healthz", "/metrics", "/phases", "/"} {
		resp, err := http.Get(base + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", path, err, resp)
		}
		resp.Body.Close()
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
	case <-time.After(shutdownGrace):
		t.Fatal("shutdown took longer than the grace period")
	}
	s.close()
}
