// Package dedupe detects retries for phasegate: a record whose identity
// (phasegate.id, or topic/partition/offset) was already seen in the same
// phase is a proven duplicate and is dropped (MARKERS.md section 5). It also
// classifies input markers per partition (MARKERS.md section 3.1).
//
// It is a leaf: no Kafka client, no goroutines, no clock, no globals.
// Neither Cache nor Markers is safe for concurrent use; the pipeline
// goroutine owns them.
//
// # Invariants of Cache
//
//   - An open phase (added to, not sealed) is never evicted, whatever the
//     bounds: forgetting it would let a retry through into the output.
//   - At most Config.MaxSealedPhases sealed phases are held; the least
//     recently used (sealed or added to) is evicted first.
//   - The identity count in Stats is exact: incremented by each new identity,
//     decremented by each eviction and by Reset.
//   - The count exceeds Config.MaxIdentities only while no sealed phase is
//     left to evict (apart from the one an Add just wrote to). Add then still
//     records the identity and returns ErrFull; the caller pauses its input
//     until Cache.Full reports false, which a Seal can bring about.
//   - Add never reports a duplicate for an identity not added before in the
//     same phase (up to the hash bound below), and always reports one when
//     the phase has been held since that identity was added.
//
// # Hashing
//
// The cache never keeps the caller's id bytes. Each identity is stored as a
// 128-bit key made of two hash/maphash values under two random seeds chosen
// in New. A false duplicate needs two different identities of one phase to
// share both values. Treating each seeded maphash as a random function, with
// n identities in a phase the probability of any false duplicate there is at
// most n²/2 · 2⁻¹²⁸; for n = 2²⁰ that is 2⁴⁰/2¹²⁹ = 2⁻⁸⁹. The seeds are new
// per process, so identities cannot be crafted to collide in advance.
//
// # Memory
//
// Sets of evicted phases are cleared and reused for new phases, so a steady
// stream of phases allocates nothing per Add (Seal allocates one LRU entry).
// Go maps never shrink, so a set that once held more than
// max(MaxIdentities/MaxSealedPhases, 256) keys is left to the garbage
// collector instead of reused; memory held is thus about the identities held
// plus that limit for each phase held.
package dedupe
