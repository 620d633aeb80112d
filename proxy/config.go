package proxy

import (
	"fmt"
	"strings"
	"time"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/tasks"
	"github.com/phasegate/phasegate/watermarks"
)

// Config is what the pipeline needs. internal/config fills it from the
// environment; every error of Validate names the variable.
type Config struct {
	InputTopics     []string
	OutputTopic     string
	QuarantineTopic string
	GroupID         string
	TransactionalID string
	// InstanceID is the consumer group's static member name
	// (group.instance.id, KIP-345): a restarted instance with the same name
	// gets its partitions back at once instead of after the session
	// timeout. Empty: dynamic membership.
	InstanceID string
	// WatermarkTopic is the compacted topic through which the instances of
	// the group share one global watermark (docs/FLEET.md); created when
	// missing.
	WatermarkTopic string
	Routing        align.Routing
	// Tasks is, with key routing, the number of tasks (tasks.Topology.Tasks:
	// 0 is the layout's default, min(largest input's partitions, output
	// partitions)); each output partition then has Tasks writers (wire
	// format version 2 when above 1). 0 with partition routing.
	Tasks      int32
	Watermarks watermarks.Config
	Dedupe     dedupe.Config
	// Tick is how often the pipeline re-evaluates idleness, timeouts and the
	// watermark when no record arrives.
	Tick time.Duration
	// LagInterval is how often the consumers' lag behind the last stable
	// offset is measured.
	LagInterval time.Duration
	// QuarantineDelay bounds how long a quarantined record waits for a seal
	// before it is committed in a transaction of its own.
	QuarantineDelay time.Duration
}

// Validate checks the values and their combinations.
func (c Config) Validate() error {
	if len(c.InputTopics) == 0 {
		return fmt.Errorf("PHASEGATE_INPUT_TOPICS is empty: name at least one fork topic")
	}
	seen := map[string]bool{}
	for _, t := range c.InputTopics {
		if t == "" {
			return fmt.Errorf("PHASEGATE_INPUT_TOPICS=%s: empty topic name", strings.Join(c.InputTopics, ","))
		}
		if seen[t] {
			return fmt.Errorf("PHASEGATE_INPUT_TOPICS=%s: topic %q named twice", strings.Join(c.InputTopics, ","), t)
		}
		seen[t] = true
	}
	switch {
	case c.OutputTopic == "":
		return fmt.Errorf("PHASEGATE_OUTPUT_TOPIC is empty: name the aligned output topic")
	case seen[c.OutputTopic]:
		return fmt.Errorf("PHASEGATE_OUTPUT_TOPIC=%s is also an input topic: phasegate would read its own output", c.OutputTopic)
	case c.QuarantineTopic == "" || c.QuarantineTopic == c.OutputTopic || seen[c.QuarantineTopic]:
		return fmt.Errorf("PHASEGATE_QUARANTINE_TOPIC=%q must be a topic of its own, neither an input nor the output", c.QuarantineTopic)
	case c.GroupID == "":
		return fmt.Errorf("PHASEGATE_GROUP_ID is empty")
	case c.WatermarkTopic == "" || c.WatermarkTopic == c.OutputTopic || c.WatermarkTopic == c.QuarantineTopic || seen[c.WatermarkTopic]:
		return fmt.Errorf("PHASEGATE_WATERMARK_TOPIC=%q must be a topic of its own, neither an input, the output nor the quarantine topic", c.WatermarkTopic)
	case c.TransactionalID == "":
		return fmt.Errorf("PHASEGATE_TRANSACTIONAL_ID is empty")
	case c.Tasks < 0 || tasks.CheckTasks(c.Routing, c.Tasks) != nil:
		return fmt.Errorf("PHASEGATE_TASKS=%d: set it only with PHASEGATE_ROUTING=key, to 1 or more", c.Tasks)
	case c.Tick <= 0 || c.LagInterval <= 0 || c.QuarantineDelay <= 0:
		return fmt.Errorf("proxy: Tick, LagInterval and QuarantineDelay must be positive")
	case c.Watermarks.Now == nil:
		return fmt.Errorf("proxy: Watermarks.Now (the clock) is required")
	}
	if err := c.Watermarks.Validate(); err != nil {
		return err
	}
	return c.Dedupe.Validate()
}
