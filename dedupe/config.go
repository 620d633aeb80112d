package dedupe

import "errors"

// Environment variables that configure the cache, named in Validate's
// errors. internal/config reads them; this package never reads the environment.
const (
	EnvMaxSealedPhases = "PHASEGATE_DEDUPE_PHASES"
	EnvMaxIdentities   = "PHASEGATE_DEDUPE_IDS"
)

// Defaults of Config (cmd/sidecar's defaults are the same).
const (
	DefaultMaxSealedPhases = 64
	DefaultMaxIdentities   = 1 << 20
)

// Config bounds a Cache. The zero value is invalid: start from DefaultConfig
// or let internal/config fill it from the environment.
type Config struct {
	// MaxSealedPhases is how many sealed phases are kept for late-retry
	// detection; the least recently used one goes first. At least 1.
	MaxSealedPhases int
	// MaxIdentities bounds the identities held over all phases, open and
	// sealed. At least 1. Open phases may exceed it (see ErrFull).
	MaxIdentities int
}

// DefaultConfig returns the configuration used when no variable is set.
func DefaultConfig() Config {
	return Config{MaxSealedPhases: DefaultMaxSealedPhases, MaxIdentities: DefaultMaxIdentities}
}

// Validate reports every field out of range as a *ConfigError naming its
// environment variable, joined with errors.Join when there are several.
func (c Config) Validate() error {
	var errs []error
	if c.MaxSealedPhases < 1 {
		errs = append(errs, &ConfigError{Var: EnvMaxSealedPhases, Value: c.MaxSealedPhases, Reason: "must be at least 1"})
	}
	if c.MaxIdentities < 1 {
		errs = append(errs, &ConfigError{Var: EnvMaxIdentities, Value: c.MaxIdentities, Reason: "must be at least 1"})
	}
	return errors.Join(errs...)
}
