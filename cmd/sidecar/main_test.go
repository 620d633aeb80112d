package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"github.com/phasegate/phasegate/internal/config"
)

func validEnv() map[string]string {
	return map[string]string{
		"PHASEGATE_BROKERS":      "127.0.0.1:9092",
		"PHASEGATE_INPUT_TOPICS": "orders,payments",
		"PHASEGATE_OUTPUT_TOPIC": "aligned",
	}
}

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
		{[]string{"status", "-help"}, "usage: sidecar status [-addr host:port] [-all] [-top n] [-sealed n] [-timeout d]\n"},
		{[]string{"status", "--help"}, "Prints the phase view of a running sidecar (its /phases) as tables: the partitions summarised\n"},
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
	cfg := config.Config{MaxBufferBytes: 64 << 20}

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

// A configuration that cannot work stops `sidecar` and `sidecar config`
// with exit status 2 and config.Load's one line after "sidecar: ", with
// nothing on stdout; a warning goes to stderr after "sidecar: warning: ".
// One refusal of each kind here (the parse, the checks, the security
// combination, strict unknown variables, the proxy's Validate, a file that
// cannot be read); every line is internal/config's TestRefusals.
func TestConfigLinesReachTheUser(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	tests := []struct {
		name string
		env  map[string]string
		line string
	}{
		{"not a duration", map[string]string{"PHASEGATE_PHASE_LENGTH": "soon"},
			`PHASEGATE_PHASE_LENGTH="soon": not a duration: from 10ms to 1h, such as 500ms, 5s or 1m (each phase costs a transaction, so shorter phases outrun the commits; an open phase's records wait in memory and are re-read after a restart)`},
		{"transaction timeout echoed as written", map[string]string{"PHASEGATE_TRANSACTION_TIMEOUT": "60s"},
			`PHASEGATE_TRANSACTION_TIMEOUT="60s": must be below PHASEGATE_SESSION_TIMEOUT="30s", or the group may move on while a transaction is still open`},
		{"SASL without a user", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SASL_PLAINTEXT"},
			`PHASEGATE_SASL_USERNAME is empty: PHASEGATE_SECURITY_PROTOCOL=SASL_PLAINTEXT needs a user name`},
		{"misspelt variable under strict", map[string]string{"PHASEGATE_BROKER": "kafka:9092", "PHASEGATE_STRICT_CONFIG": "true"},
			`PHASEGATE_BROKER is not a phasegate variable (did you mean PHASEGATE_BROKERS?); PHASEGATE_STRICT_CONFIG=true refuses unknown variables (see sidecar --help for the known ones)`},
		{"output is an input", map[string]string{"PHASEGATE_OUTPUT_TOPIC": "orders"},
			`PHASEGATE_OUTPUT_TOPIC=orders is also an input topic: phasegate would read its own output`},
		{"password file missing", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "PHASEGATE_SASL_USERNAME": "app",
			"PHASEGATE_SASL_PASSWORD_FILE": missing},
			`PHASEGATE_SASL_PASSWORD_FILE="` + missing + `" cannot be read: ` + syscall.ENOENT.Error()},
	}
	for _, tt := range tests {
		for _, args := range [][]string{nil, {"config"}} {
			t.Run(tt.name+" "+strings.Join(args, " "), func(t *testing.T) {
				env := validEnv()
				for k, v := range tt.env {
					env[k] = v
				}
				var stdout, stderr bytes.Buffer
				if code := run(args, env, &stdout, &stderr); code != 2 {
					t.Fatalf("sidecar %v: exit status %d, want 2 (stderr %q)", args, code, stderr.String())
				}
				if want := "sidecar: " + tt.line + "\n"; stderr.String() != want {
					t.Errorf("sidecar %v:\n got %q\nwant %q", args, stderr.String(), want)
				}
				if stdout.Len() != 0 {
					t.Errorf("sidecar %v printed to stdout: %q", args, stdout.String())
				}
			})
		}
	}
	t.Run("warning", func(t *testing.T) {
		env := validEnv()
		env["PHASEGATE_BROKER"] = "x"
		var stdout, stderr bytes.Buffer
		if code := run([]string{"config"}, env, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if want := "sidecar: warning: PHASEGATE_BROKER is not a phasegate variable (did you mean PHASEGATE_BROKERS?): it is ignored (PHASEGATE_STRICT_CONFIG=true makes this an error)\n"; stderr.String() != want {
			t.Errorf("got %q\nwant %q", stderr.String(), want)
		}
	})
}

// Errors of the library packages reach the log without their package
// prefixes, wherever the chain wrapped them.
func TestForUsers(t *testing.T) {
	tests := []struct{ in, want string }{
		{"proxy: consumer group g: txn: fenced: another instance with the same transactional ID took over",
			"consumer group g: fenced: another instance with the same transactional ID took over"},
		{"watermarks: invalid configuration: PHASEGATE_PHASE_LENGTH=0s must be above 0",
			"invalid configuration: PHASEGATE_PHASE_LENGTH=0s must be above 0"},
		{"commit (dedupe: identity bound exceeded)", "commit (identity bound exceeded)"},
		{"kafka: client has run out of available brokers", "kafka: client has run out of available brokers"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := forUsers(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// --help shows the security variables but never a secret's value.
func TestHelpHidesSecrets(t *testing.T) {
	var out bytes.Buffer
	run([]string{"--help"}, map[string]string{"PHASEGATE_SASL_PASSWORD": "hunter2"}, &out, &out)
	if !strings.Contains(out.String(), "PHASEGATE_SASL_PASSWORD_FILE") || strings.Contains(out.String(), "hunter2") {
		t.Fatalf("--help: security variables missing or a secret shown")
	}
}

// sidecar config prints the effective configuration with the password
// redacted.
func TestConfigCommandRedactsSecrets(t *testing.T) {
	env := validEnv()
	env["PHASEGATE_SECURITY_PROTOCOL"] = "SASL_PLAINTEXT"
	env["PHASEGATE_SASL_USERNAME"] = "alice"
	env["PHASEGATE_SASL_PASSWORD"] = "hunter2"
	var out, errOut bytes.Buffer
	if code := run([]string{"config"}, env, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if strings.Contains(out.String(), "hunter2") || !strings.Contains(out.String(), "(redacted)") ||
		!strings.Contains(out.String(), "PHASEGATE_SASL_USERNAME") || !strings.Contains(out.String(), "alice") {
		t.Fatalf("config output:\n%s", out.String())
	}
}
