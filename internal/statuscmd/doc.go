// Package statuscmd is `sidecar status` (Run, Usage): it asks a running
// sidecar for its /phases and prints the terminal's phase view: the
// process, the partitions summarised (counts per state, those holding the
// global watermark back, the most lagging), the fleet's tasks, every
// partition's row with -all, the open phases and the last sealed ones.
//
// Invariants:
//   - What is printed follows from the answer alone: ages are relative to
//     its Updated, never to this machine's clock.
//   - An answer that is not a phase status (another web server, an error
//     page) is described by its status and content type, never dumped;
//     nothing printed on stderr holds markup.
//   - A sidecar that predates the summary (every row, no summary) is
//     summarised here with proxy.Summarize, as the sidecar would.
//   - Exit status: 0 when printed, 1 when the sidecar cannot be reached,
//     is starting or is not a phasegate sidecar, 2 on bad arguments.
//
// It reads PHASEGATE_HTTP_ADDR from the environment map it is handed,
// and nothing else of the environment.
package statuscmd
