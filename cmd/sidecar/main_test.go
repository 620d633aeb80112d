package main

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// Every command answers --help and -h with its own usage on stdout and
// exit status 0, without reading the environment.
func TestEveryCommandAnswersHelp(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "phasegate sidecar: keeps a Kafka fork-join pipeline in phase."},
		{[]string{"-h"}, "PHASEGATE_STRICT_CONFIG"},
		{[]string{"help"}, "go run ./cmd/demo"},
		{[]string{"config", "--help"}, "usage: sidecar config"},
		{[]string{"config", "-h"}, "Checks the PHASEGATE_* environment"},
		{[]string{"healthcheck", "--help"}, "usage: sidecar healthcheck"},
		{[]string{"healthcheck", "-h"}, "For container health checks"},
		{[]string{"status", "--help"}, "usage: sidecar status"},
		{[]string{"status", "-h"}, "-addr string"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, map[string]string{"PHASEGATE_HTTP_ADDR": "nonsense"}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d, want 0; stderr %q", code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("stdout lacks %q:\n%s", tt.want, stdout.String())
			}
			if stderr.Len() != 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
		})
	}
}

// --help lists every variable with its default.
func TestHelpListsEveryVariable(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, nil, &out, &out); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	for _, v := range knownVariables() {
		if !strings.Contains(out.String(), v+" ") {
			t.Errorf("--help does not list %s", v)
		}
	}
	if !strings.Contains(out.String(), "268435456") {
		t.Errorf("--help does not show defaults")
	}
}

// The demo left the sidecar: asking for it says where it went.
func TestDemoIsItsOwnCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"demo"}, nil, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if want := "sidecar: the demo is its own command now, so that the sidecar carries no test broker: go run ./cmd/demo (or make demo)\n"; stderr.String() != want {
		t.Errorf("got %q, want %q", stderr.String(), want)
	}
}

func TestLimitMemoryIsTwiceTheBoundPlusHeadroomUnlessGOMEMLIMIT(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	log := slog.New(slog.DiscardHandler)
	cfg := Config{MaxBufferBytes: 64 << 20}

	debug.SetMemoryLimit(1 << 40)
	limitMemory(map[string]string{"GOMEMLIMIT": "1GiB"}, cfg, log)
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Fatalf("with GOMEMLIMIT set: limit %d, want it left at %d", got, int64(1<<40))
	}
	limitMemory(map[string]string{}, cfg, log)
	if got, want := debug.SetMemoryLimit(-1), int64(176<<20); got != want {
		t.Fatalf("limit %d MiB for a 64 MiB bound, want %d MiB", got>>20, want>>20)
	}
}
