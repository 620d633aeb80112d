// Package e2e proves phasegate on a real Apache Kafka broker, with the built
// sidecar binary running as its own process, the way users run it. The
// tests are behind the build tag e2e (go test -tags e2e ./e2e/...; make e2e
// runs e2e/run.sh).
//
// The broker comes from PHASEGATE_E2E_BROKERS when set; otherwise from
// testcontainers-go (apache/kafka) when a Docker engine answers; otherwise
// from e2e/kafka/kafka.sh, which the suite starts and stops. With CI=true a
// missing broker fails the run; it is never a skip. The suite's working
// directory (each instance's log, the broker's state) is removed when every
// test passed, and kept when one failed or PHASEGATE_E2E_KEEP is set.
//
// Invariants every scenario checks, with one call of the shared verifier
// (internal/verify) on what independent clients read back:
//
//   - the output topic, read with read_committed by franz-go, keeps every
//     rule of MARKERS.md section 3.2 on every partition;
//   - every record found in the fork topics is in the output or the
//     quarantine exactly once, or is a proven duplicate;
//   - every record read with read_committed is also in the read_uncommitted
//     view at the same offset with the same value; what only the
//     read_uncommitted view holds belongs to aborted transactions;
//   - Kafka's own Java ConsoleConsumer (--isolation-level read_committed)
//     reads the same records and the same markers as franz-go;
//   - no transaction of the sidecar's transactional ID is left Ongoing.
//
// Inputs are written by franz-go, never by phasegate code; the input log
// the verifier checks against is read back from the fork topics, so a
// produce retry the test did not see is still accounted for.
package e2e
