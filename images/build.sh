#!/usr/bin/env bash
# images/build.sh: every container image the tests use, built on this machine
# from Debian's packages, Maven Central's jars and this checkout, because no
# image registry is reachable here (`make images`).
#
#   images/build.sh [all|base|kafka|go|runtime|phasegate]...
#
# Images (each labelled phasegate.inputs=<sha256 of what it is built from>,
# and skipped when an image with that label is already present):
#   phasegate-local/debian-jre:bookworm  debootstrap minbase + openjdk-17-jre-headless,
#                                        from the mirror apt is configured with (~3 min)
#   phasegate-local/kafka:4.1.2          Apache Kafka from e2e/kafka/kafka.sh's jars, KRaft,
#                                        configured like apache/kafka by KAFKA_* variables
#   phasegate-local/go:<go version>      the base plus this machine's Go toolchain and CA bundle: the
#                                        Dockerfile's builder (GO_IMAGE) instead of golang
#   phasegate-local/static:nonroot       scratch + CA certificates + a nonroot user (65532):
#                                        the Dockerfile's RUNTIME_IMAGE instead of distroless
#   phasegate:local                      the project's Dockerfile with the two above
#
# PHASEGATE_IMAGES_REBUILD=1 rebuilds even when the label matches.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
readonly ROOT HERE="$ROOT/images"

readonly BASE_IMAGE=phasegate-local/debian-jre:bookworm
readonly BASE_SUITE=bookworm
readonly BASE_INCLUDE=openjdk-17-jre-headless,ca-certificates
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' e2e/kafka/pom.xml)"
readonly KAFKA_VERSION KAFKA_IMAGE="phasegate-local/kafka:$KAFKA_VERSION"
GO_VERSION="$(go env GOVERSION)"
readonly GO_VERSION GO_IMAGE="phasegate-local/go:${GO_VERSION#go}"
readonly RUNTIME_IMAGE=phasegate-local/static:nonroot
readonly PHASEGATE_IMAGE="${PHASEGATE_IMAGE:-phasegate:local}"

log() { printf 'images/build.sh: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# The legacy builder: the docker CLI may be newer than the engine and would
# otherwise ask for buildx, which no registry can provide here.
export DOCKER_BUILDKIT=0

# dbuild ARGS...: docker build, quiet; its output only when it fails (the
# legacy builder's deprecation notice otherwise drowns the rest).
dbuild() {
  local out
  out="$(mktemp)"
  if ! docker build -q --force-rm "$@" >"$out" 2>&1; then
    grep -v -e 'DEPRECATED' -e 'BuildKit' -e 'environment-variable' "$out" | tail -n 40 >&2
    rm -f "$out"
    return 1
  fi
  rm -f "$out"
}

# current IMAGE SUM: true when IMAGE exists with phasegate.inputs=SUM.
current() {
  [[ "${PHASEGATE_IMAGES_REBUILD:-}" != 1 ]] &&
    [[ "$(docker image inspect -f '{{index .Config.Labels "phasegate.inputs"}}' "$1" 2>/dev/null)" == "$2" ]]
}

sum_of() { sha256sum | cut -c1-16; }

# mirror: the Debian mirror this machine's apt already uses (deb822 .sources
# files first, then sources.list); never written into the repository.
mirror() {
  local m
  m="$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v -- '-security' | head -n1)"
  [[ -n "$m" ]] || m="$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
    awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' | grep -v -- '-security' | head -n1)"
  [[ -n "$m" ]] || die "no Debian mirror in /etc/apt (URIs: in sources.list.d/*.sources or deb lines in sources.list)"
  echo "$m"
}

# drop_rootfs DIR: removes a debootstrap target, unmounting first what a
# failed debootstrap may have left mounted in it (proc, sys), so that rm
# never walks into the host's /proc.
drop_rootfs() {
  findmnt -rn -o TARGET | grep -F "$1/" | sort -r | xargs -r umount -l 2>/dev/null || true
  if findmnt -rn -o TARGET | grep -qF "$1/"; then
    log "still mounted under $1; not removing it"
    return
  fi
  rm -rf "$1" "$1.log"
}

build_base() {
  local sum m dir t0=$SECONDS
  sum="$(printf 'suite=%s include=%s variant=minbase v1' "$BASE_SUITE" "$BASE_INCLUDE" | sum_of)"
  if current "$BASE_IMAGE" "$sum"; then
    log "$BASE_IMAGE is current"
    return
  fi
  command -v debootstrap >/dev/null || die "debootstrap missing: run scripts/docker-engine.sh (it installs it)"
  m="$(mirror)"
  dir="$(mktemp -d "${TMPDIR:-/tmp}/phasegate-rootfs-XXXXXX")"
  # shellcheck disable=SC2064 # expand dir now
  trap "drop_rootfs '$dir'" RETURN
  log "debootstrap $BASE_SUITE (minbase + $BASE_INCLUDE) from apt's mirror into $dir (about 3 min)"
  debootstrap --variant=minbase --include="$BASE_INCLUDE" "$BASE_SUITE" "$dir" "$m" \
    >"$dir.log" 2>&1 || {
    tail -n 30 "$dir.log" >&2
    die "debootstrap failed (log: $dir.log)"
  }
  rm -f "$dir.log"
  # Keep the image small: no apt lists or caches, no docs.
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/*
  tar -C "$dir" -c . | docker import \
    --change "LABEL phasegate.inputs=$sum" \
    --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
  log "$BASE_IMAGE built in $((SECONDS - t0)) s ($(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | numfmt --to=iec))"
}

build_kafka() {
  local libs sum ctx t0=$SECONDS
  libs="$(./e2e/kafka/kafka.sh fetch)" || die "e2e/kafka/kafka.sh fetch failed"
  sum="$( (
    docker image inspect -f '{{.Id}}' "$BASE_IMAGE"
    cat "$HERE"/kafka/* e2e/kafka/log4j2-broker.xml e2e/kafka/log4j2-tools.xml
    (cd "$libs" && ls -l)
  ) | sum_of)"
  if current "$KAFKA_IMAGE" "$sum"; then
    log "$KAFKA_IMAGE is current"
    return
  fi
  ctx="$(mktemp -d "${TMPDIR:-/tmp}/phasegate-kafka-ctx-XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$ctx'" RETURN
  cp -r "$libs" "$ctx/libs"
  cp "$HERE"/kafka/* "$ctx/"
  cp e2e/kafka/log4j2-broker.xml e2e/kafka/log4j2-tools.xml "$ctx/"
  dbuild --build-arg BASE_IMAGE="$BASE_IMAGE" --label "phasegate.inputs=$sum" \
    -t "$KAFKA_IMAGE" "$ctx" || die "docker build $KAFKA_IMAGE failed"
  log "$KAFKA_IMAGE built in $((SECONDS - t0)) s"
}

build_go() {
  local goroot sum t0=$SECONDS
  goroot="$(go env GOROOT)"
  sum="$( (
    docker image inspect -f '{{.Id}}' "$BASE_IMAGE"
    echo "$GO_VERSION $goroot"
    cat /etc/ssl/certs/ca-certificates.crt
  ) | sum_of)"
  if current "$GO_IMAGE" "$sum"; then
    log "$GO_IMAGE is current"
    return
  fi
  log "building $GO_IMAGE from $goroot"
  local ctx
  ctx="$(mktemp -d "${TMPDIR:-/tmp}/phasegate-go-ctx-XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$ctx'" RETURN
  # This machine's CA bundle too: `go mod download` in the build must trust
  # what the host trusts on its way to the module proxy.
  printf 'FROM %s\nCOPY go /usr/local/go\nCOPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\nENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local\n' \
    "$BASE_IMAGE" >"$ctx/Dockerfile"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
  cp -a "$goroot" "$ctx/go"
  rm -rf "$ctx/go/test" "$ctx/go/pkg/obj" "$ctx/go/api"
  dbuild --label "phasegate.inputs=$sum" -t "$GO_IMAGE" "$ctx" || die "docker build $GO_IMAGE failed"
  log "$GO_IMAGE built in $((SECONDS - t0)) s"
}

build_runtime() {
  local sum t0=$SECONDS ctx
  sum="$(cat "$HERE"/runtime/* /etc/ssl/certs/ca-certificates.crt | sum_of)"
  if current "$RUNTIME_IMAGE" "$sum"; then
    log "$RUNTIME_IMAGE is current"
    return
  fi
  ctx="$(mktemp -d "${TMPDIR:-/tmp}/phasegate-runtime-ctx-XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$ctx'" RETURN
  cp "$HERE"/runtime/* "$ctx/"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
  dbuild --label "phasegate.inputs=$sum" -t "$RUNTIME_IMAGE" "$ctx" ||
    die "docker build $RUNTIME_IMAGE failed"
  log "$RUNTIME_IMAGE built in $((SECONDS - t0)) s"
}

# The project's Dockerfile, as a user with a registry runs it, but with the
# local builder and runtime images. Its `go mod download` reaches the Go
# module proxy through the host's network.
build_phasegate() {
  local sum t0=$SECONDS
  sum="$( (
    docker image inspect -f '{{.Id}}' "$GO_IMAGE" "$RUNTIME_IMAGE"
    git ls-files -z -- go.mod go.sum Dockerfile '*.go' | xargs -0 sha256sum
    git status --porcelain -- go.mod go.sum Dockerfile '*.go' | sed 's/^...//' | xargs -r sha256sum
  ) | sum_of)"
  if current "$PHASEGATE_IMAGE" "$sum"; then
    log "$PHASEGATE_IMAGE is current"
    return
  fi
  log "building $PHASEGATE_IMAGE from ./Dockerfile (GO_IMAGE=$GO_IMAGE RUNTIME_IMAGE=$RUNTIME_IMAGE)"
  dbuild --network host --build-arg GO_IMAGE="$GO_IMAGE" --build-arg RUNTIME_IMAGE="$RUNTIME_IMAGE" \
    --build-arg GOPROXY="$(go env GOPROXY)" \
    --label "phasegate.inputs=$sum" -t "$PHASEGATE_IMAGE" . || die "docker build $PHASEGATE_IMAGE failed"
  log "$PHASEGATE_IMAGE built in $((SECONDS - t0)) s"
}

docker info >/dev/null 2>&1 || die "no Docker engine answers: run scripts/docker-engine.sh first"
(($# > 0)) || set -- all
for what in "$@"; do
  case "$what" in
  all) build_base && build_kafka && build_go && build_runtime && build_phasegate ;;
  base) build_base ;;
  kafka) build_base && build_kafka ;;
  go) build_base && build_go ;;
  runtime) build_runtime ;;
  phasegate) build_base && build_go && build_runtime && build_phasegate ;;
  *) die "unknown image '$what' (all, base, kafka, go, runtime, phasegate)" ;;
  esac
done
