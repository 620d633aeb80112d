#!/usr/bin/env bash
# bench-streams.sh: builds the Kafka Streams pass-through of `make bench`
# (bench/streams) and prints its Java classpath on stdout.
#
# Kafka Streams is fetched from Maven Central with Maven at the broker's
# version (kafka.version of e2e/kafka/pom.xml), into
# ~/.cache/phasegate/bench-streams-<version>/libs (PHASEGATE_BENCH_STREAMS_CACHE
# overrides), and the source compiled there with javac. Offline once ~/.m2
# holds the jars. Idempotent and locked: a cache whose stamp matches the
# version, the pom and the source is used as it is.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly SRC="$ROOT/bench/streams"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$ROOT/e2e/kafka/pom.xml")"
readonly KAFKA_VERSION
readonly CACHE="${PHASEGATE_BENCH_STREAMS_CACHE:-$HOME/.cache/phasegate/bench-streams-$KAFKA_VERSION}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
JAVAC="${JAVA_HOME:+$JAVA_HOME/bin/}javac"

log() { printf 'bench-streams.sh: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

[[ -n "$KAFKA_VERSION" ]] || die "no <kafka.version> in $ROOT/e2e/kafka/pom.xml"
command -v "$JAVA" >/dev/null 2>&1 || die "java not found (need Java 17 or newer; set JAVA_HOME or PATH)"
command -v "$JAVAC" >/dev/null 2>&1 || die "javac not found (need a JDK 17 or newer, not only a JRE)"

# The stamp names everything the build depends on.
stamp() {
  {
    echo "kafka=$KAFKA_VERSION"
    find "$SRC/pom.xml" "$SRC/log4j2.xml" "$SRC/src" -type f -print0 | sort -z | xargs -0 sha256sum | sed "s:$SRC/::"
  } | sha256sum | cut -d' ' -f1
}

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock -w 300 9 || die "timed out waiting for the lock $CACHE/.lock"

want="$(stamp)"
if [[ -f "$CACHE/complete" && "$(cat "$CACHE/complete")" == "$want" ]]; then
  echo "$CACHE/classes:$CACHE/libs/*"
  exit 0
fi

command -v mvn >/dev/null 2>&1 || die "mvn not found (need Maven 3.6.3 or newer to fetch Kafka Streams)"
t0=$SECONDS
rm -rf "$CACHE/libs.tmp" "$CACHE/classes" "$CACHE/complete"
mlog="$CACHE/fetch.log"
fetch() {
  mvn -B "$@" -Dstyle.color=never -f "$SRC/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
    -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$CACHE/libs.tmp" >"$mlog" 2>&1
}
if ! fetch -o; then
  log "fetching Kafka Streams $KAFKA_VERSION with Maven (log: $mlog)"
  fetch || {
    tail -n 40 "$mlog" >&2
    die "mvn failed; full log in $mlog"
  }
fi
[[ -f "$CACHE/libs.tmp/kafka-streams-$KAFKA_VERSION.jar" ]] ||
  die "mvn succeeded but kafka-streams-$KAFKA_VERSION.jar is missing from $CACHE/libs.tmp"
rm -rf "$CACHE/libs"
mv "$CACHE/libs.tmp" "$CACHE/libs"
mapfile -t sources < <(find "$SRC/src" -name '*.java' | sort)
"$JAVAC" --release 17 -nowarn -d "$CACHE/classes" -cp "$CACHE/libs/*" "${sources[@]}" ||
  die "javac failed on ${sources[*]}"
cp "$SRC/log4j2.xml" "$CACHE/classes/log4j2.xml" # found on the classpath
echo "$want" >"$CACHE/complete" # written last: marks the cache complete
log "built the Kafka Streams $KAFKA_VERSION pass-through in $((SECONDS - t0)) s into $CACHE"
echo "$CACHE/classes:$CACHE/libs/*"
