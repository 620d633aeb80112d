// Package fleet is the one global watermark of several phasegate
// instances sharing a consumer group (docs/DESIGN.md, "Beyond one machine";
// docs/FLEET.md): the record format of the compacted watermark topic
// (Report, DecodeReport) and the View that combines the latest report of
// every task into the global watermark.
//
// It is a leaf like watermarks: no Kafka client, no goroutine, no clock,
// no globals. Task IDs are int32 (tasks.ID's underlying type) so that it
// needs nothing else of the project. A View belongs to one goroutine;
// Report and DecodeReport are safe for concurrent use.
//
// Invariants (docs/FLEET.md, rules F1 to F8):
//   - A task without a usable report holds the watermark: Advance does not
//     move while any task of the layout has no report of the instance's
//     current generation under this layout.
//   - A report from an older generation than the task's held report is a
//     stale owner's and never replaces it, unless the held one comes from
//     beyond the instance's generation (a group that was reset).
//   - The global is the minimum low over live tasks, or the maximum high
//     when every task is idle, and never decreases.
//   - Reports carry the layout fingerprint; a report of another layout is
//     never used.
//   - Every open phase of every report of the layout is kept (DataPhases,
//     F7) until it is below the marked phase of every task's held report
//     (Prune, F8).
//   - What DecodeReport accepts, AppendValue writes back to a value that
//     decodes to the same Report; the JSON field names match as
//     encoding/json matches them (case-insensitively), which is lenient
//     on input, canonical on output.
package fleet
