#!/usr/bin/env bash
# smoke.sh [DIR]: proves that kafka.sh gives a broker whose transactions work,
# using only Kafka's own tools. Starts a fresh broker in DIR (default: a new
# temporary directory), then checks:
#   1. 100,000 records written by a transactional ProducerPerformance are all
#      read back by a read_committed ConsoleConsumer;
#   2. TransactionalMessageCopier with random aborts copies an input exactly
#      once as seen by read_committed (aborted copies stay invisible);
#   3. after `kill` (SIGKILL) and `restart`, the same address serves the same
#      topics and the same committed records.
# Stops the broker on exit. Takes about two minutes on 2 cores.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K="$HERE/kafka.sh"
# shellcheck source=smoke-lib.sh
source "$HERE/smoke-lib.sh" smoke "$@"
tool() { "$K" tool "$@"; }
topic() { tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$ADDR" "$@"; }
read_sorted() { # read_sorted TOPIC ISOLATION [MAX]: every value, sorted
  local -a max=()
  [[ -n "${3:-}" ]] && max=(--max-messages "$3")
  tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$ADDR" \
    --topic "$1" --isolation-level "$2" --from-beginning --timeout-ms 15000 "${max[@]}" \
    2>/dev/null | sort || true # the consumer exits non-zero on its timeout
}
same() { cmp -s "$1" "$2"; }
lines() { [[ "$(wc -l <"$1")" -eq "$2" ]]; }

t0=$SECONDS
ADDR="$("$K" start "$DIR" | tail -n 1)"
echo "broker on $ADDR after $((SECONDS - t0)) s"

# 1. Transactional producer, read_committed consumer.
topic --create --topic txn-perf --partitions 3 --replication-factor 1 >/dev/null
tool org.apache.kafka.tools.ProducerPerformance --topic txn-perf \
  --transactional-id t1 --transaction-duration-ms 100 --num-records 100000 \
  --record-size 100 --throughput -1 --producer-props "bootstrap.servers=$ADDR" |
  tail -n 1 | tee "$WORK/perf.txt"
t1=$SECONDS
read_sorted txn-perf read_committed 100000 >"$WORK/perf.committed"
echo "read_committed consumer: $(wc -l <"$WORK/perf.committed") records in $((SECONDS - t1)) s"
check "100000 transactional records read back with read_committed" lines "$WORK/perf.committed" 100000

# 2. Kafka's exactly-once copier, with random aborts, on non-transactional input.
topic --create --topic copy-in --partitions 1 --replication-factor 1 >/dev/null
topic --create --topic copy-out --partitions 1 --replication-factor 1 >/dev/null
tool org.apache.kafka.tools.VerifiableProducer --bootstrap-server "$ADDR" \
  --topic copy-in --max-messages 5000 --acks -1 >/dev/null
timeout 120 "$K" tool org.apache.kafka.tools.TransactionalMessageCopier \
  --broker-list "$ADDR" --input-topic copy-in --input-partition 0 \
  --output-topic copy-out --consumer-group copier --transactional-id copier-0 \
  --transaction-size 250 --enable-random-aborts --use-group-metadata >"$WORK/copier.log"
read_sorted copy-in read_uncommitted >"$WORK/in"
read_sorted copy-out read_committed >"$WORK/out.committed"
read_sorted copy-out read_uncommitted >"$WORK/out.all"
echo "copier: input $(wc -l <"$WORK/in"), committed output $(wc -l <"$WORK/out.committed")," \
  "all output incl. aborted $(wc -l <"$WORK/out.all")"
check "5000 input records for the copier" lines "$WORK/in" 5000
check "copier output under read_committed equals its input" same "$WORK/in" "$WORK/out.committed"

# 3. Crash and restart on the same ports and data.
"$K" kill "$DIR"
check "status reports the killed broker as stopped" bash -c "! '$K' status '$DIR' >/dev/null"
t2=$SECONDS
check "restart serves the same address" test "$("$K" restart "$DIR" | tail -n 1)" = "$ADDR"
echo "restart after kill took $((SECONDS - t2)) s"
topic --list >"$WORK/topics"
check "topics survive kill and restart" grep -qx txn-perf "$WORK/topics"
read_sorted txn-perf read_committed 100000 >"$WORK/perf.after"
check "committed records survive kill and restart" same "$WORK/perf.committed" "$WORK/perf.after"
read_sorted copy-out read_committed >"$WORK/out.after"
check "copier output survives kill and restart" same "$WORK/out.committed" "$WORK/out.after"

"$K" stop "$DIR"
check "stop leaves no broker running" bash -c "! '$K' status '$DIR' >/dev/null"
echo "smoke: $passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
