// Package watermarks decides when a phase is sealed and which input
// partitions to pause. It is pure: no Kafka client, no goroutine, no global
// state, and time only through Config.Now. A Tracker is not safe for
// concurrent use; the one pipeline goroutine that owns it makes every call.
//
// The pipeline Adds each input partition, reports every data record (Record),
// input marker (Marker) and lag against the last stable offset (Lag), calls
// Advance after each batch and on a ticker, republishes the Seals it returns,
// and applies Actions to its consumers.
//
// # Terms
//
// A partition has passed phase N when it delivered a marker for a phase >= N,
// a record whose phase header is > N, or a timestamp t with
// t - MaxOutOfOrderness >= (N+1) × PhaseLength (MARKERS.md section 1).
// Low(p) is the lowest phase p has not passed; its time watermark is its
// newest timestamp minus MaxOutOfOrderness. Both start at the global values
// when p is added and never decrease. Header phases never move the time
// watermark: producers that name phases may use IDs unrelated to time.
// A phase is open while it holds buffered records.
//
// # Invariants
//
//  1. Idle. p is idle when IdleTimeout > 0, its lag is known and 0, it is not
//     effectively paused, and it had no record or marker for IdleTimeout of
//     unpaused time. On resume the quiet clock restarts (paused time never
//     counts), and so it does when the lag becomes known again (time during
//     which the brokers could not be asked never counts either). IdleTimeout 0 means never idle. Any record or marker makes an
//     idle partition live again; a record of a sealed phase is still Late.
//     Idleness is decided in Advance.
//  2. Global watermark. G, the first unsealed phase, is max(previous G, min
//     over live partitions of Low(p)); when every partition is idle, max over
//     all partitions of Low(p) and past the newest open phase: no partition
//     has a record to give, so every buffered phase is complete and the last
//     phases seal with cause idle instead of waiting for data that may never
//     come. With
//     no partitions it is unchanged. GlobalMs is computed the same way from
//     the time watermarks. Neither ever decreases. A Floor (the lowest
//     watermark of the other trackers sharing the global watermark, e.g. the
//     tasks of other instances) caps the candidate; Local is the candidate
//     before the cap: what this tracker tells the others.
//  3. Sealing. A phase is sealed once G passes it and never reopens: Record
//     returns Late for it. Advance returns each open phase exactly once, in
//     ascending order, with cause idle if some idle partition had Low <= N,
//     else markers if every partition sent a marker >= N, else watermark.
//     Phases without records are sealed silently.
//  4. Seal timeout. The timeout is p99 × 1.5 of the durations (Opened →
//     Sealed) of the last 256 phases not sealed by timeout, clamped to
//     [SealTimeoutMin, SealTimeoutMax]; SealTimeoutMax before 20 phases were
//     observed. When the lowest open phase (the one holding G back) has been
//     open longer than the timeout, it is counted once in Snapshot().Timeouts;
//     PolicyWait keeps waiting, PolicySeal seals it and every phase below it
//     with cause timeout and then looks at the next open phase.
//  5. Backpressure. Buffered bytes are the bytes of records in open phases,
//     released when the phase is sealed. From buffered bytes >=
//     MaxBufferBytes/2 until they fall to <= MaxBufferBytes/4, every live
//     partition ahead of G (Low(p) > G) is asked to pause with reason
//     "buffer". A partition holding the minimum (Low(p) <= G), including a
//     formerly idle one that came back behind, is never effectively paused:
//     requests on it are deferred, and a paused partition that G reaches is
//     resumed in that same Advance. Every pause has a reason and so a resume
//     condition; pause decisions are made in Advance, Pause and Resume.
//  6. Cost. Record is O(1) amortised and does not allocate in steady state:
//     phase state is allocated (or reused) once per phase, not per record.
//     Advance is O(partitions) plus O(partitions) per returned Seal for its
//     straggler statistics.
//
// Phase ID 2^64-1 cannot be passed or sealed reliably (G cannot move past it);
// producers must use smaller IDs.
package watermarks
