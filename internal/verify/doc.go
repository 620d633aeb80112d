// Package verify is phasegate's one verifier: `sidecar verify`, the e2e
// suite and the unit suites all check an aligned topic with it. It checks
// an output topic read with read_committed against every rule of
// MARKERS.md section 3.2, on every partition (through markers.Reader, so
// every rule the reader knows flows in) and across partitions (a phase
// with data has a marker on every partition; a phasegate.id appears at
// most once per phase across the topic). Account then checks the fate of every input record: in the
// output or the quarantine exactly once, or a proven duplicate.
//
// It holds no Kafka client: callers read the topics with any client
// (sarama in the command, franz-go in the tests) and hand over plain
// Records in offset order per partition.
//
// Invariants:
//   - Streaming, bounded memory: a Checker holds, per partition, the
//     records of the one phase it has not yet seen the marker of (what
//     markers.Reader keeps) and their timestamps; and, per phase that is
//     not yet closed on every partition, a summary row per partition and
//     one 16-byte hash per phasegate.id. A phase is closed, checked,
//     handed to Config.OnPhase and forgotten as soon as every partition
//     has passed it. Only Config.KeepSources (for Account) keeps one entry
//     per data record for the whole run.
//   - Each violation is reported once, through Config.OnViolation, with
//     the partition, offset and phase it concerns, its rule and what to
//     do about it.
//   - A partition whose read starts in the middle of its log is checked
//     from its first marker on: what comes before it is a phase whose
//     start was not read (counted as lead-in, never reported).
//   - A partition whose read ends before the topic's end (a cut range)
//     leaves its last phase unchecked (counted as lead-out); a read that
//     reaches the end offsets taken at start reports data without a marker
//     as a torn phase.
//
// A Checker is not safe for concurrent use: one goroutine feeds it.
package verify
