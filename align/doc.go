// Package align is the alignment state of one consumer group session: what
// phasegate decides for every input record, when a phase seals, what one
// transaction writes, and which partitions to pause. It holds no Kafka
// client, starts no goroutine and reads time only through its injected
// clock, so the whole phase life (records, markers, duplicates, late, idle,
// pause, seal, commit, rewind) is tested without a broker.
//
// The caller (proxy, the Kafka side) owns one Session per session of the
// consumer group and makes every call from one goroutine:
//
//	s, _ := align.New[M](cfg, starts)  // from the committed offsets
//	out := s.Handle(rec)               // per record: an Outcome
//	st := s.Step()                     // after a batch of records, on a tick
//	// st.Batch: write it in ONE transaction, then s.Committed(st.Batch);
//	// if the transaction fails, drop s and build a new Session (rewind).
//	// st.Actions: pause or resume those partitions.
//
// Several instances share one global watermark through Floor, Local,
// Expect and DataPhases (docs/FLEET.md): proxy reports Local and
// DataPhases of its session for the tasks it owns, caps the session with
// the fleet's global watermark (Floor) and has it seal the phases other
// tasks hold data of (Expect). Config.Outputs restricts the markers to the
// output partitions of the tasks the session owns.
//
// M is the caller's message type (a *sarama.ConsumerMessage): align never
// looks into it, it only carries it from Handle to the Batch, so the
// caller can copy the record's headers when it writes it.
//
// Invariants:
//
//   - Every record handed to Handle ends in exactly one of: buffered in its
//     open phase (and later in exactly one Batch as a data write), a
//     quarantine write with a reason, a proven duplicate (counted in the
//     Batch that commits its offset), or resolved before this session (a
//     record read again below the committed position whose fate a committed
//     transaction decided).
//   - A Batch writes each sealed phase's data, then one marker on EVERY
//     output partition (MARKERS.md 3.2), phase by phase in ascending order,
//     then the quarantined records, then the input offsets. It takes the
//     oldest sealed phases up to Config.BatchBytes (at least one, and every
//     one up to the phase of a late record it quarantines); the rest wait
//     for the next Batch. The committed offset of a partition never passes
//     a record still buffered in a phase that is not in the Batch; its
//     metadata (commitMeta) carries the global watermark (the first sealed
//     phase left, if any), the consumed position and the last input marker,
//     so a committed phase never reopens after a restart, a phase left for
//     the next Batch is sealed again, and records read again are not
//     resolved twice.
//   - A session started from committed offsets builds no Batch until every
//     partition has been read again up to the consumed position (h) of the
//     last committed transaction, or its log ends before: an earlier Batch
//     would commit a smaller h, and after the next restart the records
//     between would be resolved a second time (TestExactlyOnce found it).
//   - At most one Batch is in flight: Step builds none until Committed is
//     called for the previous one. A failed transaction is never repaired
//     in place: the caller drops the Session and rebuilds one from the
//     committed offsets (one way to rebuild state).
//   - Backpressure: the tracker pauses partitions running ahead of the
//     global watermark while the buffer is over half of its bound, and this
//     package adds the reason "dedupe" while the dedupe cache is over its
//     identity bound with only open phases left (dedupe's contract); the
//     partition holding the global watermark is never paused.
//     BufferedBytes counts every record held: open phases, sealed phases
//     waiting for a Batch (Waiting, which the caller bounds while a Batch
//     is in flight: the partitions holding the watermark are never paused)
//     and the Batch in flight.
//   - Step reports the partitions holding the session's watermark back
//     (Holds): the caller reads their records first.
//   - Status is a pure function of the state: building it changes nothing.
//     Transitions (idle, live, paused, resumed, seal timeouts) are reported
//     by Step, once each, where they happen.
//   - Handle is the per-record path: it does not allocate in steady state,
//     but for the amortized growth of the buffers (TestHandleDoesNotAllocate;
//     proxy's BenchmarkHandle reports 0 allocs/op).
package align
