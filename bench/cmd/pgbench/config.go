package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/caarlos0/env/v11"
)

// config is every setting of a run, read once from BENCH_* variables.
// bench/run.sh sets the paths and the broker; the rest have defaults sized
// for `make bench` on a 2-core machine (about 15 minutes).
type config struct {
	Brokers    []string `env:"BROKERS,required,notEmpty"` // bootstrap of the broker under test
	KafkaSh    string   `env:"KAFKA_SH,required"`         // e2e/kafka/kafka.sh, to run Kafka's tools
	KafkaDir   string   `env:"KAFKA_DIR"`                 // the broker's state dir (for its pid and CPU); optional
	Sidecar    string   `env:"SIDECAR,required"`          // the phasegate sidecar binary
	WorkDir    string   `env:"WORK_DIR,required"`         // logs and profiles (git-ignored)
	ResultsDir string   `env:"RESULTS_DIR,required"`      // where the markdown table goes
	Versions   string   `env:"VERSIONS"`                  // "Go x, Java y, Kafka z" as run.sh found them
	Commit     string   `env:"COMMIT"`                    // phasegate's commit under test

	Records       int             `env:"RECORDS" envDefault:"1000000"`
	Sizes         []int           `env:"SIZES" envDefault:"100,1024"`
	Phases        []time.Duration `env:"PHASES" envDefault:"100ms,1s"`
	CopierRecords int             `env:"COPIER_RECORDS" envDefault:"250000"` // the copier's share of the input, to fit the time budget
	InputRate     float64         `env:"INPUT_RATE" envDefault:"0"`          // records/s of event time; 0 = the ceiling producer's
	PacedFor      time.Duration   `env:"PACED_DURATION" envDefault:"20s"`
	PacedRate     float64         `env:"PACED_RATE" envDefault:"0"`    // records/s for the paced runs instead of a share of the relay rate
	PacedShare    float64         `env:"PACED_SHARE" envDefault:"0.5"` // of phasegate's relay rate
	SkewPhase     time.Duration   `env:"SKEW_PHASE" envDefault:"100ms"`
	SkewSize      int             `env:"SKEW_SIZE" envDefault:"1024"`
	SkewBuffer    int64           `env:"SKEW_BUFFER_BYTES" envDefault:"67108864"`
	Repeat        int             `env:"REPEAT" envDefault:"3"` // runs of ProducerPerformance and of each phasegate relay; the median is reported
	Compare       string          `env:"COMPARE"`               // another sidecar binary: every relay runs with both, alternately
	CompareLabel  string          `env:"COMPARE_LABEL" envDefault:"B"`
	SidecarEnv    []string        `env:"SIDECAR_ENV"` // extra NAME=VALUE for every sidecar, e.g. GOMEMLIMIT=128MiB
	Steps         []string        `env:"STEPS" envDefault:"ceiling,copier,phasegate,paced,streams,skew,partitions,instances"`
	Profile       bool            `env:"PROFILE" envDefault:"false"`     // CPU and allocation profiles of each phasegate relay
	RunTimeout    time.Duration   `env:"RUN_TIMEOUT" envDefault:"10m"`   // bound on any one step
	StallTimeout  time.Duration   `env:"STALL_TIMEOUT" envDefault:"90s"` // a relay with no progress this long fails

	// The Kafka Streams pass-through (bench/streams, built by scripts/bench-streams.sh).
	StreamsClasspath string   `env:"STREAMS_CLASSPATH"` // set by run.sh; required by the streams and partitions steps
	StreamsThreads   []int    `env:"STREAMS_THREADS" envDefault:"1,2"`
	StreamsJVM       []string `env:"STREAMS_JVM" envDefault:"-Xmx512m" envSeparator:" "` // JVM options of the pass-through

	// The partitions step (issue 15): forks of N input partitions in total.
	Partitions        []int         `env:"PARTITIONS" envDefault:"5,512,2048"`
	PartitionsRecords []int         `env:"PARTITIONS_RECORDS" envDefault:"500000,500000,250000"` // per entry of BENCH_PARTITIONS (the last repeats)
	PartitionsPhase   time.Duration `env:"PARTITIONS_PHASE" envDefault:"1s"`
	PartitionsSize    int           `env:"PARTITIONS_SIZE" envDefault:"100"`
	PartitionsIdle    time.Duration `env:"PARTITIONS_IDLE" envDefault:"1s"`                     // PHASEGATE_IDLE_TIMEOUT of those runs
	PartitionsKeys    int           `env:"PARTITIONS_KEYS" envDefault:"1000"`                   // distinct keys, hashed to partitions
	PartitionsRate    float64       `env:"PARTITIONS_RATE" envDefault:"50000"`                  // records/s of event time: 500,000 records span 10 phases of 1 s
	PartitionsAge     time.Duration `env:"PARTITIONS_AGE" envDefault:"1h"`                      // how far in the past the input is stamped
	PhasesPath        string        `env:"PHASES_PATH" envDefault:"/phases?partitions=holding"` // the rows of the partitions holding the watermark (the summary has no rows)
	PartitionsStreams int           `env:"PARTITIONS_STREAMS_THREADS" envDefault:"2"`           // stream threads of the pass-through there

	// The instances step (issue 11): 1, 2, 3 sidecars of one group over one input.
	Instances      []int         `env:"INSTANCES" envDefault:"1,2,3"`
	InstancesKill  int           `env:"INSTANCES_KILL" envDefault:"2"` // the run of this many instances SIGKILLs and restarts one; 0 none
	InstancesPhase time.Duration `env:"INSTANCES_PHASE" envDefault:"100ms"`
	InstancesSize  int           `env:"INSTANCES_SIZE" envDefault:"100"`
}

// Sentinel errors of the configuration.
var (
	// errConfig is an invalid combination of BENCH_* values.
	errConfig = errors.New("pgbench: invalid configuration")
)

func loadConfig(environ map[string]string) (config, error) {
	c, err := env.ParseAsWithOptions[config](env.Options{Prefix: "BENCH_", Environment: environ})
	if err != nil {
		return c, fmt.Errorf("%w: %v", errConfig, err)
	}
	return c, c.validate()
}

func (c config) validate() error {
	switch {
	case c.Records < 1000:
		return fmt.Errorf("%w: BENCH_RECORDS=%d: at least 1000", errConfig, c.Records)
	case len(c.Sizes) == 0 || len(c.Phases) == 0:
		return fmt.Errorf("%w: BENCH_SIZES and BENCH_PHASES need at least one value", errConfig)
	case c.PacedShare <= 0 || c.PacedShare > 1:
		return fmt.Errorf("%w: BENCH_PACED_SHARE=%g: in (0, 1]", errConfig, c.PacedShare)
	case c.Repeat < 1:
		return fmt.Errorf("%w: BENCH_REPEAT=%d: at least 1", errConfig, c.Repeat)
	case c.CopierRecords < 1000:
		return fmt.Errorf("%w: BENCH_COPIER_RECORDS=%d: at least 1000", errConfig, c.CopierRecords)
	case c.InputRate < 0:
		return fmt.Errorf("%w: BENCH_INPUT_RATE=%g: 0 (the ceiling's rate) or positive", errConfig, c.InputRate)
	}
	for _, s := range c.Sizes {
		if s < 16 || s > 1<<20 {
			return fmt.Errorf("%w: BENCH_SIZES: %d is outside 16..1048576", errConfig, s)
		}
	}
	for _, p := range c.Phases {
		if p < time.Millisecond {
			return fmt.Errorf("%w: BENCH_PHASES: %s is below 1ms", errConfig, p)
		}
	}
	for _, s := range c.Steps {
		switch s {
		case "ceiling", "copier", "phasegate", "paced", "streams", "skew", "partitions", "instances":
		default:
			return fmt.Errorf("%w: BENCH_STEPS: unknown step %q (ceiling, copier, phasegate, paced, streams, skew, partitions, instances)", errConfig, s)
		}
	}
	if err := c.validateInstances(); err != nil {
		return err
	}
	return c.validateStreams()
}

// validateInstances checks the instances step: each count must find a task
// (there are instancesOutParts), and the killed run must be one that runs.
func (c config) validateInstances() error {
	if !c.step("instances") {
		return nil
	}
	for _, n := range c.Instances {
		if n < 1 || n > instancesOutParts {
			return fmt.Errorf("%w: BENCH_INSTANCES: %d is outside 1..%d (the step's tasks)", errConfig, n, instancesOutParts)
		}
	}
	if c.InstancesKill != 0 && !slices.Contains(c.Instances, c.InstancesKill) {
		return fmt.Errorf("%w: BENCH_INSTANCES_KILL=%d is not one of BENCH_INSTANCES %v (0: no kill)", errConfig, c.InstancesKill, c.Instances)
	}
	if c.InstancesPhase < time.Millisecond || c.InstancesSize < 16 {
		return fmt.Errorf("%w: BENCH_INSTANCES_PHASE=%s (at least 1ms), BENCH_INSTANCES_SIZE=%d (at least 16)", errConfig, c.InstancesPhase, c.InstancesSize)
	}
	return nil
}

func (c config) step(name string) bool {
	for _, s := range c.Steps {
		if s == name {
			return true
		}
	}
	return false
}

// validateStreams checks the settings of the streams and partitions steps.
func (c config) validateStreams() error {
	if (c.step("streams") || c.step("partitions")) && c.StreamsClasspath == "" {
		return fmt.Errorf("%w: BENCH_STREAMS_CLASSPATH is empty: the streams and partitions steps need the pass-through (scripts/bench-streams.sh prints it; bench/run.sh sets it)", errConfig)
	}
	for _, n := range c.StreamsThreads {
		if n < 1 || n > 64 {
			return fmt.Errorf("%w: BENCH_STREAMS_THREADS: %d is outside 1..64", errConfig, n)
		}
	}
	if c.PartitionsStreams < 1 || c.PartitionsStreams > 64 {
		return fmt.Errorf("%w: BENCH_PARTITIONS_STREAMS_THREADS=%d: outside 1..64", errConfig, c.PartitionsStreams)
	}
	for _, n := range c.Partitions {
		if n < 2 || n > 20000 {
			return fmt.Errorf("%w: BENCH_PARTITIONS: %d is outside 2..20000 (split across 2 forks)", errConfig, n)
		}
	}
	if c.step("partitions") && len(c.PartitionsRecords) == 0 {
		return fmt.Errorf("%w: BENCH_PARTITIONS_RECORDS needs at least one value", errConfig)
	}
	for _, n := range c.PartitionsRecords {
		if n < 1000 {
			return fmt.Errorf("%w: BENCH_PARTITIONS_RECORDS: %d is below 1000", errConfig, n)
		}
	}
	switch {
	case c.PartitionsSize < 16 || c.PartitionsSize > 1<<20:
		return fmt.Errorf("%w: BENCH_PARTITIONS_SIZE=%d: outside 16..1048576", errConfig, c.PartitionsSize)
	case c.PartitionsPhase < time.Millisecond:
		return fmt.Errorf("%w: BENCH_PARTITIONS_PHASE=%s: below 1ms", errConfig, c.PartitionsPhase)
	case c.PartitionsIdle < 0:
		return fmt.Errorf("%w: BENCH_PARTITIONS_IDLE=%s: 0 or positive", errConfig, c.PartitionsIdle)
	case c.PartitionsRate <= 0:
		return fmt.Errorf("%w: BENCH_PARTITIONS_RATE=%g: positive", errConfig, c.PartitionsRate)
	case c.PartitionsKeys < 0:
		return fmt.Errorf("%w: BENCH_PARTITIONS_KEYS=%d: 0 (no keys) or positive", errConfig, c.PartitionsKeys)
	}
	return nil
}

// partitionsRecords is the record count of the i-th BENCH_PARTITIONS entry:
// its BENCH_PARTITIONS_RECORDS entry, the last one repeating.
func (c config) partitionsRecords(i int) int {
	if i < len(c.PartitionsRecords) {
		return c.PartitionsRecords[i]
	}
	return c.PartitionsRecords[len(c.PartitionsRecords)-1]
}
