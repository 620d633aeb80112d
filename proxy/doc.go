// Package proxy is phasegate's pipeline: it consumes the fork topics in one
// consumer group (read_committed, manual offsets), turns each record into
// calls on the watermark tracker and the dedupe cache, buffers the records
// of open phases, and commits each run of sealed phases in one transaction:
// data, then a marker on every output partition, then quarantined records,
// then the input offsets with the consumer group's metadata.
//
// Invariants:
//
//   - One goroutine (the pipeline loop) owns every piece of hot state: the
//     tracker, the dedupe cache, the phase buffer, the quarantine queue and
//     the committed positions. The consumer group's goroutines only forward
//     records and session events to it over channels.
//   - Committed offsets never pass a buffered record: a partition's committed
//     offset is its first record still buffered, else its consumed position.
//     The metadata of each committed offset (commitMeta) carries the global
//     watermark, so a sealed phase never reopens after a restart, and the
//     consumed position, so records read again after a restart are not
//     resolved twice.
//   - Every failure of a transaction other than fencing ends the consumer
//     session; the next session starts from the committed positions with a
//     new tracker, cache and buffer. A rebalance takes the same path. There
//     is one way to rebuild state: from the committed offsets.
//   - Every record read is published, quarantined with a reason, or dropped as
//     a proven duplicate (and counted); nothing else.
//   - Buffered bytes (payload plus recordOverhead per record) stay under
//     PHASEGATE_MAX_BUFFER_BYTES: partitions ahead are paused at half of it;
//     records already past the gates when a pause is decided (the loop's
//     inbound channel, a claim's hand-over) still arrive. The bound holds
//     while they fit in the other half: with 1.3 KiB records and a 512 KiB
//     bound the peak measured 347-415 KiB (TestBufferBoundUnderSkew); with
//     a 256 KiB bound it could exceed it on a loaded machine.
package proxy
