// Command sidecar is phasegate: it reads the fork topics of a Kafka fork-join
// pipeline, seals each phase when every partition has passed it, and
// republishes it with a marker on every output partition in one transaction.
// It is configured by PHASEGATE_* environment variables (sidecar --help).
//
// Invariants:
//   - Configuration is read once, from the environment, by config.Load; a
//     value that cannot work exits 2 with one line naming the variable, the
//     value as written and what is allowed, before anything connects (or,
//     for transaction.max.timeout.ms, as soon as a broker has told it).
//   - /healthz answers from the first moment; /readyz only while consuming.
//   - Every start-up step runs under the signal context and its own
//     deadline (preflight.Steps): SIGTERM/SIGINT during start-up exit at once
//     with status 0; after it, the two-phase shutdown takes at most 25 s.
//   - No user-facing message starts with an internal package name
//     (forUsers here, config's userMessage).
//   - The binary links no franz-go (kfake, kgo, kadm): the demo is
//     cmd/demo; scripts/check-artifacts.sh checks the built binary.
package main
