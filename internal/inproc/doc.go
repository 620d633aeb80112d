// Package inproc runs a phasegate pipeline inside the calling process, for
// tests of other packages and for the demo: client settings sized for tests
// and a runner that dials, runs and stops a pipeline.
//
// It is the only internal package that imports proxy besides internal/app;
// internal/kafkatest (the broker and the independent client) never does, so
// the production sidecar can stay free of the test broker.
//
// Invariants: StartSidecar returns a pipeline whose Run is already going;
// Stop cancels it and returns Run's error, exactly once.
package inproc
