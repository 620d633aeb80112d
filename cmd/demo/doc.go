// Command demo is phasegate's embedded run: an in-process Kafka (franz-go's
// kfake), two skewed forks fed through the phase trap's failure modes, and
// the sidecar's pipeline with its HTTP endpoints and live view. It needs
// nothing but Go (go run ./cmd/demo). It is a command of its own so that
// the production sidecar links no test broker.
//
// Invariants: the live view is the sidecar's own (internal/app); the
// banner and the summary state the schedule that -duration gave; the
// demo ends (status 0) within moments of Ctrl-C, also while holding.
package main
