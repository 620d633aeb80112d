// Package app is the HTTP face of a phasegate process, shared by the
// production sidecar (cmd/sidecar) and the demo (cmd/demo) so that both
// serve the same endpoints and the same live view: / (the page), /metrics,
// /healthz, /readyz and /phases, plus Go's profiler when asked.
//
// Invariants:
//   - /healthz answers 200 from the moment Listen returns: a process that is
//     still starting (probing brokers, checking topics) is alive.
//   - /readyz answers 200 only while a pipeline is attached, consuming and
//     advancing (proxy.Pipeline.Ready), and never after Stopping; before a
//     pipeline is attached it answers 503 naming the start-up step.
//   - /phases answers 503 with the start-up step until a pipeline is
//     attached, so `sidecar status` can say the sidecar is starting.
//   - /phases answers a summary of the partitions (proxy.Phases: counts,
//     holders of the global watermark, the ?top=N most lagging), bounded by
//     N and the number of topics, not by the partitions; every partition's
//     row only with ?partitions=all. A query it cannot read answers 400 with one
//     line naming the parameter, never a guess.
//
// The package reads no environment and logs only through the logger it is
// given.
package app
