#!/usr/bin/env bash
# e2e/run.sh: the real-broker suite, what `make e2e` runs.
#
# Fetches Apache Kafka's jars first (e2e/kafka/kafka.sh fetch; cached), then
# runs the scenarios F1-F7 against a broker taken from PHASEGATE_E2E_BROKERS,
# a Docker engine (testcontainers), or kafka.sh, in that order, and prints
# each scenario's line of counts again at the end.
#
# Extra arguments go to `go test` (e.g. -run 'TestF1').
# Environment: CI=true (a missing broker fails), PHASEGATE_E2E_BROKERS,
# PHASEGATE_E2E_SIDECAR (a prebuilt binary to test), PHASEGATE_E2E_RACE=1,
# PHASEGATE_E2E_RECORDS (fewer records for a quick local run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! ./e2e/kafka/kafka.sh fetch >/dev/null; then
  if [[ "${CI:-}" == true ]]; then
    echo "e2e/run.sh: fetching Apache Kafka failed (CI=true: a failure)" >&2
    exit 1
  fi
  echo "e2e/run.sh: fetching Apache Kafka failed; only PHASEGATE_E2E_BROKERS or Docker can provide a broker" >&2
fi

out="$(mktemp "${TMPDIR:-/tmp}/phasegate-e2e-XXXXXX.log")"
trap 'rm -f "$out"' EXIT
start=$SECONDS
set +e
go test -race -tags e2e -count=1 -timeout 45m ./e2e/... -v "$@" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
echo
echo "== e2e summary ($((SECONDS - start)) s) =="
grep -E '^(F[1-8] |S[1-4] |M[1-3] |P1 |R1 |R2-[a-z]+ |START |e2e: )' "$out" || true
exit "$status"
