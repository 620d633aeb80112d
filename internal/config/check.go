package config

import (
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// rawValues maps each variable (without prefix) to its value as written,
// or to its default when unset, so that errors echo what the user wrote
// ("60s", not "1m0s").
func rawValues(environ map[string]string) map[string]string {
	raw := map[string]string{}
	eachVariable(func(name string, f reflect.StructField) {
		if v, ok := environ[Prefix+name]; ok {
			raw[name] = v
		} else {
			raw[name] = f.Tag.Get("envDefault")
		}
	})
	return raw
}

// eachVariable calls fn for every variable Config reads (its name without
// the prefix, and its field), embedded structs included.
func eachVariable(fn func(name string, f reflect.StructField)) {
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			if name := strings.Split(f.Tag.Get("env"), ",")[0]; name != "" {
				fn(name, f)
			}
		}
	}
	walk(reflect.TypeFor[Config]())
}

// durationBound is the sane range of a duration variable and why.
type durationBound struct {
	min, max time.Duration
	zero     string // when not empty, 0 is allowed and means this
	why      string
}

func (b durationBound) allowed() string {
	r := fmt.Sprintf("from %s to %s", FormatDuration(b.min), FormatDuration(b.max))
	if b.zero != "" {
		r = "0 (" + b.zero + ") or " + r
	}
	return r + ", such as 500ms, 5s or 1m (" + b.why + ")"
}

// FormatDuration writes whole units as people do ("1h", not "1h0m0s"):
// messages and `sidecar config` show durations so.
func FormatDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}

// durationRule is the range of each duration variable.
func durationRule(name string) (durationBound, bool) {
	switch name {
	case "PHASE_LENGTH":
		return durationBound{min: 10 * time.Millisecond, max: time.Hour,
			why: "each phase costs a transaction, so shorter phases outrun the commits; an open phase's records wait in memory and are re-read after a restart"}, true
	case "MAX_OUT_OF_ORDERNESS":
		return durationBound{min: 0, max: time.Hour, why: "and below PHASEGATE_PHASE_LENGTH"}, true
	case "IDLE_TIMEOUT":
		return durationBound{min: 100 * time.Millisecond, max: time.Hour, zero: "strict: never idle",
			why: "shorter, a partition between two fetches looks idle; longer, the last phases wait hours to seal"}, true
	case "SEAL_TIMEOUT_MIN", "SEAL_TIMEOUT_MAX":
		return durationBound{min: time.Second, max: 24 * time.Hour,
			why: "it decides when a late phase is counted or sealed: shorter, every hiccup counts; longer, it never fires"}, true
	case "TRANSACTION_TIMEOUT":
		return durationBound{min: time.Second, max: time.Hour,
			why: "the broker aborts a transaction older than this: shorter, one slow commit aborts; also below PHASEGATE_SESSION_TIMEOUT and the brokers' transaction.max.timeout.ms"}, true
	case "SESSION_TIMEOUT":
		return durationBound{min: time.Second, max: time.Hour,
			why: "the brokers' group.min.session.timeout.ms and group.max.session.timeout.ms (by default 6s and 30m) must allow it too"}, true
	}
	return durationBound{}, false
}

// intBound is the documented range of a numeric variable and why.
type intBound struct {
	min, max int64
	why      string
}

func (b intBound) allowed() string {
	return fmt.Sprintf("from %d to %d (%s)", b.min, b.max, b.why)
}

// intRule is the range of each numeric variable.
func intRule(name string) (intBound, bool) {
	switch name {
	case "MAX_BUFFER_BYTES":
		return intBound{1 << 20, 1 << 40, "bytes of records held in memory; the process needs up to twice this plus 64 MiB, more below 256 KiB a partition"}, true
	case "DEDUPE_PHASES":
		return intBound{1, 1 << 16, "sealed phases remembered; each keeps its identities in memory"}, true
	case "DEDUPE_IDS":
		return intBound{1, 1 << 26, "identities remembered, 16 bytes each plus map overhead, in memory beyond PHASEGATE_MAX_BUFFER_BYTES"}, true
	case "MAX_RECORD_BYTES":
		return intBound{1024, 100 << 20, "at most the brokers' message.max.bytes and the output topic's max.message.bytes"}, true
	}
	return intBound{}, false
}

// check refuses values that cannot work; raw holds the values as written.
func (c Config) check(raw map[string]string) error {
	if err := checkBrokers(c.Brokers, raw["BROKERS"]); err != nil {
		return err
	}
	for _, t := range []struct {
		name   string
		topics []string
	}{{"INPUT_TOPICS", c.InputTopics}, {"OUTPUT_TOPIC", []string{c.OutputTopic}}, {"QUARANTINE_TOPIC", []string{c.QuarantineTopic}}, {"WATERMARK_TOPIC", []string{c.WatermarkTopic}}} {
		for _, topic := range t.topics {
			if why := topicNameProblem(topic); why != "" {
				value := raw[t.name]
				if t.name == "QUARANTINE_TOPIC" && value == "" {
					return BadVar("OUTPUT_TOPIC", raw["OUTPUT_TOPIC"], fmt.Sprintf("the quarantine topic's name %q (<output>.quarantine) %s; set PHASEGATE_QUARANTINE_TOPIC", topic, why))
				}
				if t.name == "WATERMARK_TOPIC" && value == "" {
					return BadVar("GROUP_ID", raw["GROUP_ID"], fmt.Sprintf("the watermark topic's name %q (<group>.watermarks) %s; set PHASEGATE_WATERMARK_TOPIC", topic, why))
				}
				return BadVar(t.name, value, fmt.Sprintf("%q %s", topic, why))
			}
		}
	}
	if err := CheckHTTPAddr(c.HTTPAddr); err != nil {
		return err
	}
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"PHASE_LENGTH", c.PhaseLength}, {"MAX_OUT_OF_ORDERNESS", c.MaxOutOfOrderness}, {"IDLE_TIMEOUT", c.IdleTimeout},
		{"SEAL_TIMEOUT_MIN", c.SealTimeoutMin}, {"SEAL_TIMEOUT_MAX", c.SealTimeoutMax},
		{"TRANSACTION_TIMEOUT", c.TransactionTimeout}, {"SESSION_TIMEOUT", c.SessionTimeout},
	}
	for _, d := range durations {
		b, _ := durationRule(d.name)
		if (d.v == 0 && b.zero != "") || (d.v >= b.min && d.v <= b.max) {
			continue
		}
		return BadVar(d.name, raw[d.name], "must be "+b.allowed())
	}
	switch {
	case c.PhaseLength%time.Millisecond != 0:
		return BadVar("PHASE_LENGTH", raw["PHASE_LENGTH"], "must be a whole number of milliseconds (markers carry phases in milliseconds)")
	case c.MaxOutOfOrderness >= c.PhaseLength:
		return BadVar("MAX_OUT_OF_ORDERNESS", raw["MAX_OUT_OF_ORDERNESS"], fmt.Sprintf(
			"must be below %sPHASE_LENGTH=%q: a bound of a phase or more holds every phase open until the next one has passed", Prefix, raw["PHASE_LENGTH"]))
	case c.SealTimeoutMin > c.SealTimeoutMax:
		return BadVar("SEAL_TIMEOUT_MIN", raw["SEAL_TIMEOUT_MIN"], fmt.Sprintf("must not be above %sSEAL_TIMEOUT_MAX=%q", Prefix, raw["SEAL_TIMEOUT_MAX"]))
	case c.TransactionTimeout >= c.SessionTimeout:
		return BadVar("TRANSACTION_TIMEOUT", raw["TRANSACTION_TIMEOUT"], fmt.Sprintf(
			"must be below %sSESSION_TIMEOUT=%q, or the group may move on while a transaction is still open", Prefix, raw["SESSION_TIMEOUT"]))
	}
	numbers := []struct {
		name string
		v    int64
	}{{"MAX_BUFFER_BYTES", c.MaxBufferBytes}, {"DEDUPE_PHASES", int64(c.DedupePhases)}, {"DEDUPE_IDS", int64(c.DedupeIDs)}, {"MAX_RECORD_BYTES", int64(c.MaxRecordBytes)}}
	for _, n := range numbers {
		if b, _ := intRule(n.name); n.v < b.min || n.v > b.max {
			return BadVar(n.name, raw[n.name], "must be "+b.allowed())
		}
	}
	if _, err := c.routing(); err != nil {
		return err
	}
	if _, err := ParseKafkaVersion(c.KafkaVersion); err != nil {
		return err
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return BadVar("LOG_FORMAT", c.LogFormat, "text or json")
	}
	return nil
}

// ParseLevel is PHASEGATE_LOG_LEVEL as slog's level, or an *Error.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, BadVar("LOG_LEVEL", s, "debug, info, warn or error")
	}
	return l, nil
}

// checkBrokers wants host:port, a port from 1 to 65535, for every broker.
func checkBrokers(brokers []string, raw string) error {
	for _, b := range brokers {
		host, port, err := net.SplitHostPort(b)
		why := ""
		switch {
		case b == "":
			why = "an empty broker address (a stray comma?)"
		case err != nil:
			why = fmt.Sprintf("%q is not host:port", b)
		case host == "":
			why = fmt.Sprintf("%q has no host", b)
		case !validPort(port, 1):
			why = fmt.Sprintf("%q has no port from 1 to 65535", b)
		case !validHost(host):
			why = fmt.Sprintf("%q: %q is not a host name or IP address", b, host)
		}
		if why != "" {
			return BadVar("BROKERS", raw, why+": want host:port[,host:port...], such as kafka:9092")
		}
	}
	return nil
}

// checkHTTPAddr wants [host]:port, port from 0 (any free port) to 65535.
func CheckHTTPAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !validPort(port, 0) || (host != "" && !validHost(host)) {
		return BadVar("HTTP_ADDR", addr, "want [host]:port with a port from 0 to 65535, such as :9464 or 127.0.0.1:9464")
	}
	return nil
}

func validPort(port string, low int) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n >= low && n <= 65535 && port == strconv.Itoa(n)
}

// validHost accepts an IP address or a DNS name (letters, digits, '-',
// '_' and '.'), without resolving it.
func validHost(host string) bool {
	if net.ParseIP(host) != nil {
		return true
	}
	if len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// maxTopicName is Kafka's bound on a topic name's length.
const maxTopicName = 249

// topicNameProblem says why Kafka would refuse name as a topic, or "".
// Kafka's rule (org.apache.kafka.common.internals.Topic.validate): 1 to 249
// of [a-zA-Z0-9._-], and neither "." nor "..".
func topicNameProblem(name string) string {
	const rule = "is not a legal Kafka topic name: use 1 to 249 of a-z A-Z 0-9 . _ - (and not \".\" or \"..\")"
	switch {
	case name == "":
		return "(empty, a stray comma?) " + rule
	case name == "." || name == ".." || len(name) > maxTopicName:
		return rule
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return rule
		}
	}
	return ""
}
