// Package deploy holds phasegate's deployment artifacts and their offline
// validation: the Kubernetes manifests in kubernetes/ are decoded strictly
// (unknown or duplicate fields fail) into the k8s.io/api types and checked
// against what the sidecar needs (a transactional ID from the pod name,
// probes on /healthz and /readyz, a grace period above the 25 s shutdown,
// a memory limit of at least twice the buffer bound + 64 MiB, non-root with
// a read-only root filesystem, an environment `sidecar config` accepts);
// the Grafana dashboard in grafana/ may only query metrics the sidecar
// registers. It is its own Go module so that k8s.io/api stays out of the
// main module's go.mod; `make test` runs it.
package deploy
