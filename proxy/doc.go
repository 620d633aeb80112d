// Package proxy is the Kafka side of phasegate's pipeline: one consumer
// group over the fork topics (read_committed, manual offsets), the loop
// that hands each record to the session's alignment state (package
// align), the transactional producer that writes each Batch the session
// builds, lag polling, metrics and the status served on /phases.
//
// The path of one record: sarama's fetcher -> handler.ConsumeClaim (a
// claim goroutine and its queue; held there while its partition is paused)
// -> the in channel, or the hot channel while its partition holds the
// watermark -> Pipeline.handle (sarama message to align.Record) ->
// align.Session.Handle -> ... -> Pipeline.step -> Session.Step (a Batch
// when phases sealed, a StreamBatch of the oldest open phase's new records
// otherwise) -> Pipeline.startCommit -> the committer goroutine (Writes to
// sarama ProducerMessages, offsets with the group's metadata;
// txn.Producer.Stream into the open transaction, or txn.Producer.Commit)
// -> the done channel -> Pipeline.finishCommit -> Session.Committed.
//
// Invariants:
//
//   - One goroutine (the loop) owns the session and every other piece of
//     hot state. The consumer group's goroutines talk to it over typed
//     channels only: records (in, hot), session starts (setups), session ends
//     (ends) and lag measurements (lags).
//   - The loop never waits on a transaction: the committer goroutine, the
//     only user of the transactional producer, writes one Batch at a time
//     while the loop goes on reading, deduping and buffering records
//     (within the memory bound). Session ends and starts wait until the
//     Batch in flight has finished, so a task moves only between
//     transactions and a new session starts from offsets that include it;
//     a shutdown lets it finish too. A transaction left open by
//     StreamBatches is aborted when its generation ends (abortOpen) and
//     at shutdown, so that it holds no read_committed reader back. Nor
//     does the loop wait on the watermark topic: it queues its tasks'
//     reports (reportQueue) for a writer goroutine.
//   - The partitions holding the watermark are read first, and never wait
//     on the others. sarama's fetcher for a broker sends its next fetch
//     only once every partition of the last response has been taken, so a
//     claim never waits on the loop: it queues what sarama delivers and
//     bounds its queue by pausing its own partition's fetches (FetchBytes,
//     an 8th of the bound shared out over the partitions), and the loop
//     takes the hot channel (the holders' records, align Step.Holds)
//     before in, and goes on taking it at the bound until a sealed phase
//     waits (held). A holder leaves hot with the record that passes the
//     watermark (align Outcome.Passed). A claim sends on a channel only
//     when none of its records is left in the other, so they arrive in
//     offset order; while a holder's records wait on in, the loop reads
//     in, held or not (gate.waitHot).
//   - One way to rebuild state: a failed transaction that the producer
//     survived (txn.Failure) and every rebalance drop the generation; the
//     next session starts from the committed offsets and their metadata
//     (align.Start), or from what this process committed last when the
//     group's offset fetch is older. Any other commit error (fenced, a
//     record too large) stops the instance.
//   - Metrics and logs are emitted where the session reports a change:
//     outcomes per record (records in, quarantine reasons, a full dedupe
//     cache), Batches when committed (records and markers out, duplicates,
//     quarantined, phases sealed, durations), Step's transitions (pause,
//     resume, idle, live, seal timeouts). Building the status changes
//     nothing but the level gauges it feeds (buffered bytes, watermark lag,
//     global phase).
//   - Buffered bytes stay under PHASEGATE_MAX_BUFFER_BYTES: partitions ahead
//     are paused at half of it; records already past the gates when a pause
//     is decided (the loop's inbound channel, a claim's hand-over) still
//     arrive. The bound holds while they fit in the other half: with
//     1.3 KiB records and a 512 KiB bound the peak measured 347-415 KiB
//     (TestBufferBoundUnderSkew); with a 256 KiB bound it could exceed it on
//     a loaded machine.
package proxy
