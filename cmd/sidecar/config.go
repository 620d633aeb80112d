package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/IBM/sarama"
	"github.com/caarlos0/env/v11"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/proxy"
	"github.com/phasegate/phasegate/tasks"
	"github.com/phasegate/phasegate/watermarks"
)

// envPrefix prefixes every variable phasegate reads.
const envPrefix = "PHASEGATE_"

// Config is every setting of the sidecar, read once from the environment.
// The help tags are what `sidecar --help` prints.
type Config struct {
	raw                map[string]string // each variable as written (or its default), for messages
	Brokers            []string          `env:"BROKERS,required,notEmpty" help:"bootstrap servers, comma separated (host:port)"`
	InputTopics        []string          `env:"INPUT_TOPICS,required,notEmpty" help:"fork topics to align, comma separated"`
	OutputTopic        string            `env:"OUTPUT_TOPIC,required,notEmpty" help:"aligned output topic (must exist)"`
	QuarantineTopic    string            `env:"QUARANTINE_TOPIC" help:"late and malformed records; created if missing (default <output>.quarantine)"`
	GroupID            string            `env:"GROUP_ID" envDefault:"phasegate" help:"consumer group of the inputs"`
	TransactionalID    string            `env:"TRANSACTIONAL_ID" help:"stable per instance; a restart with the same ID fences the old one (default <group>-<hostname>)"`
	InstanceID         string            `env:"INSTANCE_ID" help:"static consumer group member name (KIP-345): a restart with the same name gets its partitions back at once instead of after PHASEGATE_SESSION_TIMEOUT (default the transactional ID)"`
	WatermarkTopic     string            `env:"WATERMARK_TOPIC" help:"compacted topic through which the instances of the group share one global watermark; created if missing (default <group>.watermarks)"`
	PhaseLength        time.Duration     `env:"PHASE_LENGTH" envDefault:"1s" help:"phase span when phases come from record timestamps"`
	MaxOutOfOrderness  time.Duration     `env:"MAX_OUT_OF_ORDERNESS" envDefault:"200ms" help:"how far behind its partition's newest timestamp a record may be and still count"`
	IdleTimeout        time.Duration     `env:"IDLE_TIMEOUT" envDefault:"5s" help:"silence (with no lag) after which a partition is idle; 0 = strict: never idle"`
	MaxBufferBytes     int64             `env:"MAX_BUFFER_BYTES" envDefault:"268435456" help:"bound on buffered record bytes; partitions running ahead are paused"`
	Routing            string            `env:"ROUTING" envDefault:"partition" help:"output partition: partition (p mod P_out) or key (murmur2, as Kafka's Java producer)"`
	Tasks              string            `env:"TASKS" help:"with ROUTING=key: how many tasks share the work (at most the largest input's partition count), each writing its own markers on every output partition (wire format v2 when above 1); unset = 1 (one instance works, output version 1 as before); never change it on an output topic"`
	AllowSplitKeys     bool              `env:"ALLOW_SPLIT_KEYS" envDefault:"false" help:"start with ROUTING=partition although the fork topics differ in partition count (one key then reaches several output partitions)"`
	SealTimeoutMin     time.Duration     `env:"SEAL_TIMEOUT_MIN" envDefault:"10s" help:"lower bound of the adaptive seal timeout (p99 phase duration x 1.5)"`
	SealTimeoutMax     time.Duration     `env:"SEAL_TIMEOUT_MAX" envDefault:"5m" help:"upper bound of the adaptive seal timeout"`
	SealPolicy         string            `env:"SEAL_POLICY" envDefault:"wait" help:"at the seal timeout: wait (count it, keep waiting: strict fork-join) or seal (seal with sealed_by timeout: scatter-gather)"`
	DedupePhases       int               `env:"DEDUPE_PHASES" envDefault:"64" help:"sealed phases remembered to recognise late retries as duplicates"`
	DedupeIDs          int               `env:"DEDUPE_IDS" envDefault:"1048576" help:"bound on record identities remembered over all phases"`
	TransactionTimeout time.Duration     `env:"TRANSACTION_TIMEOUT" envDefault:"20s" help:"Kafka transaction timeout; must be below PHASEGATE_SESSION_TIMEOUT"`
	SessionTimeout     time.Duration     `env:"SESSION_TIMEOUT" envDefault:"30s" help:"consumer group session timeout"`
	MaxRecordBytes     int               `env:"MAX_RECORD_BYTES" envDefault:"1000000" help:"largest produce batch and record; at most the brokers' message.max.bytes and the output's max.message.bytes"`
	KafkaVersion       string            `env:"KAFKA_VERSION" envDefault:"3.9.0" help:"Kafka protocol version to speak, at least 2.5.0 (KIP-447 fencing across instances)"`
	ClientID           string            `env:"CLIENT_ID" envDefault:"phasegate" help:"Kafka client ID"`
	HTTPAddr           string            `env:"HTTP_ADDR" envDefault:":9464" help:"listen address of /metrics, /healthz, /readyz, /phases"`
	LogLevel           string            `env:"LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	LogFormat          string            `env:"LOG_FORMAT" envDefault:"text" help:"text or json"`
	Pprof              bool              `env:"PPROF" envDefault:"false" help:"serve Go's profiler on /debug/pprof/ (for benchmarks and debugging)"`
	StrictConfig       bool              `env:"STRICT_CONFIG" envDefault:"false" help:"true: an unknown PHASEGATE_* variable (a misspelling) stops the start with exit status 2 instead of a warning"`
	Security
}

// configError is an invalid or missing variable: exit status 2.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// settingVars names the variables behind each word of tasks.Layout's
// Settings.
var settingVars = map[string]string{
	"routing": "ROUTING", "tasks": "TASKS", "output": "OUTPUT_TOPIC (topic:partitions)", "phase": "PHASE_LENGTH",
	"out-of-orderness": "MAX_OUT_OF_ORDERNESS", "inputs": "INPUT_TOPICS (topic:partitions)",
}

// settingsError is the one line for an instance its consumer group
// refused because it runs with other settings (exit status 2).
func settingsError(group string, se *tasks.SettingsError) error {
	var parts []string
	for _, d := range se.Differences() {
		parts = append(parts, fmt.Sprintf("%s%s is %s here but %s in consumer group %s", envPrefix, settingVars[d.Key], d.Mine, d.Group, group))
	}
	return &configError{strings.Join(parts, "; ") +
		": every instance of a group must agree; change a setting on every instance at once (stop them all), and a phase length, bound or layout with a new group and output topic"}
}

func badVar(name, value, allowed string) error {
	return &configError{fmt.Sprintf("%s%s=%q: %s", envPrefix, name, value, allowed)}
}

// loadConfig reads and checks the environment. Every error is a
// *configError of one line naming the variable; warnings are lines to log
// (unknown PHASEGATE_* variables when PHASEGATE_STRICT_CONFIG is off).
func loadConfig(environ map[string]string) (Config, []string, error) {
	cfg, err := env.ParseAsWithOptions[Config](env.Options{Prefix: envPrefix, Environment: environ})
	if err != nil {
		return cfg, nil, envError(err, environ)
	}
	warnings, err := unknownVariables(environ, cfg.StrictConfig)
	if err != nil {
		return cfg, nil, err
	}
	if cfg.QuarantineTopic == "" {
		cfg.QuarantineTopic = cfg.OutputTopic + ".quarantine"
	}
	if cfg.WatermarkTopic == "" {
		cfg.WatermarkTopic = cfg.GroupID + ".watermarks"
	}
	if cfg.TransactionalID == "" {
		host, _ := os.Hostname()
		cfg.TransactionalID = cfg.GroupID + "-" + host
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = cfg.TransactionalID
	}
	cfg.raw = rawValues(environ)
	if err := cfg.check(cfg.raw); err != nil {
		return cfg, nil, err
	}
	if err := cfg.Security.resolve(environ); err != nil {
		return cfg, nil, err
	}
	pc, err := cfg.pipeline()
	if err != nil {
		return cfg, nil, err
	}
	if err := pc.Validate(); err != nil {
		return cfg, nil, &configError{userMessage(err)}
	}
	return cfg, warnings, nil
}

// userMessage drops what precedes the variable's name in a library
// package's error ("watermarks: invalid configuration: PHASEGATE_..."):
// users read variables, not package names.
func userMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, envPrefix); i > 0 {
		return msg[i:]
	}
	return msg
}

// internalPackages are the library packages whose errors carry their name
// as a prefix (CONVENTIONS.md, rule 5): the prefix helps a maintainer, not
// an operator, so forUsers drops it at this boundary.
func internalPackages() []string { return []string{"proxy", "txn", "watermarks", "dedupe", "markers"} }

// forUsers drops internal package prefixes from an error message, at its
// start and after each ": " of a wrapped chain ("proxy: consumer group g:
// txn: fenced: ..." becomes "consumer group g: fenced: ...").
func forUsers(msg string) string {
	for _, p := range internalPackages() {
		msg = strings.TrimPrefix(msg, p+": ")
		msg = strings.ReplaceAll(msg, ": "+p+": ", ": ")
		msg = strings.ReplaceAll(msg, "("+p+": ", "(")
	}
	return msg
}

// envError turns caarlos0/env's error into one line naming the variable,
// the value as written and what is allowed.
func envError(err error, environ map[string]string) error {
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) > 0 {
		err = agg.Errors[0]
	}
	var notSet env.VarIsNotSetError
	var empty env.EmptyVarError
	var parse env.ParseError
	switch {
	case errors.As(err, &notSet):
		return &configError{notSet.Key + " is not set: it is required (see sidecar --help)"}
	case errors.As(err, &empty):
		return &configError{empty.Key + " is empty: it is required (see sidecar --help)"}
	case errors.As(err, &parse):
		name := varOfField(parse.Name)
		value := environ[envPrefix+name]
		switch parse.Type {
		case reflect.TypeFor[time.Duration]():
			if b, ok := durationRule(name); ok {
				return badVar(name, value, "not a duration: "+b.allowed())
			}
			return badVar(name, value, "not a duration such as 500ms, 5s or 1m")
		case reflect.TypeFor[bool]():
			return badVar(name, value, "not a bool: use true or false")
		}
		if b, ok := intRule(name); ok {
			if errors.Is(parse.Err, strconv.ErrRange) {
				return badVar(name, value, "must be "+b.allowed())
			}
			return badVar(name, value, "not a whole number: "+b.allowed())
		}
		return badVar(name, value, "not a valid "+parse.Type.String())
	}
	return &configError{userMessage(err)}
}

// varOfField is the variable name (without prefix) of a Config field.
func varOfField(field string) string {
	for _, t := range []reflect.Type{reflect.TypeFor[Config](), reflect.TypeFor[Security]()} {
		if f, ok := t.FieldByName(field); ok {
			return strings.Split(f.Tag.Get("env"), ",")[0]
		}
	}
	return field
}

func (c Config) routing() (proxy.Routing, error) {
	switch c.Routing {
	case "partition":
		return proxy.RoutePartition, nil
	case "key":
		return proxy.RouteKey, nil
	}
	return 0, badVar("ROUTING", c.Routing, "partition or key")
}

// tasks is PHASEGATE_TASKS: 1 with key routing when unset or empty, so
// that an output topic written before several tasks existed stays version
// 1 (MARKERS.md 3.3: the writers of a partition never change), and 0 (the
// layout's) with partition routing.
// It is refused with partition routing, whose tasks follow the output
// partitions (tasks.Layout): a count there would break the one-writer
// layout instead of being ignored.
func (c Config) tasks(routing proxy.Routing) (int32, error) {
	if c.Tasks == "" {
		if routing == proxy.RouteKey {
			return 1, nil
		}
		return 0, nil
	}
	n, err := strconv.ParseInt(c.Tasks, 10, 32)
	if err != nil || n < 1 {
		return 0, badVar("TASKS", c.Tasks, "a whole number of at least 1 (unset: 1)")
	}
	if routing != proxy.RouteKey {
		return 0, &configError{fmt.Sprintf("%sTASKS=%q is set but %sROUTING=%q: the tasks of partition routing follow the output partitions; set %sROUTING=key or unset %sTASKS",
			envPrefix, c.Tasks, envPrefix, c.Routing, envPrefix, envPrefix)}
	}
	return int32(n), nil
}

func (c Config) kafkaVersion() (sarama.KafkaVersion, error) {
	v, err := sarama.ParseKafkaVersion(c.KafkaVersion)
	// 2.5 is where TxnOffsetCommit carries the group generation and member
	// (KIP-447, protocol version 3, sent by sarama from V2_5_0_0): each
	// instance has its own transactional ID, so a former owner of a task
	// that resumes after the task moved is fenced only by that check.
	if err != nil || !v.IsAtLeast(sarama.V2_5_0_0) {
		return v, badVar("KAFKA_VERSION", c.KafkaVersion, "a Kafka version of at least 2.5.0 (KIP-447: a former owner of a task is fenced by its group generation), such as 3.9.0")
	}
	return v, nil
}

// pipeline is the proxy's part of the configuration.
func (c Config) pipeline() (proxy.Config, error) {
	routing, err := c.routing()
	if err != nil {
		return proxy.Config{}, err
	}
	policy, err := watermarks.ParsePolicy(c.SealPolicy)
	if err != nil {
		return proxy.Config{}, badVar("SEAL_POLICY", c.SealPolicy, "wait or seal")
	}
	tasks, err := c.tasks(routing)
	if err != nil {
		return proxy.Config{}, err
	}
	return proxy.Config{
		InputTopics: c.InputTopics, OutputTopic: c.OutputTopic, QuarantineTopic: c.QuarantineTopic,
		WatermarkTopic: c.WatermarkTopic, GroupID: c.GroupID, TransactionalID: c.TransactionalID, InstanceID: c.InstanceID, Routing: routing,
		Tasks: tasks,
		Watermarks: watermarks.Config{
			PhaseLength: c.PhaseLength, MaxOutOfOrderness: c.MaxOutOfOrderness, IdleTimeout: c.IdleTimeout,
			MaxBufferBytes: c.MaxBufferBytes, SealTimeoutMin: c.SealTimeoutMin, SealTimeoutMax: c.SealTimeoutMax,
			SealPolicy: policy, Now: time.Now,
		},
		Dedupe:          dedupe.Config{MaxSealedPhases: c.DedupePhases, MaxIdentities: c.DedupeIDs},
		Tick:            20 * time.Millisecond,
		LagInterval:     time.Second,
		QuarantineDelay: time.Second,
	}, nil
}

// printHelp lists every variable with its default and meaning.
func printHelp(w io.Writer) {
	fmt.Fprint(w, `phasegate sidecar: keeps a Kafka fork-join pipeline in phase.

Usage:
  sidecar              run, configured by the environment variables below
  sidecar config       check the environment and print the configuration it gives (secrets redacted)
  sidecar status       print the local sidecar's /phases as a table (-addr to ask another one)
  sidecar verify       check an aligned topic's phases against docs/MARKERS.md (sidecar verify --help)
  sidecar healthcheck  exit 0 when the local sidecar's /healthz answers (for container health checks)
  sidecar --help       this text; each command also answers --help

The demo (an in-process broker, no setup) is its own command: go run ./cmd/demo

Environment:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tMEANING")
	helpRows(tw, reflect.TypeFor[Config]())
	tw.Flush()
	fmt.Fprint(w, `
Start-up: /healthz answers at once; each step before consuming (broker probe,
metadata, transaction.max.timeout.ms, topics, quarantine topic, producer and
group) has its own deadline and is logged; SIGTERM/SIGINT end it at once.

Exit status: 0 after a clean shutdown (SIGTERM/SIGINT, also during start-up),
1 on a runtime error (brokers unreachable or not Kafka, missing topics, being
fenced by another instance with the same transactional ID), 2 on invalid
configuration (including a transaction timeout above the brokers'
transaction.max.timeout.ms, checked at start), with one line naming the
variable, the value and what is allowed.
`)
}

// helpRows prints a row per variable of t, descending into embedded structs.
func helpRows(tw io.Writer, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			helpRows(tw, f.Type)
			continue
		}
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("env"), ",")
		def := f.Tag.Get("envDefault")
		if len(tag) > 1 && tag[1] == "required" {
			def = "(required)"
		} else if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "  %s%s\t%s\t%s\n", envPrefix, tag[0], def, f.Tag.Get("help"))
	}
}

// printConfig prints every variable's effective value, secrets redacted.
func printConfig(w io.Writer, cfg Config) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	configRows(tw, reflect.ValueOf(cfg))
	tw.Flush()
}

func configRows(w io.Writer, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			configRows(w, v.Field(i))
			continue
		}
		if !f.IsExported() {
			continue
		}
		val := fmt.Sprint(v.Field(i).Interface())
		if d, ok := v.Field(i).Interface().(time.Duration); ok {
			val = fmtDuration(d) // "5m", as people write it, not "5m0s"
		}
		if sl, ok := v.Field(i).Interface().([]string); ok {
			val = strings.Join(sl, ",")
		}
		if f.Tag.Get("secret") == "true" && val != "" {
			val = "(redacted)"
		}
		fmt.Fprintf(w, "%s%s\t%s\n", envPrefix, strings.Split(f.Tag.Get("env"), ",")[0], val)
	}
}
