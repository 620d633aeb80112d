#!/usr/bin/env bash
# scripts/compose-smoke.sh: phasegate's image and docker-compose.yml,
# actually running (issue 33). Needs a Docker engine and the images of
# `make images` (nothing is pulled).
#
# 1. The image: `--help` exits 0, it runs as a non-root user (65532), and it
#    carries the HEALTHCHECK.
# 2. `docker-compose up` (Debian's 1.29 or the compose plugin) with
#    KAFKA_IMAGE and PHASEGATE_IMAGE set to the local images: the sidecar's
#    container turns healthy, runs as 65532, and from the host the README's
#    commands work: kcat reads phases with read_committed from
#    localhost:9092, /healthz and /phases answer on localhost:9464,
#    `sidecar verify` finds the aligned topic whole, and examples/join
#    joins whole phases.
# 3. `docker-compose down -v`, whatever happened.
#
# Environment: KAFKA_IMAGE, PHASEGATE_IMAGE (defaults: the local images),
# COMPOSE_SMOKE_WAIT (seconds for each wait, default 180).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export KAFKA_IMAGE="${KAFKA_IMAGE:-phasegate-local/kafka:4.1.2}"
export PHASEGATE_IMAGE="${PHASEGATE_IMAGE:-phasegate:local}"
readonly WAIT="${COMPOSE_SMOKE_WAIT:-180}" PROJECT=phasegate-smoke
t0=$SECONDS

log() { printf 'compose-smoke: %s\n' "$*" >&2; }
die() {
  log "FAIL: $*"
  exit 1
}

if command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose -p "$PROJECT")
elif docker compose version >/dev/null 2>&1; then
  compose=(docker compose -p "$PROJECT")
else
  die "neither docker-compose nor the compose plugin (scripts/docker-engine.sh installs docker-compose)"
fi
for img in "$KAFKA_IMAGE" "$PHASEGATE_IMAGE"; do
  docker image inspect "$img" >/dev/null 2>&1 || die "image $img missing: run 'make images' (nothing is pulled)"
done

# wait_for SECONDS WHAT CMD...: polls CMD every second.
wait_for() {
  local secs="$1" what="$2" deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
  log "$what after $((SECONDS - t0)) s"
}

# 1. The image alone.
docker run --rm "$PHASEGATE_IMAGE" --help >/dev/null 2>&1 || die "docker run $PHASEGATE_IMAGE --help did not exit 0"
user="$(docker image inspect -f '{{.Config.User}}' "$PHASEGATE_IMAGE")"
[[ "$user" == 65532:65532 ]] || die "$PHASEGATE_IMAGE runs as '$user', want 65532:65532 (nonroot)"
docker image inspect -f '{{json .Config.Healthcheck.Test}}' "$PHASEGATE_IMAGE" | grep -q '"/sidecar","healthcheck"' ||
  die "$PHASEGATE_IMAGE has no HEALTHCHECK running /sidecar healthcheck"
log "image $PHASEGATE_IMAGE: --help exits 0, user $user, HEALTHCHECK /sidecar healthcheck"

# 2. The compose stack.
logs="$(mktemp "${TMPDIR:-/tmp}/phasegate-compose-XXXXXX.log")"
down() {
  "${compose[@]}" logs --no-color >"$logs" 2>&1 || true
  "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
}
trap down EXIT
"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
# --no-build: the local image; a missing one is an error, not a build that
# would need the golang image.
# (1.29 warns about the secure profile's secret files even when the profile
# is off: the warning is dropped.)
"${compose[@]}" up -d --no-build >/dev/null 2>&1 || {
  "${compose[@]}" up -d --no-build 2>&1 | tail -n 20 >&2 || true
  die "docker-compose up failed"
}
log "docker-compose up -d in $((SECONDS - t0)) s (KAFKA_IMAGE=$KAFKA_IMAGE PHASEGATE_IMAGE=$PHASEGATE_IMAGE)"
cid="$("${compose[@]}" ps -q phasegate)"
[[ -n "$cid" ]] || die "no phasegate container"
healthy() { [[ "$(docker inspect -f '{{.State.Health.Status}}' "$cid")" == healthy ]]; }
wait_for "$WAIT" "phasegate container healthy" healthy || {
  docker inspect -f '{{json .State.Health}}' "$cid" >&2
  down
  tail -n 40 "$logs" >&2
  die "the phasegate container did not turn healthy within $WAIT s (logs: $logs)"
}
uid="$(docker top "$cid" -eo pid,uid,comm | awk 'NR > 1 && $3 == "sidecar" {print $2; exit}')"
[[ "$uid" == 65532 ]] || die "the sidecar process runs as uid '$uid', want 65532"
log "the sidecar runs as uid $uid"

# The README's host commands against the stack.
if ! command -v kcat >/dev/null 2>&1; then
  [[ "$(id -u)" == 0 ]] || die "kcat missing (apt-get install kcat)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; } ||
    die "apt-get install kcat failed"
fi
kcat_markers() {
  kcat -C -b localhost:9092 -t aligned -X isolation.level=read_committed -o beginning -e -q \
    -f 'p%p o%o key=%k headers=%h value=%s\n' 2>/dev/null | grep -c 'phasegate.marker=1'
}
has_markers() { (($(kcat_markers) >= 6)); }
wait_for "$WAIT" "kcat (read_committed, localhost:9092) reads phase markers" has_markers ||
  die "kcat read no committed phase marker from localhost:9092 within $WAIT s"
curl -fsS http://localhost:9464/healthz >/dev/null || die "http://localhost:9464/healthz does not answer 200"
curl -fsS http://localhost:9464/phases | grep -q . || die "http://localhost:9464/phases is empty"
# Captured first: grep -q would close the pipe early and fail it (pipefail).
join_log="$("${compose[@]}" logs --no-color join 2>/dev/null)"
grep -q 'phasegate.marker:1' <<<"$join_log" || die "the join service printed no marker"
bin="$(mktemp -d)/sidecar"
go build -o "$bin" ./cmd/sidecar
PHASEGATE_BROKERS=localhost:9092 PHASEGATE_OUTPUT_TOPIC=aligned "$bin" verify --progress=0 >"$logs.verify" 2>&1 ||
  die "sidecar verify on the compose stack's aligned topic: $(tail -n 5 "$logs.verify")"
log "sidecar verify: $(tail -n 1 "$logs.verify")"
# The Go join of examples/join (docs/CONSUMING.md), from the host, for 20 s:
# whole phases and no violation.
joinbin="$(dirname "$bin")/join"
go build -o "$joinbin" ./examples/join
timeout -s INT 20 "$joinbin" -brokers localhost:9092 -group compose-smoke >"$logs.join" 2>&1 || true
grep -q '^phase=.* joined=' "$logs.join" || die "go run ./examples/join printed no joined phase: $(tail -n 5 "$logs.join")"
! grep -q VIOLATION "$logs.join" || die "examples/join saw a violation: $(grep -m1 VIOLATION "$logs.join")"
log "examples/join: $(grep -c "^phase=" "$logs.join") (phase, partition) lines joined in 20 s, no violation"
rm -f "$logs.join"
rm -rf "$(dirname "$bin")" "$logs.verify"
log "ok: $(kcat_markers) markers read by kcat, /healthz and /phases answer, the join service prints markers ($((SECONDS - t0)) s)"
