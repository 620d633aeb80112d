package config

import (
	"os"
	"time"

	"github.com/caarlos0/env/v11"
)

// Prefix prefixes every variable phasegate reads.
const Prefix = "PHASEGATE_"

// Config is every setting of the sidecar, read once from the environment
// by Load. The help tags are what `sidecar --help` prints (PrintVariables).
// A Config is a value: safe to copy and to read from several goroutines.
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

// Load reads and checks environ, the process environment that main hands
// over. cmd/sidecar calls it once, at start (and `sidecar config`). Every
// error is an *Error of one line naming the variable; warnings are lines
// to log (unknown PHASEGATE_* variables when PHASEGATE_STRICT_CONFIG is off).
func Load(environ map[string]string) (Config, []string, error) {
	cfg, err := env.ParseAsWithOptions[Config](env.Options{Prefix: Prefix, Environment: environ})
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
	if err := cfg.Security.Resolve(environ); err != nil {
		return cfg, nil, err
	}
	pc, err := cfg.Pipeline()
	if err != nil {
		return cfg, nil, err
	}
	if err := pc.Validate(); err != nil {
		return cfg, nil, &Error{userMessage(err)}
	}
	return cfg, warnings, nil
}

// Raw is the value of variable name (without the prefix) as written, or
// its default when unset, for messages that echo what the user wrote
// ("60s", not "1m0s"). It is "" on a Config that Load did not make.
func (c Config) Raw(name string) string { return c.raw[name] }
