package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The embedded run shows phases flowing and every failure mode handled:
// the silent partition sealed by idleness, the retry storm dropped as
// duplicates, the late payment quarantined, every record visible.
//
// The demo tests run one after the other: two demos at once on a loaded
// machine starve the feeders, and every phase seals by idleness.
func TestDemoShowsThePhaseTrapHandled(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs for about 10 s")
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--duration", "6s", "--http", "127.0.0.1:0"}, noEnv, &out, &errOut); code != 0 {
		t.Fatalf("demo exit %d: %s", code, errOut.String())
	}
	text := out.String()
	if strings.Contains(text, "VIOLATION") {
		t.Fatalf("the demo's reader saw a violation:\n%s", text)
	}
	if n := strings.Count(text, " visible: "); n < 8 {
		t.Fatalf("%d phases visible, want at least 8:\n%s", n, text)
	}
	for _, want := range []string{"sealed_by=watermark", "sealed_by=idle", "quarantined: 1 (the late payment at 3.75s)",
		"partition 2 goes silent at 1.5s", "a retry storm from 3s to 3.75s; a late payment at 3.75s", "producers feed for 6s"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	checkCounts(t, text, "3s", "3.75s")
	if t.Failed() {
		t.Log(text)
	}
}

// checkCounts wants every order visible and the duplicates dropped equal
// to the retries the storm (between from and to) sent.
func checkCounts(t *testing.T, text, from, to string) {
	t.Helper()
	m := regexp.MustCompile(`orders (\d+) of (\d+) sent, payments (\d+) of (\d+) sent`).FindStringSubmatch(text)
	if m == nil || m[1] != m[2] || m[3] == "0" {
		t.Errorf("not every order visible: %v", m)
	}
	d := regexp.MustCompile(`duplicates dropped: (\d+) \(the retry storm from ` + regexp.QuoteMeta(from) + ` to ` + regexp.QuoteMeta(to) + ` resent (\d+)\)`).FindStringSubmatch(text)
	if d == nil || d[1] != d[2] || d[1] == "0" {
		t.Errorf("duplicates dropped differ from the retries sent: %v", d)
	}
}

// A short run on PHASEGATE_HTTP_ADDR with -hold: the banner and summary
// follow -duration, the live view is served at the address the environment
// names, and stays up after the summary until the run is ended.
func TestDemoHoldsTheLiveViewOnTheEnvironmentsAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs for about 6 s")
	}
	addr := freeAddr(t)
	getenv := func(k string) string {
		if k == "PHASEGATE_HTTP_ADDR" {
			return addr
		}
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-duration", "2s", "-hold"}, getenv, out, io.Discard) }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "holding:") {
		select {
		case code := <-done:
			t.Fatalf("demo ended (exit %d) before holding:\n%s", code, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no summary after 60 s:\n%s", out.String())
		}
	}
	text := out.String()
	for _, want := range []string{"live view: http://" + addr + "/", "partition 2 goes silent at 500ms",
		"a retry storm from 1s to 1.25s; a late payment at 1.25s", "summary of 2s of feeding", "(the late payment at 1.25s)"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	checkCounts(t, text, "1s", "1.25s")
	for _, path := range []string{"/", "/phases", "/readyz"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s after the summary: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s after the summary: %s", path, resp.Status)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after the hold ended, want 0", code)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the demo did not end within 25 s of the end of the hold")
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderrIs string
	}{
		{name: "help", args: []string{"-help"}, code: 0, stdout: "usage: go run ./cmd/demo [-duration 8s] [-http host:port] [-hold]"},
		{name: "--help", args: []string{"--help"}, code: 0, stdout: "-hold"},
		{name: "-h", args: []string{"-h"}, code: 0, stdout: "PHASEGATE_HTTP_ADDR"},
		{name: "too short", args: []string{"-duration", "1s"}, code: 2, stderrIs: "demo: -duration=1s: must be from 2s to 10m\n"},
		{name: "too long", args: []string{"-duration=1h"}, code: 2, stderrIs: "demo: -duration=1h: must be from 2s to 10m\n"},
		{name: "stray argument", args: []string{"now"}, code: 2, stderrIs: "demo: unexpected argument \"now\" (see -help)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, noEnv, &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tt.stdout)
			}
			if stderr.String() != tt.stderrIs {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.stderrIs)
			}
		})
	}
}

func noEnv(string) string { return "" }

// freeAddr is a loopback address with a port free at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
