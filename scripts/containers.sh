#!/usr/bin/env bash
# scripts/containers.sh: the parts of `make test` that need a Docker engine
# and the images of `make images` (issue 33), each timed:
#   1. compose: phasegate's image and docker-compose.yml running (scripts/compose-smoke.sh);
#   2. container broker: e2e's single testcontainers broker on the local
#      Kafka image (F1 with 20,000 records);
#   3. nemesis: e2e/cluster's faults on a three-broker cluster: (a) and (d)
#      here, all six with `make nemesis` (NEMESIS=all);
#   4. ACLs: the sidecar as a principal with the minimal ACLs of
#      docs/SECURITY.md on a SASL_SSL broker, then without each: a non-zero
#      exit, nothing committed, an error naming the permission and the
#      resource (about 2 min; ACLS=0 skips it).
# Without a Docker engine it says so and exits 0, except with CI=true,
# where that is a failure. NEMESIS='^[ad]-' (a -run pattern) picks faults.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NEMESIS="${NEMESIS:-^[ad]-}"
[[ "$NEMESIS" == all ]] && NEMESIS=.

if ! timeout 10 docker info >/dev/null 2>&1; then
  if [[ "${CI:-}" == true ]]; then
    echo "containers.sh: FAIL: no Docker engine answers (run scripts/docker-engine.sh; CI=true: a failure)" >&2
    exit 1
  fi
  echo "containers.sh: no Docker engine answers: compose smoke and nemesis NOT run (scripts/docker-engine.sh, then make images)" >&2
  exit 0
fi
export TESTCONTAINERS_RYUK_DISABLED=true PHASEGATE_CLUSTER=1
summary=()
failed=0
# part NAME CMD...: runs one part, timed; a failure is counted and the
# next part still runs.
part() {
  local name="$1" t0=$SECONDS status=0
  shift
  echo "== containers: $name"
  "$@" || status=$?
  summary+=("$name: $((SECONDS - t0)) s$( ((status == 0)) || echo " FAILED (exit $status)")")
  ((status == 0)) || failed=1
}

out="$(mktemp "${TMPDIR:-/tmp}/phasegate-containers-XXXXXX.log")"
trap 'rm -f "$out"' EXIT
part compose ./scripts/compose-smoke.sh
# quiet: testcontainers' progress lines out.
quiet() { grep -v -E '^[0-9/]+ [0-9:]+ (🐳|✅|🔔|⏳|🚫|🔥)'; }
container_broker() {
  set -o pipefail
  PHASEGATE_E2E_KAFKA_IMAGE=phasegate-local/kafka:4.1.2 PHASEGATE_E2E_RECORDS=20000 \
    go test -tags e2e -count=1 -timeout 15m -run '^TestF1' -v ./e2e/ 2>&1 | quiet | tee -a "$out"
}
part "container broker (F1 on phasegate-local/kafka)" container_broker
nemesis() {
  set -o pipefail
  go test -tags e2e -count=1 -timeout 90m -run "TestNemesis/$NEMESIS" -v ./e2e/cluster/ 2>&1 | quiet | tee -a "$out"
}
part "nemesis ($NEMESIS)" nemesis
acls() {
  set -o pipefail
  go test -tags e2e -count=1 -timeout 30m -run 'TestACLs' -v ./e2e/cluster/ 2>&1 | quiet | tee -a "$out"
}
if [[ "${ACLS:-1}" != 0 ]]; then
  part ACLs acls
fi
echo
echo "== containers summary"
grep -E '^(F1|N[a-f]|ACL) |^e2e: broker' "$out" || true
printf '%s\n' "${summary[@]}"
exit "$failed"
