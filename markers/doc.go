// Package markers is phasegate's wire format, version 1 (Version), as
// MARKERS.md defines it: the phasegate.* record headers, the
// phase of a record, record identities, the JSON value of marker records,
// the routing of records to output partitions, and a Reader with which a
// join consumer (and every pipeline test) checks an output partition and
// gets whole phases back.
//
// The package is a leaf: the standard library only, no Kafka client, no
// package-level state, no clock. Headers are plain byte slices
// (Header, or key and value passed to Meta.Observe), so callers holding
// sarama or franz-go headers use it without conversion.
//
// Invariants:
//   - One version: every marker written says "v":1, and a value with any
//     other "v" is rejected. A change to MARKERS.md is a new version and a
//     new package version, never a silent change here.
//   - Strict in, canonical out: what this package writes, its decoders
//     accept and read back unchanged (AppendPhase/ParsePhase,
//     AppendSource/ParseSource, Marker.AppendOutput/DecodeOutputMarker for
//     a marker that passes ValidateOutput); what it reads is never guessed
//     at: a malformed phase header is an error, not a fall back to the
//     timestamp.
//   - Unknown JSON fields of a marker and unknown phasegate.* headers are
//     ignored; known ones given twice are errors.
//   - The per-record functions (ParsePhase, PhaseOf, Meta.Observe,
//     Meta.Check, Inspect, AppendIdentity, AppendSource) do not
//     allocate, on success or error: their errors are the package's
//     sentinels, compared with errors.Is. Benchmarks in bench_test.go hold
//     them to it.
//   - Every other error either wraps a sentinel (ErrSource), is a
//     *MalformedError (errors.Is ErrMalformed), or is a *Violation.
//   - A Reader reports every broken rule of MARKERS.md section 3.2 on its
//     partition and returns a phase only when its marker was read; it
//     never returns data whose marker it did not see.
//
// Routing (MARKERS.md section 4) lives in proxy and the input-marker rules
// of section 3.1 in dedupe and proxy, which own the state they need.
//
// Everything here is safe for concurrent use except a Meta and a Reader,
// which belong to one goroutine each.
package markers
