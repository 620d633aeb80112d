// Package kafkatest is the Kafka side of tests and the demo: an in-process
// kfake cluster (fast, not proof) and an independent franz-go client to
// create topics, write inputs and read outputs.
//
// It never imports proxy (internal/inproc runs a pipeline), and nothing the
// production sidecar links imports it: the sidecar binary must not carry
// kfake, kgo or kadm (scripts/check-artifacts.sh checks the built binary).
//
// Invariants: every client it opens is closed by the call that opened it
// or by the Close of what it returns; topics are created with replication
// factor 1 (one broker).
package kafkatest
