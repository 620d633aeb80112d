package watermarks

import (
	"errors"
	"fmt"
	"time"
)

// ErrConfig is wrapped by every error Config.Validate and New return for a bad
// value or combination; the message names the environment variable(s).
var ErrConfig = errors.New("watermarks: invalid configuration")

// ErrPolicy is returned by ParsePolicy (and Policy.UnmarshalText) for a value
// other than "wait" or "seal".
var ErrPolicy = errors.New("watermarks: unknown seal policy")

// Policy says what the tracker does when the oldest open phase outlives the
// seal timeout.
type Policy int

const (
	// PolicyWait counts the timeout and keeps waiting (strict fork-join).
	PolicyWait Policy = iota
	// PolicySeal seals the phase with cause timeout (scatter-gather).
	PolicySeal
)

// ParsePolicy parses "wait" or "seal".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "wait":
		return PolicyWait, nil
	case "seal":
		return PolicySeal, nil
	}
	return 0, fmt.Errorf("%w %q (want \"wait\" or \"seal\")", ErrPolicy, s)
}

func (p Policy) String() string {
	switch p {
	case PolicyWait:
		return "wait"
	case PolicySeal:
		return "seal"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// UnmarshalText lets env.ParseAs read PHASEGATE_SEAL_POLICY directly.
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := ParsePolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// MarshalText writes the same words ParsePolicy reads.
func (p Policy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Cause says why a phase was sealed; its String is the marker's sealed_by
// value (MARKERS.md section 3).
type Cause int

const (
	// CauseMarkers: every input partition sent a marker for the phase or later.
	CauseMarkers Cause = iota
	// CauseWatermark: every live partition passed the phase.
	CauseWatermark
	// CauseIdle: a partition that had not passed the phase was idle.
	CauseIdle
	// CauseTimeout: the phase outlived the seal timeout under PolicySeal.
	CauseTimeout
)

func (c Cause) String() string {
	switch c {
	case CauseMarkers:
		return "markers"
	case CauseWatermark:
		return "watermark"
	case CauseIdle:
		return "idle"
	case CauseTimeout:
		return "timeout"
	}
	return fmt.Sprintf("Cause(%d)", int(c))
}

// MarshalText makes a Cause print as its sealed_by word in JSON (/phases).
func (c Cause) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Verdict is Record's answer for one record.
type Verdict int

const (
	// Accepted: the record is buffered in its open phase.
	Accepted Verdict = iota
	// Late: the record's phase is already sealed; nothing was buffered and the
	// pipeline quarantines it (MARKERS.md section 5).
	Late
)

func (v Verdict) String() string {
	switch v {
	case Accepted:
		return "accepted"
	case Late:
		return "late"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Config is what a Tracker needs. internal/config fills it from the environment
// (its defaults are docs/DESIGN.md's, "Configuration"); Validate names the variables. Now must be
// set by the caller.
type Config struct {
	// PhaseLength is the span of a timestamp-derived phase; > 0 and a whole
	// number of milliseconds (MARKERS.md 1 divides timestamps in ms by it).
	PhaseLength time.Duration
	// MaxOutOfOrderness is subtracted from a partition's newest timestamp to
	// give its time watermark; >= 0, used in whole milliseconds (rounded down).
	MaxOutOfOrderness time.Duration
	// IdleTimeout is the unpaused quiet time after which a partition with zero
	// lag is idle; >= 0, and 0 means strict: never idle.
	IdleTimeout time.Duration
	// MaxBufferBytes bounds buffered record bytes: partitions ahead are paused
	// at half of it and resumed at a quarter; > 0.
	MaxBufferBytes int64
	// SealTimeoutMin and SealTimeoutMax clamp the adaptive seal timeout;
	// 0 < min <= max.
	SealTimeoutMin time.Duration
	SealTimeoutMax time.Duration
	// SealPolicy is what a seal timeout does.
	SealPolicy Policy
	// MarkEvery, when above 0, bounds how long the highest sealed phase
	// goes without a Seal: a tracker whose Global moved past phases it
	// sealed silently (no records, not Expected) returns a Seal with no
	// records for Global-1 once MarkEvery has passed since its last Seal,
	// so that its writer marks the sealed watermark (MARKERS.md 3.3,
	// liveness) even when no report named those phases (docs/FLEET.md,
	// F7). Set by the pipeline, not by a variable of its own.
	MarkEvery time.Duration
	// Now is the clock; required. Tests inject a fake one.
	Now func() time.Time
}

// Validate checks each value and the combinations, and returns the first
// problem, wrapping ErrConfig and naming the variable(s) and value(s).
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.PhaseLength <= 0:
		return bad("PHASEGATE_PHASE_LENGTH=%s must be above 0", c.PhaseLength)
	case c.PhaseLength%time.Millisecond != 0:
		return bad("PHASEGATE_PHASE_LENGTH=%s must be a whole number of milliseconds", c.PhaseLength)
	case c.MaxOutOfOrderness < 0:
		return bad("PHASEGATE_MAX_OUT_OF_ORDERNESS=%s must not be negative", c.MaxOutOfOrderness)
	case c.IdleTimeout < 0:
		return bad("PHASEGATE_IDLE_TIMEOUT=%s must not be negative (0 = never idle)", c.IdleTimeout)
	case c.MaxBufferBytes <= 0:
		return bad("PHASEGATE_MAX_BUFFER_BYTES=%d must be above 0", c.MaxBufferBytes)
	case c.SealTimeoutMin <= 0:
		return bad("PHASEGATE_SEAL_TIMEOUT_MIN=%s must be above 0", c.SealTimeoutMin)
	case c.SealTimeoutMin > c.SealTimeoutMax:
		return bad("PHASEGATE_SEAL_TIMEOUT_MIN=%s is above PHASEGATE_SEAL_TIMEOUT_MAX=%s",
			c.SealTimeoutMin, c.SealTimeoutMax)
	case c.SealPolicy != PolicyWait && c.SealPolicy != PolicySeal:
		return bad("PHASEGATE_SEAL_POLICY=%s must be wait or seal", c.SealPolicy)
	case c.MarkEvery < 0:
		return bad("Config.MarkEvery=%s must not be negative", c.MarkEvery)
	case c.Now == nil:
		return bad("Config.Now (the clock) is required")
	}
	return nil
}
