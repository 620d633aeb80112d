//go:build e2e

// Package cluster runs phasegate on a three-broker Apache Kafka cluster in
// containers and injects faults while records flow (the nemesis, issue 33).
//
// The cluster: three combined broker+controller nodes (KRaft, three
// voters) from the local Kafka image (images/build.sh), started and removed
// by testcontainers-go on a network of their own; every topic replicated 3
// with min.insync.replicas=2, the transaction state log and the offsets
// topic too. Each broker has two client listeners: kafka-N:9092 inside the
// network (the sidecars) and 127.0.0.1:<port> on the host (the workload,
// the checker and `sidecar verify`), a fixed port so that a restarted
// broker comes back where the clients left it.
//
// The sidecars: the binary built from ./cmd/sidecar, bind-mounted into the
// local scratch runtime image (the image the Dockerfile builds holds the
// same binary; this way a code change needs no image rebuild), three
// containers in one group, restarted by Docker when they exit non-zero.
// Running them in containers gives each its own network namespace, so a
// real partition of one sidecar is a packet filter in that namespace.
//
// Invariants every scenario checks, whatever the fault: every input
// record is in the output or the quarantine exactly once, every phase is
// whole on every output partition (internal/verify and `sidecar verify`),
// no transaction of the sidecars is left open. Availability (the time from
// the fault to the next committed phase) and quarantined records are
// measured and reported against the targets; with
// PHASEGATE_NEMESIS_STRICT=1 a missed target fails the scenario too.
package cluster
