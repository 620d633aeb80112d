package main

import (
	"bytes"
	"strings"
	"testing"
)

func validEnv() map[string]string {
	return map[string]string{
		"PHASEGATE_BROKERS":      "127.0.0.1:9092",
		"PHASEGATE_INPUT_TOPICS": "orders,payments",
		"PHASEGATE_OUTPUT_TOPIC": "aligned",
	}
}

// Bad configuration stops the program before it connects: exit status 2 and
// one line naming the variable, its value and what is allowed.
func TestBadConfigurationExits2NamingTheVariable(t *testing.T) {
	cases := []struct {
		name, key, value, want string
	}{
		{"brokers empty", "PHASEGATE_BROKERS", "", "PHASEGATE_BROKERS"},
		{"brokers missing", "PHASEGATE_BROKERS", "\x00unset", "PHASEGATE_BROKERS"},
		{"broker without port", "PHASEGATE_BROKERS", "kafka", "PHASEGATE_BROKERS"},
		{"inputs missing", "PHASEGATE_INPUT_TOPICS", "\x00unset", "PHASEGATE_INPUT_TOPICS"},
		{"output missing", "PHASEGATE_OUTPUT_TOPIC", "\x00unset", "PHASEGATE_OUTPUT_TOPIC"},
		{"output is an input", "PHASEGATE_OUTPUT_TOPIC", "orders", "PHASEGATE_OUTPUT_TOPIC"},
		{"phase length not a duration", "PHASEGATE_PHASE_LENGTH", "soon", "PHASEGATE_PHASE_LENGTH"},
		{"phase length zero", "PHASEGATE_PHASE_LENGTH", "0s", "PHASEGATE_PHASE_LENGTH"},
		{"idle timeout negative", "PHASEGATE_IDLE_TIMEOUT", "-1s", "PHASEGATE_IDLE_TIMEOUT"},
		{"buffer not a number", "PHASEGATE_MAX_BUFFER_BYTES", "lots", "PHASEGATE_MAX_BUFFER_BYTES"},
		{"buffer zero", "PHASEGATE_MAX_BUFFER_BYTES", "0", "PHASEGATE_MAX_BUFFER_BYTES"},
		{"routing unknown", "PHASEGATE_ROUTING", "random", "PHASEGATE_ROUTING"},
		{"seal policy unknown", "PHASEGATE_SEAL_POLICY", "maybe", "PHASEGATE_SEAL_POLICY"},
		{"seal timeout bounds crossed", "PHASEGATE_SEAL_TIMEOUT_MIN", "10m", "PHASEGATE_SEAL_TIMEOUT_MIN"},
		{"transaction timeout above session", "PHASEGATE_TRANSACTION_TIMEOUT", "1m", "PHASEGATE_TRANSACTION_TIMEOUT"},
		{"kafka version too old", "PHASEGATE_KAFKA_VERSION", "0.10.0", "PHASEGATE_KAFKA_VERSION"},
		{"log level unknown", "PHASEGATE_LOG_LEVEL", "loud", "PHASEGATE_LOG_LEVEL"},
		{"log format unknown", "PHASEGATE_LOG_FORMAT", "xml", "PHASEGATE_LOG_FORMAT"},
		{"dedupe ids zero", "PHASEGATE_DEDUPE_IDS", "0", "PHASEGATE_DEDUPE_IDS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := validEnv()
			if c.value == "\x00unset" {
				delete(env, c.key)
			} else {
				env[c.key] = c.value
			}
			var stdout, stderr bytes.Buffer
			code := run(nil, env, &stdout, &stderr)
			if code != 2 {
				t.Fatalf("exit status %d, want 2 (stderr %q)", code, stderr.String())
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) {
				t.Fatalf("stderr %q: want one line naming %s", msg, c.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := loadConfig(validEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QuarantineTopic != "aligned.quarantine" || cfg.GroupID != "phasegate" ||
		!strings.HasPrefix(cfg.TransactionalID, "phasegate-") || cfg.MaxBufferBytes != 268435456 ||
		cfg.IdleTimeout.String() != "5s" || cfg.PhaseLength.String() != "1s" || cfg.HTTPAddr != ":9464" {
		t.Fatalf("defaults differ from DESIGN.md: %+v", cfg)
	}
}

// --help lists every variable with its default.
func TestHelpListsEveryVariable(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, nil, &out, &out); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	for _, v := range []string{"PHASEGATE_BROKERS", "PHASEGATE_INPUT_TOPICS", "PHASEGATE_OUTPUT_TOPIC", "PHASEGATE_QUARANTINE_TOPIC",
		"PHASEGATE_GROUP_ID", "PHASEGATE_TRANSACTIONAL_ID", "PHASEGATE_PHASE_LENGTH", "PHASEGATE_MAX_OUT_OF_ORDERNESS",
		"PHASEGATE_IDLE_TIMEOUT", "PHASEGATE_MAX_BUFFER_BYTES", "PHASEGATE_ROUTING", "PHASEGATE_HTTP_ADDR"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("--help does not list %s", v)
		}
	}
	if !strings.Contains(out.String(), "268435456") {
		t.Errorf("--help does not show defaults")
	}
}
