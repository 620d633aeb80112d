package dedupe

import (
	"errors"
	"fmt"
)

var (
	// ErrFull is returned by Cache.Add when it recorded a new identity but the
	// identities held still exceed Config.MaxIdentities after every sealed
	// phase that could go was evicted: only open phases are left. The
	// identity is recorded all the same; the caller pauses its partitions
	// ahead of the global watermark until Cache.Full reports false, which a
	// Seal brings about.
	ErrFull = errors.New("dedupe: identity bound exceeded with only open phases held")

	// ErrInvalidConfig is wrapped by every *ConfigError that Config.Validate
	// returns, so a caller can test for any configuration error with
	// errors.Is.
	ErrInvalidConfig = errors.New("dedupe: invalid configuration")
)

// ConfigError names the environment variable whose value Config.Validate
// rejected. Its message has the form "PHASEGATE_DEDUPE_IDS=0: must be at
// least 1", so cmd/sidecar can print it as is; it unwraps to
// ErrInvalidConfig.
type ConfigError struct {
	Var    string // environment variable, e.g. PHASEGATE_DEDUPE_IDS
	Value  int    // the rejected value
	Reason string // what is allowed, e.g. "must be at least 1"
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s=%d: %s", e.Var, e.Value, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }
