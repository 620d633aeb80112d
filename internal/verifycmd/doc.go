// Package verifycmd is `sidecar verify` (Run): it reads an aligned topic
// with read_committed between fixed offsets (internal/topicread), feeds
// every record to the one verifier of the wire format (internal/verify's
// Checker), prints violations as they are found, then the phase table,
// the histograms and a verdict; with --inputs it also accounts for every
// input record of the checked phases (verify.Account).
//
// Invariants:
//   - Each partition's range is fixed before reading (its end at most the
//     last stable offset at start), so a run ends even while the sidecar
//     writes on.
//   - Memory is bounded: beyond --max-open-phases only the partitions
//     holding the oldest open phase back are read, and the text phase
//     table is spooled to an unlinked temporary file.
//   - The exit status says what was found: 0 whole, 1 violations, 2 bad
//     usage (one line naming the flag or variable), 3 the cluster could
//     not be read, 130 interrupted (what was checked so far is printed).
//   - One goroutine reads and feeds the checker; Run waits for it.
//
// The environment is read through internal/config (LoadVerify), never
// directly; the signal context comes from cmd/sidecar.
package verifycmd
