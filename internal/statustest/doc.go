// Package statustest holds the phase status of a pipeline caught mid-run
// (proxy.Status values: Fixed, Many) and /phases handlers that serve them
// (Serve, ServeJSON), for the tests of `sidecar status`
// (internal/statuscmd) and of the live view's browser tests (cmd/sidecar).
//
// Invariants: every value is fixed (no clock, no randomness), so the
// tests' expected lines follow from the comments here; only tests import
// this package, so the sidecar binary never links it.
package statustest
