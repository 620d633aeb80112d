// Package dedupe detects retries for phasegate: a record whose identity
// (phasegate.id, or topic/partition/offset) was already seen in the same
// phase is a proven duplicate and is dropped (MARKERS.md section 5). It also
// classifies input markers per partition (MARKERS.md section 3.1).
//
// It is a leaf: no Kafka client, no goroutines, no clock, no globals.
// Neither Cache nor Markers is safe for concurrent use; the session's
// goroutine owns them.
//
// # Lifetime
//
// A Cache and a Markers live for one session and are never reset: after a
// rewind to committed offsets or a rebalance, the caller (align.Session)
// builds a new Session with a new Cache and a new Markers, so no identity or
// marker phase of the old session survives into the new one.
//
// # Invariants of Cache
//
//   - An open phase (added to, not sealed) is never evicted, whatever the
//     bounds: forgetting it would let a retry through into the output.
//   - At most Config.MaxSealedPhases sealed phases are held; the least
//     recently used (sealed or added to) is evicted first.
//   - The identity count in Stats is exact: incremented by each new identity,
//     decremented by each eviction. Evictions and EvictedIdentities only grow.
//   - Add never reports a duplicate for an identity not added before in the
//     same phase (up to the hash bound below), and always reports one when
//     the phase has been held since that identity was added.
//
// # Contract with the caller
//
// Two duties fall on the caller; align.Session does both.
//
//   - ErrFull: the count exceeds Config.MaxIdentities only while no sealed
//     phase is left to evict (apart from the one an Add just wrote to). Add
//     then still records the identity and returns ErrFull. The caller pauses
//     its partitions ahead of the global watermark (the one holding it keeps
//     running, so phases can seal) and resumes them once Cache.Full reports
//     false, which a Seal brings about by evicting sealed phases.
//   - Late records of evicted phases: a phase sealed and since evicted is
//     unknown again, so Add re-opens it. When the record is late (its phase
//     was already sealed by the watermarks), the caller Seals that phase
//     again after Add; otherwise the re-opened phase, never evicted while open,
//     would be held for the Cache's life.
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
// An open phase's identities are in a Go map. Its Seal moves them into a
// sorted slice (16 bytes an identity, against about 26 in the map; the
// sealed phases, kept only to recognise late retries, hold most of the
// identities) and gives the map back for the next open phase; a late record
// of a sealed phase goes into a small map beside the slice. A steady stream
// of phases thus allocates nothing per Add and five times per phase (its
// set, its sorted slice and the sort's two scratch slices, its LRU entry). Go maps never shrink, so a map that
// once held more than max(MaxIdentities/MaxSealedPhases, 256) keys is left
// to the garbage collector instead of reused; memory held is thus about 16
// bytes per sealed identity, 26 per open one, plus that limit for each
// reused map (at most eight).
package dedupe
