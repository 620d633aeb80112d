// Command join is the reference join for phasegate's output. It reads the
// aligned topic in a consumer group with read_committed, hands each
// partition's records to a markers.Reader, joins two branches by key once a
// phase is whole on that partition, and commits the offset after the
// phase's marker: the committed offset of a partition is always a phase
// boundary, so a restart (or the next owner after a rebalance) resumes
// after the last whole phase, and data of a half-read phase is dropped on
// revocation and read again from that boundary.
//
//	go run ./examples/join -brokers localhost:9092 -topic aligned -group join -left orders -right payments
//
// One line per phase and partition (docs/CONSUMING.md):
//
//	phase=42 partition=0 records=17 sources=orders:12,payments:5 marker_count=17 sealed_by=watermark joined=5 unmatched=7
//
// Invariants: a partition's committed offset is always 0 or the offset
// after a marker, and moves only after that phase was joined and printed;
// records buffered for a partition are dropped when it is revoked or lost;
// no rebalance falls between a marker and its commit (BlockRebalanceOnPoll).
package main
