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
	Steps         []string        `env:"STEPS" envDefault:"ceiling,copier,phasegate,paced,streams,skew,partitions,instances,recovery,lanes"`
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
	// The heavy row (issue 34 item 1): 1 s phases of ~230,000 records at 512
	// partitions. "true": after the BENCH_PARTITIONS rows; "only": instead
	// of them; "false": not run.
	PartitionsHeavy        string  `env:"PARTITIONS_HEAVY" envDefault:"true"`
	PartitionsHeavyParts   int     `env:"PARTITIONS_HEAVY_PARTITIONS" envDefault:"512"`
	PartitionsHeavyRecords int     `env:"PARTITIONS_HEAVY_RECORDS" envDefault:"500000"`
	PartitionsHeavyRate    float64 `env:"PARTITIONS_HEAVY_RATE" envDefault:"230000"`

	// The instances step (issue 11): 1, 2, 3 sidecars of one group over one input.
	Instances      []int         `env:"INSTANCES" envDefault:"1,2,3"`
	InstancesKill  int           `env:"INSTANCES_KILL" envDefault:"2"` // the run of this many instances SIGKILLs and restarts one; 0 none
	InstancesPhase time.Duration `env:"INSTANCES_PHASE" envDefault:"100ms"`
	InstancesSize  int           `env:"INSTANCES_SIZE" envDefault:"100"`

	// The recovery step (issue 34 item 2): SIGKILL and restart under paced
	// input, with one fork partition empty and the default idle timeout.
	RecoveryInstances []int         `env:"RECOVERY_INSTANCES" envDefault:"1,3"`
	RecoveryRate      float64       `env:"RECOVERY_RATE" envDefault:"10000"`
	RecoverySize      int           `env:"RECOVERY_SIZE" envDefault:"100"`
	RecoveryPhase     time.Duration `env:"RECOVERY_PHASE" envDefault:"1s"`
	RecoveryWarm      time.Duration `env:"RECOVERY_WARM" envDefault:"12s"`  // producer start → the kill
	RecoveryDown      time.Duration `env:"RECOVERY_DOWN" envDefault:"1s"`   // the kill → the restart
	RecoveryAfter     time.Duration `env:"RECOVERY_AFTER" envDefault:"15s"` // the restart → the producer's end
	RecoveryDrain     time.Duration `env:"RECOVERY_DRAIN" envDefault:"75s"` // bound on the wait for the last records (Streams' session timeout is 45 s)
	RecoveryRepeat    int           `env:"RECOVERY_REPEAT" envDefault:"1"`
	RecoveryStreams   []string      `env:"RECOVERY_STREAMS" envDefault:"default,static"` // Kafka Streams variants; "none" for none

	// The lanes step (issue 34 item 3): key routing, 3 instances with 3
	// tasks against 1 with 1, paced and up front; Streams with 1 and 3.
	LanesModes    []string      `env:"LANES_MODES" envDefault:"paced,upfront"`
	LanesRate     float64       `env:"LANES_RATE" envDefault:"20000"` // paced records/s; up front, of event time
	LanesDuration time.Duration `env:"LANES_DURATION" envDefault:"30s"`
	LanesRecords  int           `env:"LANES_RECORDS" envDefault:"500000"` // up front
	LanesPhase    time.Duration `env:"LANES_PHASE" envDefault:"1s"`
	LanesSize     int           `env:"LANES_SIZE" envDefault:"100"`
	LanesStreams  bool          `env:"LANES_STREAMS" envDefault:"true"`

	// The skew step's PHASEGATE_TASKS values, alternated in each
	// repetition (BENCH_REPEAT) when there are several.
	SkewTasks []int `env:"SKEW_TASKS" envDefault:"1"`
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
		case "ceiling", "copier", "phasegate", "paced", "streams", "skew", "partitions", "instances", "recovery", "lanes":
		default:
			return fmt.Errorf("%w: BENCH_STEPS: unknown step %q (ceiling, copier, phasegate, paced, streams, skew, partitions, instances, recovery, lanes)", errConfig, s)
		}
	}
	if err := c.validateInstances(); err != nil {
		return err
	}
	if err := c.validate34(); err != nil {
		return err
	}
	return c.validateStreams()
}

// validate34 checks the settings of issue 34's rows: the heavy partitions
// row, the recovery and lanes steps, the skew step's task counts.
func (c config) validate34() error {
	switch c.PartitionsHeavy {
	case "true", "false", "only", "1", "0":
	default:
		return fmt.Errorf("%w: BENCH_PARTITIONS_HEAVY=%q: true, false or only", errConfig, c.PartitionsHeavy)
	}
	switch {
	case c.PartitionsHeavyParts < 2 || c.PartitionsHeavyRecords < 1000 || c.PartitionsHeavyRate <= 0:
		return fmt.Errorf("%w: BENCH_PARTITIONS_HEAVY_PARTITIONS=%d (at least 2), _RECORDS=%d (at least 1000), _RATE=%g (positive)",
			errConfig, c.PartitionsHeavyParts, c.PartitionsHeavyRecords, c.PartitionsHeavyRate)
	case c.RecoveryRate <= 0 || c.RecoverySize < 24 || c.RecoveryPhase < time.Millisecond || c.RecoveryRepeat < 1:
		return fmt.Errorf("%w: BENCH_RECOVERY_RATE=%g (positive), _SIZE=%d (at least 24: the value starts with slot:seq:), _PHASE=%s, _REPEAT=%d",
			errConfig, c.RecoveryRate, c.RecoverySize, c.RecoveryPhase, c.RecoveryRepeat)
	case c.RecoveryWarm < time.Second || c.RecoveryDown < 0 || c.RecoveryAfter < time.Second:
		return fmt.Errorf("%w: BENCH_RECOVERY_WARM=%s and _AFTER=%s at least 1s, _DOWN=%s not negative", errConfig, c.RecoveryWarm, c.RecoveryAfter, c.RecoveryDown)
	case c.LanesRate <= 0 || c.LanesSize < 24 || c.LanesPhase < time.Millisecond || c.LanesRecords < 1000 || c.LanesDuration < 2*lanesWarm:
		return fmt.Errorf("%w: BENCH_LANES_RATE=%g (positive), _SIZE=%d (at least 24), _PHASE=%s, _RECORDS=%d (at least 1000), _DURATION=%s (at least %s)",
			errConfig, c.LanesRate, c.LanesSize, c.LanesPhase, c.LanesRecords, c.LanesDuration, 2*lanesWarm)
	}
	for _, v := range c.RecoveryStreams {
		if v != "default" && v != "static" && v != "none" {
			return fmt.Errorf("%w: BENCH_RECOVERY_STREAMS: %q is not default, static or none", errConfig, v)
		}
	}
	for _, n := range c.RecoveryInstances {
		if n < 1 || n > recoveryOutParts {
			return fmt.Errorf("%w: BENCH_RECOVERY_INSTANCES: %d is outside 1..%d (the step's tasks)", errConfig, n, recoveryOutParts)
		}
	}
	for _, m := range c.LanesModes {
		if m != "paced" && m != "upfront" {
			return fmt.Errorf("%w: BENCH_LANES_MODES: %q is neither paced nor upfront", errConfig, m)
		}
	}
	for _, t := range c.SkewTasks {
		if t < 1 || t > 3 {
			return fmt.Errorf("%w: BENCH_SKEW_TASKS: %d is outside 1..3 (the skew input's largest fork has 3 partitions)", errConfig, t)
		}
	}
	return nil
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
	if (c.step("streams") || c.step("partitions") || c.step("recovery") && !slices.Equal(c.RecoveryStreams, []string{"none"}) || c.step("lanes") && c.LanesStreams) && c.StreamsClasspath == "" {
		return fmt.Errorf("%w: BENCH_STREAMS_CLASSPATH is empty: the streams, partitions, recovery and lanes steps need the pass-through (scripts/bench-streams.sh prints it; bench/run.sh sets it)", errConfig)
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
