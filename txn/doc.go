// Package txn owns the life of phasegate's transactional producer: begin, write
// a batch, add the input offsets with the consumer group's metadata (KIP-447
// fencing), commit, and on failure abort, recreate or stop.
//
// Invariants:
//
//   - One transaction at a time: Commit is the only operation that touches the
//     producer and it is not safe for concurrent use. The pipeline goroutine
//     owns the Producer.
//   - Every failure is decided in one place (classify): abortable errors are
//     aborted; fatal and indefinite errors (timeouts, network errors, an
//     out-of-order sequence) close the producer and create a new one, which
//     bumps the epoch (InitProducerId) before anything else is written; a
//     fenced producer is never recreated: another instance owns the
//     transactional ID, and Commit returns ErrFenced.
//   - After any error other than ErrFenced the caller must rewind its
//     consumers to the last committed offsets: nothing of the failed batch is
//     visible to read_committed readers.
//   - A batch always holds at least one record (sarama drops a transaction
//     that holds only offsets); Commit refuses an empty batch.
package txn
