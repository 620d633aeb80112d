// Package preflight is the sidecar's start-up before it consumes: each
// step bounded and interruptible (Steps.Step), and the checks of the
// cluster (Steps.Check): a probe of every bootstrap broker (TCP, TLS, a
// Kafka ApiVersions request) that says what answered when it is not Kafka,
// the cluster metadata, the brokers' transaction.max.timeout.ms, the
// topics, the routing against the fork topics' partition counts, and the
// quarantine topic (created when missing).
//
// Invariants:
//   - Every step runs under the signal context and its own deadline: a
//     signal ends start-up at once with ErrInterrupted (cmd/sidecar exits
//     0), a deadline with an error naming the step and what to check. The
//     one goroutine not waited for is a step's call that outlives its
//     deadline (sarama's calls take no context); waiting would break the
//     25 s promise of shutdown.
//   - Nothing is consumed or committed here; the only write is the
//     quarantine topic's creation.
//   - A value the brokers show cannot work (the transaction timeout above
//     their bound, partition routing over fork topics of different
//     partition counts) is a *config.Error naming the variable: exit
//     status 2. Every other error says what answered and what to check,
//     naming the variables by their PHASEGATE_ names.
//
// It imports internal/config and proxy (for proxy.Kafka); cmd/sidecar
// imports it.
package preflight
