package config

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phasegate/phasegate/tasks"
)

func validEnv() map[string]string {
	return map[string]string{
		"PHASEGATE_BROKERS":      "127.0.0.1:9092",
		"PHASEGATE_INPUT_TOPICS": "orders,payments",
		"PHASEGATE_OUTPUT_TOPIC": "aligned",
	}
}

// unset marks a variable the case removes from validEnv.
const unset = "\x00unset"

// refusals is every configuration the sidecar refuses before it connects:
// exit status 2 and exactly this one line on stderr.
func refusals() []struct {
	name string
	env  map[string]string
	line string
} {
	return []struct {
		name string
		env  map[string]string
		line string
	}{
		{"brokers missing", map[string]string{"PHASEGATE_BROKERS": unset},
			`PHASEGATE_BROKERS is not set: it is required (see sidecar --help)`},
		{"brokers empty", map[string]string{"PHASEGATE_BROKERS": ""},
			`PHASEGATE_BROKERS is empty: it is required (see sidecar --help)`},
		{"broker without port", map[string]string{"PHASEGATE_BROKERS": "kafka"},
			`PHASEGATE_BROKERS="kafka": "kafka" is not host:port: want host:port[,host:port...], such as kafka:9092`},
		{"broker port not a number", map[string]string{"PHASEGATE_BROKERS": "kafka:notaport"},
			`PHASEGATE_BROKERS="kafka:notaport": "kafka:notaport" has no port from 1 to 65535: want host:port[,host:port...], such as kafka:9092`},
		{"broker port out of range", map[string]string{"PHASEGATE_BROKERS": "kafka:9092,kafka2:70000"},
			`PHASEGATE_BROKERS="kafka:9092,kafka2:70000": "kafka2:70000" has no port from 1 to 65535: want host:port[,host:port...], such as kafka:9092`},
		{"broker without host", map[string]string{"PHASEGATE_BROKERS": ":9092"},
			`PHASEGATE_BROKERS=":9092": ":9092" has no host: want host:port[,host:port...], such as kafka:9092`},
		{"broker host with a space", map[string]string{"PHASEGATE_BROKERS": "my kafka:9092"},
			`PHASEGATE_BROKERS="my kafka:9092": "my kafka:9092": "my kafka" is not a host name or IP address: want host:port[,host:port...], such as kafka:9092`},
		{"stray comma in brokers", map[string]string{"PHASEGATE_BROKERS": "kafka:9092,"},
			`PHASEGATE_BROKERS="kafka:9092,": an empty broker address (a stray comma?): want host:port[,host:port...], such as kafka:9092`},
		{"inputs missing", map[string]string{"PHASEGATE_INPUT_TOPICS": unset},
			`PHASEGATE_INPUT_TOPICS is not set: it is required (see sidecar --help)`},
		{"output missing", map[string]string{"PHASEGATE_OUTPUT_TOPIC": unset},
			`PHASEGATE_OUTPUT_TOPIC is not set: it is required (see sidecar --help)`},
		{"illegal input topic", map[string]string{"PHASEGATE_INPUT_TOPICS": "bad topic!"},
			`PHASEGATE_INPUT_TOPICS="bad topic!": "bad topic!" is not a legal Kafka topic name: use 1 to 249 of a-z A-Z 0-9 . _ - (and not "." or "..")`},
		{"input topic with a space after the comma", map[string]string{"PHASEGATE_INPUT_TOPICS": "orders, payments"},
			`PHASEGATE_INPUT_TOPICS="orders, payments": " payments" is not a legal Kafka topic name: use 1 to 249 of a-z A-Z 0-9 . _ - (and not "." or "..")`},
		{"input topic dot-dot", map[string]string{"PHASEGATE_INPUT_TOPICS": "orders,.."},
			`PHASEGATE_INPUT_TOPICS="orders,..": ".." is not a legal Kafka topic name: use 1 to 249 of a-z A-Z 0-9 . _ - (and not "." or "..")`},
		{"output topic too long", map[string]string{"PHASEGATE_OUTPUT_TOPIC": strings.Repeat("a", 250)},
			`PHASEGATE_OUTPUT_TOPIC="` + strings.Repeat("a", 250) + `": "` + strings.Repeat("a", 250) + `" is not a legal Kafka topic name: use 1 to 249 of a-z A-Z 0-9 . _ - (and not "." or "..")`},
		{"default quarantine name too long", map[string]string{"PHASEGATE_OUTPUT_TOPIC": strings.Repeat("a", 240)},
			`PHASEGATE_OUTPUT_TOPIC="` + strings.Repeat("a", 240) + `": the quarantine topic's name "` + strings.Repeat("a", 240) + `.quarantine" (<output>.quarantine) is not a legal Kafka topic name: use 1 to 249 of a-z A-Z 0-9 . _ - (and not "." or ".."); set PHASEGATE_QUARANTINE_TOPIC`},
		{"illegal quarantine topic", map[string]string{"PHASEGATE_QUARANTINE_TOPIC": "late/records"},
			`PHASEGATE_QUARANTINE_TOPIC="late/records": "late/records" is not a legal Kafka topic name: use 1 to 249 of a-z A-Z 0-9 . _ - (and not "." or "..")`},
		{"output is an input", map[string]string{"PHASEGATE_OUTPUT_TOPIC": "orders"},
			`PHASEGATE_OUTPUT_TOPIC=orders is also an input topic: phasegate would read its own output`},
		{"input named twice", map[string]string{"PHASEGATE_INPUT_TOPICS": "orders,orders"},
			`PHASEGATE_INPUT_TOPICS=orders,orders: topic "orders" named twice`},
		{"HTTP address without port", map[string]string{"PHASEGATE_HTTP_ADDR": "nonsense"},
			`PHASEGATE_HTTP_ADDR="nonsense": want [host]:port with a port from 0 to 65535, such as :9464 or 127.0.0.1:9464`},
		{"HTTP port out of range", map[string]string{"PHASEGATE_HTTP_ADDR": ":99999"},
			`PHASEGATE_HTTP_ADDR=":99999": want [host]:port with a port from 0 to 65535, such as :9464 or 127.0.0.1:9464`},
		{"phase length not a duration", map[string]string{"PHASEGATE_PHASE_LENGTH": "soon"},
			`PHASEGATE_PHASE_LENGTH="soon": not a duration: from 10ms to 1h, such as 500ms, 5s or 1m (each phase costs a transaction, so shorter phases outrun the commits; an open phase's records wait in memory and are re-read after a restart)`},
		{"phase length 10000h", map[string]string{"PHASEGATE_PHASE_LENGTH": "10000h"},
			`PHASEGATE_PHASE_LENGTH="10000h": must be from 10ms to 1h, such as 500ms, 5s or 1m (each phase costs a transaction, so shorter phases outrun the commits; an open phase's records wait in memory and are re-read after a restart)`},
		{"phase length zero", map[string]string{"PHASEGATE_PHASE_LENGTH": "0s"},
			`PHASEGATE_PHASE_LENGTH="0s": must be from 10ms to 1h, such as 500ms, 5s or 1m (each phase costs a transaction, so shorter phases outrun the commits; an open phase's records wait in memory and are re-read after a restart)`},
		{"phase length not whole milliseconds", map[string]string{"PHASEGATE_PHASE_LENGTH": "1000500us"},
			`PHASEGATE_PHASE_LENGTH="1000500us": must be a whole number of milliseconds (markers carry phases in milliseconds)`},
		{"out-of-orderness of an hour with 1s phases", map[string]string{"PHASEGATE_MAX_OUT_OF_ORDERNESS": "1h"},
			`PHASEGATE_MAX_OUT_OF_ORDERNESS="1h": must be below PHASEGATE_PHASE_LENGTH="1s": a bound of a phase or more holds every phase open until the next one has passed`},
		{"out-of-orderness equal to the phase", map[string]string{"PHASEGATE_PHASE_LENGTH": "500ms", "PHASEGATE_MAX_OUT_OF_ORDERNESS": "0.5s"},
			`PHASEGATE_MAX_OUT_OF_ORDERNESS="0.5s": must be below PHASEGATE_PHASE_LENGTH="500ms": a bound of a phase or more holds every phase open until the next one has passed`},
		{"out-of-orderness negative", map[string]string{"PHASEGATE_MAX_OUT_OF_ORDERNESS": "-1ms"},
			`PHASEGATE_MAX_OUT_OF_ORDERNESS="-1ms": must be from 0s to 1h, such as 500ms, 5s or 1m (and below PHASEGATE_PHASE_LENGTH)`},
		{"idle timeout negative", map[string]string{"PHASEGATE_IDLE_TIMEOUT": "-1s"},
			`PHASEGATE_IDLE_TIMEOUT="-1s": must be 0 (strict: never idle) or from 100ms to 1h, such as 500ms, 5s or 1m (shorter, a partition between two fetches looks idle; longer, the last phases wait hours to seal)`},
		{"idle timeout 1ms", map[string]string{"PHASEGATE_IDLE_TIMEOUT": "1ms"},
			`PHASEGATE_IDLE_TIMEOUT="1ms": must be 0 (strict: never idle) or from 100ms to 1h, such as 500ms, 5s or 1m (shorter, a partition between two fetches looks idle; longer, the last phases wait hours to seal)`},
		{"seal timeout bounds crossed", map[string]string{"PHASEGATE_SEAL_TIMEOUT_MIN": "10m"},
			`PHASEGATE_SEAL_TIMEOUT_MIN="10m": must not be above PHASEGATE_SEAL_TIMEOUT_MAX="5m"`},
		{"seal timeout max of a week", map[string]string{"PHASEGATE_SEAL_TIMEOUT_MAX": "168h"},
			`PHASEGATE_SEAL_TIMEOUT_MAX="168h": must be from 1s to 24h, such as 500ms, 5s or 1m (it decides when a late phase is counted or sealed: shorter, every hiccup counts; longer, it never fires)`},
		{"transaction timeout echoed as written", map[string]string{"PHASEGATE_TRANSACTION_TIMEOUT": "60s"},
			`PHASEGATE_TRANSACTION_TIMEOUT="60s": must be below PHASEGATE_SESSION_TIMEOUT="30s", or the group may move on while a transaction is still open`},
		{"transaction timeout of 23h", map[string]string{"PHASEGATE_TRANSACTION_TIMEOUT": "23h", "PHASEGATE_SESSION_TIMEOUT": "24h"},
			`PHASEGATE_TRANSACTION_TIMEOUT="23h": must be from 1s to 1h, such as 500ms, 5s or 1m (the broker aborts a transaction older than this: shorter, one slow commit aborts; also below PHASEGATE_SESSION_TIMEOUT and the brokers' transaction.max.timeout.ms)`},
		{"transaction timeout of 100ms", map[string]string{"PHASEGATE_TRANSACTION_TIMEOUT": "100ms"},
			`PHASEGATE_TRANSACTION_TIMEOUT="100ms": must be from 1s to 1h, such as 500ms, 5s or 1m (the broker aborts a transaction older than this: shorter, one slow commit aborts; also below PHASEGATE_SESSION_TIMEOUT and the brokers' transaction.max.timeout.ms)`},
		{"session timeout of 2h", map[string]string{"PHASEGATE_SESSION_TIMEOUT": "2h"},
			`PHASEGATE_SESSION_TIMEOUT="2h": must be from 1s to 1h, such as 500ms, 5s or 1m (the brokers' group.min.session.timeout.ms and group.max.session.timeout.ms (by default 6s and 30m) must allow it too)`},
		{"buffer not a number", map[string]string{"PHASEGATE_MAX_BUFFER_BYTES": "lots"},
			`PHASEGATE_MAX_BUFFER_BYTES="lots": not a whole number: from 1048576 to 1099511627776 (bytes of records held in memory; the process needs up to twice this plus 64 MiB, more below 256 KiB a partition)`},
		{"buffer zero", map[string]string{"PHASEGATE_MAX_BUFFER_BYTES": "0"},
			`PHASEGATE_MAX_BUFFER_BYTES="0": must be from 1048576 to 1099511627776 (bytes of records held in memory; the process needs up to twice this plus 64 MiB, more below 256 KiB a partition)`},
		{"dedupe IDs of two billion", map[string]string{"PHASEGATE_DEDUPE_IDS": "2000000000"},
			`PHASEGATE_DEDUPE_IDS="2000000000": must be from 1 to 67108864 (identities remembered, 16 bytes each plus map overhead, in memory beyond PHASEGATE_MAX_BUFFER_BYTES)`},
		{"dedupe IDs zero", map[string]string{"PHASEGATE_DEDUPE_IDS": "0"},
			`PHASEGATE_DEDUPE_IDS="0": must be from 1 to 67108864 (identities remembered, 16 bytes each plus map overhead, in memory beyond PHASEGATE_MAX_BUFFER_BYTES)`},
		{"dedupe phases of a trillion", map[string]string{"PHASEGATE_DEDUPE_PHASES": "999999999999"},
			`PHASEGATE_DEDUPE_PHASES="999999999999": must be from 1 to 65536 (sealed phases remembered; each keeps its identities in memory)`},
		{"dedupe phases beyond int64", map[string]string{"PHASEGATE_DEDUPE_PHASES": "99999999999999999999"},
			`PHASEGATE_DEDUPE_PHASES="99999999999999999999": must be from 1 to 65536 (sealed phases remembered; each keeps its identities in memory)`},
		{"dedupe phases not a number", map[string]string{"PHASEGATE_DEDUPE_PHASES": "many"},
			`PHASEGATE_DEDUPE_PHASES="many": not a whole number: from 1 to 65536 (sealed phases remembered; each keeps its identities in memory)`},
		{"record bytes too small", map[string]string{"PHASEGATE_MAX_RECORD_BYTES": "100"},
			`PHASEGATE_MAX_RECORD_BYTES="100": must be from 1024 to 104857600 (at most the brokers' message.max.bytes and the output topic's max.message.bytes)`},
		{"pprof yes", map[string]string{"PHASEGATE_PPROF": "yes"},
			`PHASEGATE_PPROF="yes": not a bool: use true or false`},
		{"strict config maybe", map[string]string{"PHASEGATE_STRICT_CONFIG": "maybe"},
			`PHASEGATE_STRICT_CONFIG="maybe": not a bool: use true or false`},
		{"routing unknown", map[string]string{"PHASEGATE_ROUTING": "random"},
			`PHASEGATE_ROUTING="random": partition or key`},
		{"tasks with partition routing", map[string]string{"PHASEGATE_TASKS": "3"},
			`PHASEGATE_TASKS="3" is set but PHASEGATE_ROUTING="partition": the tasks of partition routing follow the output partitions; set PHASEGATE_ROUTING=key or unset PHASEGATE_TASKS`},
		{"tasks zero", map[string]string{"PHASEGATE_ROUTING": "key", "PHASEGATE_TASKS": "0"},
			`PHASEGATE_TASKS="0": a whole number of at least 1 (unset: 1)`},
		{"tasks not a number", map[string]string{"PHASEGATE_ROUTING": "key", "PHASEGATE_TASKS": "many"},
			`PHASEGATE_TASKS="many": a whole number of at least 1 (unset: 1)`},
		{"seal policy unknown", map[string]string{"PHASEGATE_SEAL_POLICY": "maybe"},
			`PHASEGATE_SEAL_POLICY="maybe": wait or seal`},
		{"kafka version too old", map[string]string{"PHASEGATE_KAFKA_VERSION": "0.10.0"},
			`PHASEGATE_KAFKA_VERSION="0.10.0": a Kafka version of at least 2.5.0 (KIP-447: a former owner of a task is fenced by its group generation), such as 3.9.0`},
		{"kafka version without KIP-447", map[string]string{"PHASEGATE_KAFKA_VERSION": "2.4.1"},
			`PHASEGATE_KAFKA_VERSION="2.4.1": a Kafka version of at least 2.5.0 (KIP-447: a former owner of a task is fenced by its group generation), such as 3.9.0`},
		{"log level unknown", map[string]string{"PHASEGATE_LOG_LEVEL": "loud"},
			`PHASEGATE_LOG_LEVEL="loud": debug, info, warn or error`},
		{"log format unknown", map[string]string{"PHASEGATE_LOG_FORMAT": "xml"},
			`PHASEGATE_LOG_FORMAT="xml": text or json`},
		{"SASL mechanism without a SASL protocol", map[string]string{"PHASEGATE_SASL_MECHANISM": "SCRAM-SHA-512"},
			`PHASEGATE_SASL_MECHANISM="SCRAM-SHA-512" is set but PHASEGATE_SECURITY_PROTOCOL="PLAINTEXT" does not use SASL: set PHASEGATE_SECURITY_PROTOCOL to SASL_PLAINTEXT or SASL_SSL, or unset PHASEGATE_SASL_MECHANISM`},
		{"SASL mechanism with SSL only", map[string]string{"PHASEGATE_SASL_MECHANISM": "PLAIN", "PHASEGATE_SECURITY_PROTOCOL": "SSL"},
			`PHASEGATE_SASL_MECHANISM="PLAIN" is set but PHASEGATE_SECURITY_PROTOCOL="SSL" does not use SASL: set PHASEGATE_SECURITY_PROTOCOL to SASL_PLAINTEXT or SASL_SSL, or unset PHASEGATE_SASL_MECHANISM`},
		{"SASL user without a SASL protocol", map[string]string{"PHASEGATE_SASL_USERNAME": "app"},
			`SASL credentials (PHASEGATE_SASL_USERNAME, PHASEGATE_SASL_PASSWORD or _FILE) are set but PHASEGATE_SECURITY_PROTOCOL="PLAINTEXT" does not use SASL: use SASL_PLAINTEXT or SASL_SSL`},
		{"skip-verify without TLS", map[string]string{"PHASEGATE_TLS_INSECURE_SKIP_VERIFY": "true"},
			`PHASEGATE_TLS_INSECURE_SKIP_VERIFY="true" is set but PHASEGATE_SECURITY_PROTOCOL="PLAINTEXT" does not use TLS: use SSL or SASL_SSL, or unset PHASEGATE_TLS_INSECURE_SKIP_VERIFY`},
		{"CA file without TLS", map[string]string{"PHASEGATE_TLS_CA_FILE": "/ca.pem"},
			`PHASEGATE_TLS_CA_FILE is set but PHASEGATE_SECURITY_PROTOCOL="PLAINTEXT" does not use TLS: use SSL or SASL_SSL`},
		{"security protocol unknown", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "TLS"},
			`PHASEGATE_SECURITY_PROTOCOL="TLS": PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL`},
		{"SASL without a user", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SASL_PLAINTEXT"},
			`PHASEGATE_SASL_USERNAME is empty: PHASEGATE_SECURITY_PROTOCOL=SASL_PLAINTEXT needs a user name`},
		{"misspelt variable under strict", map[string]string{"PHASEGATE_BROKER": "kafka:9092", "PHASEGATE_STRICT_CONFIG": "true"},
			`PHASEGATE_BROKER is not a phasegate variable (did you mean PHASEGATE_BROKERS?); PHASEGATE_STRICT_CONFIG=true refuses unknown variables (see sidecar --help for the known ones)`},
		{"two unknown variables under strict", map[string]string{"PHASEGATE_IDLE_TIMEOUTS": "1s", "PHASEGATE_COLOUR": "blue", "PHASEGATE_STRICT_CONFIG": "true"},
			`PHASEGATE_COLOUR is not a phasegate variable; PHASEGATE_IDLE_TIMEOUTS is not a phasegate variable (did you mean PHASEGATE_IDLE_TIMEOUT?); PHASEGATE_STRICT_CONFIG=true refuses unknown variables (see sidecar --help for the known ones)`},
	}
}

// Bad configuration stops the program before it connects: Load returns an
// *Error (cmd/sidecar: exit status 2, for `sidecar` and `sidecar config`)
// of exactly this one line naming the variable, its value and what is
// allowed. cmd/sidecar's TestConfigLinesReachTheUser checks that the line
// reaches stderr as it is.
func TestRefusals(t *testing.T) {
	for _, c := range refusals() {
		t.Run(c.name, func(t *testing.T) {
			env := validEnv()
			for k, v := range c.env {
				if v == unset {
					delete(env, k)
				} else {
					env[k] = v
				}
			}
			_, _, err := Load(env)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load: %v, want an *Error (exit status 2)", err)
			}
			if err.Error() != c.line {
				t.Errorf("\n got %q\nwant %q", err.Error(), c.line)
			}
		})
	}
}

// No refusal starts with an internal package name, and none holds Go's
// formatting of a bad verb or a default duration rendering.
func TestRefusalsSpeakToUsers(t *testing.T) {
	for _, c := range refusals() {
		for _, bad := range []string{"watermarks:", "dedupe:", "proxy:", "txn:", "markers:", "%!", "1m0s", "strconv."} {
			if strings.Contains(c.line, bad) {
				t.Errorf("%s: %q holds %q", c.name, c.line, bad)
			}
		}
		if !strings.Contains(c.line, "PHASEGATE_") {
			t.Errorf("%s: %q names no variable", c.name, c.line)
		}
	}
}

// An unknown PHASEGATE_* variable is a warning naming the nearest known
// one; the configuration is still valid (cmd/sidecar prints each warning
// after "sidecar: warning: ").
func TestUnknownVariableWarns(t *testing.T) {
	tests := []struct {
		name, key, warning string
	}{
		{"missing S", "PHASEGATE_BROKER", "PHASEGATE_BROKER is not a phasegate variable (did you mean PHASEGATE_BROKERS?): it is ignored (PHASEGATE_STRICT_CONFIG=true makes this an error)"},
		{"extra S", "PHASEGATE_IDLE_TIMEOUTS", "PHASEGATE_IDLE_TIMEOUTS is not a phasegate variable (did you mean PHASEGATE_IDLE_TIMEOUT?): it is ignored (PHASEGATE_STRICT_CONFIG=true makes this an error)"},
		{"nothing near", "PHASEGATE_COLOUR", "PHASEGATE_COLOUR is not a phasegate variable: it is ignored (PHASEGATE_STRICT_CONFIG=true makes this an error)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := validEnv()
			env[tt.key] = "x"
			_, warnings, err := Load(env)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(warnings, []string{tt.warning}) {
				t.Errorf("got %q\nwant %q", warnings, []string{tt.warning})
			}
		})
	}
}

// What the refusals must not catch: boundaries and forms that work.
func TestAccepted(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"IPv6 broker", map[string]string{"PHASEGATE_BROKERS": "[::1]:9092,kafka-1.example.com:9093"}},
		{"strict idle", map[string]string{"PHASEGATE_IDLE_TIMEOUT": "0"}},
		{"shortest phase", map[string]string{"PHASEGATE_PHASE_LENGTH": "10ms", "PHASEGATE_MAX_OUT_OF_ORDERNESS": "9ms"}},
		{"longest phase", map[string]string{"PHASEGATE_PHASE_LENGTH": "1h"}},
		{"HTTP on any free port", map[string]string{"PHASEGATE_HTTP_ADDR": "127.0.0.1:0"}},
		{"topic names at Kafka's limits", map[string]string{"PHASEGATE_INPUT_TOPICS": "a.b_c-D9," + strings.Repeat("x", 249), "PHASEGATE_QUARANTINE_TOPIC": "q"}},
		{"largest dedupe bounds", map[string]string{"PHASEGATE_DEDUPE_IDS": "67108864", "PHASEGATE_DEDUPE_PHASES": "65536"}},
		{"strict with only known variables", map[string]string{"PHASEGATE_STRICT_CONFIG": "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := validEnv()
			for k, v := range tt.env {
				env[k] = v
			}
			if _, _, err := Load(env); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	cfg, warnings, err := Load(validEnv())
	if err != nil || len(warnings) != 0 {
		t.Fatal(err, warnings)
	}
	if cfg.QuarantineTopic != "aligned.quarantine" || cfg.GroupID != "phasegate" ||
		!strings.HasPrefix(cfg.TransactionalID, "phasegate-") || cfg.MaxBufferBytes != 268435456 ||
		cfg.IdleTimeout.String() != "5s" || cfg.PhaseLength.String() != "1s" || cfg.HTTPAddr != ":9464" {
		t.Fatalf("defaults differ from docs/DESIGN.md: %+v", cfg)
	}
}

// A password file that cannot be read is named, without its contents.
func TestPasswordFileMissing(t *testing.T) {
	env := validEnv()
	env["PHASEGATE_SECURITY_PROTOCOL"] = "SASL_PLAINTEXT"
	env["PHASEGATE_SASL_USERNAME"] = "app"
	env["PHASEGATE_SASL_PASSWORD_FILE"] = filepath.Join(t.TempDir(), "none")
	_, _, err := Load(env)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Load: %v, want an *Error (exit status 2)", err)
	}
	if want := "PHASEGATE_SASL_PASSWORD_FILE=\"" + env["PHASEGATE_SASL_PASSWORD_FILE"] + "\" cannot be read: " + syscall.ENOENT.Error(); err.Error() != want {
		t.Errorf("got %q\nwant %q", err.Error(), want)
	}
}

// PHASEGATE_TASKS reaches proxy.Config.Tasks with key routing; unset or
// empty is 1 (one writer: version 1, as before several tasks existed).
func TestTasksVariable(t *testing.T) {
	tests := []struct {
		name, value string
		want        int32
	}{
		{"unset", unset, 1},
		{"empty", "", 1},
		{"one", "1", 1},
		{"three", "3", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			environ := validEnv()
			environ["PHASEGATE_ROUTING"] = "key"
			if tt.value != unset {
				environ["PHASEGATE_TASKS"] = tt.value
			}
			cfg, _, err := Load(environ)
			if err != nil {
				t.Fatal(err)
			}
			pc, err := cfg.Pipeline()
			if err != nil {
				t.Fatal(err)
			}
			if pc.Tasks != tt.want {
				t.Fatalf("proxy.Config.Tasks = %d, want %d", pc.Tasks, tt.want)
			}
		})
	}
}

// A group that refused the instance for its settings: one line naming each
// variable that differs, with both values (exit status 2 in run).
func TestSettingsErrorNamesTheVariables(t *testing.T) {
	layout := func(phase time.Duration, topic string) string {
		l, err := tasks.NewLayout(tasks.Topology{Inputs: []tasks.Input{{Topic: "orders", Partitions: 3}}, OutputPartitions: 3,
			OutputTopic: topic, PhaseLength: phase})
		if err != nil {
			t.Fatal(err)
		}
		return l.Settings()
	}
	err := SettingsError("joins", &tasks.SettingsError{Group: layout(100*time.Millisecond, "aligned"), Mine: layout(time.Second, "aligned")})
	want := "PHASEGATE_PHASE_LENGTH is 1s here but 100ms in consumer group joins: every instance of a group must agree; change a setting on every instance at once (stop them all), and a phase length, bound or layout with a new group and output topic"
	var ce *Error
	if !errors.As(err, &ce) || ce.Msg != want {
		t.Fatalf("SettingsError = %v\nwant %s", err, want)
	}
}
