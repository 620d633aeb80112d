#!/usr/bin/env bash
# bench/run.sh: what `make bench` runs. Builds the sidecar and pgbench,
# starts a fresh Apache Kafka broker in bench/work/kafka with the project's
# script (unless BENCH_BROKERS names one), runs the suite, stops the broker,
# and prints the table. The table is also written to bench/results/, over the
# previous report of the same kind (report_name below): full.md for every
# step, else the steps joined by '+' (partitions.md, phasegate+paced.md).
#
#   BENCH_RECORDS=100000 make bench      a quick run (default 1,000,000)
#   BENCH_STEPS=phasegate,paced make bench   only some steps
#   BENCH_STEPS=phasegate,streams,paced   phasegate against Kafka Streams
#   BENCH_STEPS=partitions BENCH_PARTITIONS=512   the partition-count rows
#   BENCH_STEPS=instances BENCH_RECORDS=300000    1, 2, 3 instances of one group
#   BENCH_STEPS=partitions BENCH_PARTITIONS_HEAVY=only   the heavy 512-partition row
#   BENCH_STEPS=recovery                 SIGKILL and restart, phasegate and Streams
#   BENCH_STEPS=lanes                    lane skew: 3 instances x 3 tasks against 1
#   BENCH_PROFILE=1 make bench           CPU/heap/alloc profiles of each relay,
#                                        summarised with go tool pprof -top
#   BENCH_SIDECAR=/tmp/x/sidecar BENCH_COMMIT="x + patch" make bench
#                                        measure another sidecar build (an experiment)
#   BENCH_RESULTS_NAME=partitions-ab make bench
#                                        write bench/results/partitions-ab.md instead
# Every BENCH_* variable is described in bench/README.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly WORK="$ROOT/bench/work"
readonly KAFKA_SH="$ROOT/e2e/kafka/kafka.sh"
GO="${GO:-go}"

log() { printf 'bench: %s\n' "$*" >&2; }

# report_name is the report's file name without .md: one per kind of run, so
# that each new report replaces the last one of its kind (git keeps the
# earlier ones). BENCH_RESULTS_NAME when set; "full" when every step runs
# (BENCH_STEPS unset, or naming every step in any order); else the steps as
# given, joined by '+'.
readonly ALL_STEPS=ceiling,copier,phasegate,paced,streams,skew,partitions,instances,recovery,lanes
report_name() {
  local steps="${BENCH_STEPS:-$ALL_STEPS}" name
  steps="${steps// /}"
  if [[ -n "${BENCH_RESULTS_NAME:-}" ]]; then
    name="$BENCH_RESULTS_NAME"
  elif [[ "$(tr ',' '\n' <<<"$steps" | sort -u | paste -sd,)" == "$(tr ',' '\n' <<<"$ALL_STEPS" | sort -u | paste -sd,)" ]]; then
    name=full
  else
    name="${steps//,/+}"
  fi
  if [[ ! "$name" =~ ^[A-Za-z0-9][A-Za-z0-9+._-]*$ ]]; then
    log "BENCH_RESULTS_NAME or BENCH_STEPS gives the report name \"$name\": use letters, digits and + . _ -"
    return 2
  fi
  printf '%s\n' "$name"
}
report="$(report_name)" || exit 2
results_dir="${BENCH_RESULTS_DIR:-$ROOT/bench/results}"

mkdir -p "$WORK/bin" "$WORK/logs"
log "building the sidecar and pgbench"
(cd "$ROOT" && "$GO" build -o "$WORK/bin/sidecar" ./cmd/sidecar && "$GO" build -o "$WORK/bin/pgbench" ./bench/cmd/pgbench)

# The Kafka Streams pass-through (bench/streams), for the streams,
# partitions, recovery and lanes steps: fetched and compiled once into
# ~/.cache/phasegate.
streams_cp=""
if [[ -z "${BENCH_STEPS:-}" || ",${BENCH_STEPS// /}," =~ ,(streams|partitions|recovery|lanes), ]]; then
  log "building the Kafka Streams pass-through (scripts/bench-streams.sh)"
  streams_cp="$("$ROOT/scripts/bench-streams.sh")"
fi

kafka_version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$ROOT/e2e/kafka/pom.xml")"
java_version="$("${JAVA_HOME:+$JAVA_HOME/bin/}java" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)"
go_version="$("$GO" env GOVERSION)"
commit="$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(cd "$ROOT" && git status --porcelain -- cmd proxy txn markers watermarks dedupe internal 2>/dev/null)" ]]; then
  commit="$commit (with uncommitted changes)"
fi

KAFKA_DIR=""
if [[ -z "${BENCH_BROKERS:-}" ]]; then
  KAFKA_DIR="$WORK/kafka"
  log "starting a broker in $KAFKA_DIR"
  BENCH_BROKERS="$("$KAFKA_SH" start "$KAFKA_DIR")"
  # A full run leaves ~20 GB of topic data; the next start formats afresh.
  trap '"$KAFKA_SH" stop "$KAFKA_DIR" >/dev/null 2>&1 || true; rm -rf "$KAFKA_DIR/data"' EXIT
fi

run_dir="$WORK/logs/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$run_dir"
log "logs and profiles in $run_dir"
mkdir -p "$results_dir"
status=0
BENCH_BROKERS="$BENCH_BROKERS" \
  BENCH_KAFKA_SH="$KAFKA_SH" \
  BENCH_KAFKA_DIR="${BENCH_KAFKA_DIR:-$KAFKA_DIR}" \
  BENCH_SIDECAR="${BENCH_SIDECAR:-$WORK/bin/sidecar}" \
  BENCH_WORK_DIR="$run_dir" \
  BENCH_RESULTS_DIR="$run_dir/report" \
  BENCH_VERSIONS="$go_version, Java $java_version, Apache Kafka $kafka_version (broker and tools)" \
  BENCH_COMMIT="${BENCH_COMMIT:-$commit}" \
  BENCH_STREAMS_CLASSPATH="${BENCH_STREAMS_CLASSPATH:-$streams_cp}" \
  "$WORK/bin/pgbench" || status=$?

# pgbench wrote the report into the run's directory (it names it by date and
# machine); it replaces the last report of this kind in bench/results.
shopt -s nullglob
written=("$run_dir"/report/*.md)
shopt -u nullglob
if ((${#written[@]} > 0)); then
  cp "${written[-1]}" "$results_dir/$report.md"
  log "report written to $results_dir/$report.md (over the previous one; a copy stays in $run_dir/report)"
else
  log "no report was written (pgbench exit status $status)"
fi

if [[ "${BENCH_PROFILE:-}" =~ ^(1|true)$ ]]; then
  shopt -s nullglob
  for p in "$run_dir"/*.pb.gz; do
    case "$p" in
      *.cpu.pb.gz) opts=() ;;
      *.heap.pb.gz) opts=(-sample_index=inuse_space) ;;
      *.allocs.pb.gz) opts=(-sample_index=alloc_space) ;;
    esac
    "$GO" tool pprof -top -nodecount=30 "${opts[@]}" "${BENCH_SIDECAR:-$WORK/bin/sidecar}" "$p" >"${p%.pb.gz}.top.txt" 2>/dev/null || true
    log "profile summary: ${p%.pb.gz}.top.txt"
  done
fi
exit "$status"
