// Package markers is phasegate's wire format, versions 1 (Version) and 2
// (VersionWriters), as MARKERS.md defines it: the phasegate.* record headers, the
// phase of a record, record identities, the JSON value of marker records,
// and a Reader with which a join consumer (and every pipeline test) checks
// an output partition, gets whole phases back, and learns where to commit
// and start again (checkpoints, section 6).
//
// The package is a leaf: the standard library only, no Kafka client, no
// package-level state, no clock. Headers are plain byte slices
// (Header, or key and value passed to Meta.Observe), so callers holding
// sarama or franz-go headers use it without conversion. What phasegate
// writes is built here too, into the caller's header type (HeaderLike):
// an output data record's headers (DataHeaders, AppendDataHeaders), a
// marker record's (AppendMarkerHeaders; Marker.AppendOutput is its value)
// and a quarantined record's (AppendQuarantineHeaders).
//
// Invariants:
//   - Versions: a marker of a one-writer partition, and every input
//     marker, says "v":1 and is byte for byte what version 1 wrote (no
//     "task", no "writers", no phasegate.task header); only a marker with
//     Writers >= 2 says "v":2 (MARKERS.md section 3.3). Input markers with
//     any "v" but 1, and output markers with any "v" but 1 or 2, are
//     rejected. A change to MARKERS.md is a new version, never a silent
//     change here.
//   - Strict in, canonical out: what this package writes, its decoders
//     accept and read back unchanged (AppendPhase/ParsePhase,
//     AppendSource/ParseSource, Marker.AppendOutput/DecodeOutputMarker for
//     a marker that passes ValidateOutput); what it reads is never guessed
//     at: a malformed phase header is an error, not a fall back to the
//     timestamp.
//   - Unknown JSON fields of a marker and unknown phasegate.* headers are
//     ignored; known ones given twice are errors.
//   - The per-record functions (ParsePhase, PhaseOf, Meta.Observe,
//     Meta.Check, Inspect, AppendIdentity, AppendSource, ParseTask,
//     DataHeaders.Keep) do not allocate, on success or error: their errors
//     are the package's sentinels, compared with errors.Is. Benchmarks in
//     bench_test.go (and, for Keep, output_test.go) hold them to it.
//   - Every other error either wraps a sentinel (ErrSource), is a
//     *MalformedError (errors.Is ErrMalformed), or is a *Violation.
//   - A Reader reports every broken rule of MARKERS.md sections 3.2 and
//     3.3 on its partition and returns a phase only when it is complete:
//     its marker was read (one writer), or every writer's marker for it or
//     a later phase was read (several writers, rule M8); it never returns
//     data whose completeness it did not see.
//
// Routing (MARKERS.md section 4) lives in align and the input-marker rules
// of section 3.1 in dedupe and proxy, which own the state they need.
//
// Everything here is safe for concurrent use except a Meta and a Reader,
// which belong to one goroutine each.
package markers
