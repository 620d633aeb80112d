// Command join is the reference join for phasegate's output. It reads the
// aligned topic in a consumer group with read_committed, hands each
// partition's records to a markers.Reader, joins two branches by key once a
// phase is whole on that partition (with several writers, once every
// writer marked it: MARKERS.md rule M8), and then commits the reader's
// checkpoint (MARKERS.md section 6): the lowest offset of any record it
// still keeps for a phase not handed over, with the metadata
// {"phasegate":1,"done":N}. On a one-writer partition that is the offset
// after the marker; with several writers it can lie well before the marker
// that completed the phase.
//
// Each assigned partition's reader starts from the group's committed
// offset and its metadata (kgo.OnOffsetsFetched): it drops the phases
// handed over before and returns every later phase whole. With no commit
// it starts at the log's first offset (kadm ListStartOffsets); anywhere
// else without metadata (an offset reset or set by hand, a commit by an
// older join) it returns only the phases it can prove whole and prints
// the others as skipped.
//
//	go run ./examples/join -brokers localhost:9092 -topic aligned -group join -left orders -right payments
//
// Lines (docs/CONSUMING.md):
//
//	phase=42 partition=0 records=17 sources=orders:12,payments:5 marker_count=17 sealed_by=watermark joined=5 unmatched=7
//	skipped phase=41 partition=0 records=3
//	VIOLATION partition=0: <what>
//
// Exit status 0, 3 after a violation, 1 on an error, and 1 at once at a
// marker of a newer wire format version.
//
// Invariants: a partition's committed offset and metadata are always a
// checkpoint its reader gave after the phases handed over before it were
// joined and printed, never anything while the reader has none (rule C5);
// readers are dropped when their partition is revoked or lost; no
// rebalance falls between a record and its commit (BlockRebalanceOnPoll).
package main
