#!/usr/bin/env bash
# smoke-secure.sh [DIR]: proves that `kafka.sh start --secure` gives a broker
# whose SASL_SSL listener works and refuses what it must, with Kafka's own
# tools (and kcat when it is installed). Starts a fresh secure broker in DIR
# (default: a new temporary directory), then checks:
#   1. the files in DIR, and the broker certificate with openssl s_client
#      (verifies against ca.pem for 127.0.0.1 and localhost, not against
#      untrusted-ca.pem); no password in the broker's log;
#   2. a transactional ProducerPerformance and a read_committed
#      ConsoleConsumer over SASL_SSL with SCRAM-SHA-512 (client.properties);
#      SCRAM-SHA-256 and PLAIN authenticate too;
#   3. a wrong password fails with an authentication error, a client that
#      trusts untrusted-ca.pem fails the TLS handshake;
#   4. kcat, if installed: PLAIN transactional produce + read_committed
#      consume, wrong password, untrusted CA (SCRAM only with librdkafka >=
#      2.6.1: older ones fail SCRAM against Kafka 4);
#   5. after `kill` and `restart`, the same SASL_SSL address serves the same
#      committed records; a second `start --secure` reuses the CA.
# Stops the broker on exit. Takes about 1.5 minutes on 2 cores.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K="$HERE/kafka.sh"
# shellcheck source=smoke-lib.sh
source "$HERE/smoke-lib.sh" secure "$@"
tool() { timeout 120 "$K" tool "$@"; }
lines() { [[ "$(wc -l <"$1")" -eq "$2" ]]; }
same() { cmp -s "$1" "$2"; }
has() { grep -qE "$2" "$1"; }
not() { ! "$@"; }
password() { awk -v m="$1" '$1 == m { print $3 }' "$DIR/users"; }
# props MECHANISM PASSWORD CA: a client config like client.properties, in WORK.
nprops=0
props() {
  nprops=$((nprops + 1))
  local f="$WORK/client-$nprops.properties"
  local module=org.apache.kafka.common.security.scram.ScramLoginModule
  [[ "$1" == PLAIN ]] && module=org.apache.kafka.common.security.plain.PlainLoginModule
  printf '%s\n' "security.protocol=SASL_SSL" "sasl.mechanism=$1" \
    "sasl.jaas.config=$module required username=\"phasegate\" password=\"$2\";" \
    "ssl.truststore.type=PEM" "ssl.truststore.location=$3" >"$f"
  echo "$f"
}
# list_topics CONFIG OUT: TopicCommand --list over SASL_SSL; stderr to OUT.err.
list_topics() {
  tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$SECURE" \
    --command-config "$1" --list >"$2" 2>"$2.err"
}
read_committed() { # read_committed TOPIC MAX: every value over SASL_SSL, sorted
  tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$SECURE" \
    --consumer.config "$DIR/client.properties" --topic "$1" --isolation-level read_committed \
    --from-beginning --timeout-ms 15000 --max-messages "$2" 2>/dev/null | sort || true
}
# says FILE: the first exception in FILE and its first cause, for the log.
says() {
  {
    grep -m1 -E '^[A-Za-z.]+Exception: ' "$1" || true
    grep -m1 -E '^Caused by: ' "$1" || true
  } | cut -c1-200 | paste -sd '|' | sed 's/|/ | /g'
}

t0=$SECONDS
ADDR="$("$K" start --secure "$DIR" | tail -n 1)"
SECURE="$(cat "$DIR/bootstrap-secure")"
echo "broker on $ADDR, SASL_SSL on $SECURE after $((SECONDS - t0)) s"

# 1. Files and certificate.
check "bootstrap is the printed address" test "$(cat "$DIR/bootstrap")" = "$ADDR"
check "bootstrap-secure is another 127.0.0.1 port" \
  bash -c "[[ '$SECURE' =~ ^127\.0\.0\.1:[0-9]+\$ && '$SECURE' != '$ADDR' ]]"
check "users has PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 lines" \
  test "$(awk '{ print $1, $2, (length($3) >= 16) }' "$DIR/users" | tr '\n' ' ')" = \
  "PLAIN phasegate 1 SCRAM-SHA-256 phasegate 1 SCRAM-SHA-512 phasegate 1 "
check "client.properties says SASL_SSL and SCRAM-SHA-512" bash -c \
  "grep -qx security.protocol=SASL_SSL '$DIR/client.properties' && grep -qx sasl.mechanism=SCRAM-SHA-512 '$DIR/client.properties'"
s_client() { # s_client CA [OPENSSL ARGS...]: a verified TLS handshake with the SASL_SSL port
  local ca="$1"
  shift
  timeout 10 openssl s_client -connect "$SECURE" -CAfile "$ca" -verify_return_error -brief "$@" \
    </dev/null >/dev/null 2>"$WORK/s_client.err"
}
check "TLS handshake verifies against ca.pem for IP 127.0.0.1" s_client "$DIR/ca.pem" -verify_ip 127.0.0.1
check "TLS handshake verifies against ca.pem for DNS localhost" \
  s_client "$DIR/ca.pem" -servername localhost -verify_hostname localhost
check "TLS handshake fails against untrusted-ca.pem" not s_client "$DIR/untrusted-ca.pem" -verify_ip 127.0.0.1
echo "     openssl with untrusted-ca.pem: $(grep -m1 -i 'verify error' "$WORK/s_client.err")"

# 2. Transactions over SASL_SSL with SCRAM-SHA-512.
tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$ADDR" \
  --create --topic secure-txn --partitions 3 --replication-factor 1 >/dev/null
tool org.apache.kafka.tools.ProducerPerformance --topic secure-txn \
  --transactional-id secure-t1 --transaction-duration-ms 100 --num-records 20000 \
  --record-size 100 --throughput -1 --producer-props "bootstrap.servers=$SECURE" \
  --producer.config "$DIR/client.properties" | tail -n 1 | tee "$WORK/perf.txt"
check "transactional producer over SASL_SSL sent 20000" has "$WORK/perf.txt" '^20000 records sent'
t1=$SECONDS
read_committed secure-txn 20000 >"$WORK/committed"
echo "read_committed over SASL_SSL: $(wc -l <"$WORK/committed") records in $((SECONDS - t1)) s"
check "20000 records read back with read_committed over SASL_SSL" lines "$WORK/committed" 20000
for m in SCRAM-SHA-256 PLAIN; do
  list_topics "$(props "$m" "$(password "$m")" "$DIR/ca.pem")" "$WORK/list-$m" || true
  check "$m authenticates over SASL_SSL" grep -qx secure-txn "$WORK/list-$m"
done

# 3. Refusals.
rc=0
list_topics "$(props SCRAM-SHA-512 wrong-password "$DIR/ca.pem")" "$WORK/badpw" || rc=$?
check "wrong SCRAM-SHA-512 password: non-zero exit" test "$rc" -ne 0
check "wrong SCRAM-SHA-512 password: SaslAuthenticationException, invalid credentials" \
  has "$WORK/badpw.err" 'SaslAuthenticationException: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512'
echo "     prints: $(says "$WORK/badpw.err")"
rc=0
list_topics "$(props PLAIN wrong-password "$DIR/ca.pem")" "$WORK/badplain" || rc=$?
check "wrong PLAIN password: non-zero exit and SaslAuthenticationException" \
  bash -c "[[ $rc -ne 0 ]] && grep -q 'SaslAuthenticationException: Authentication failed: Invalid username or password' '$WORK/badplain.err'"
echo "     prints: $(says "$WORK/badplain.err")"
rc=0
list_topics "$(props SCRAM-SHA-512 "$(password SCRAM-SHA-512)" "$DIR/untrusted-ca.pem")" "$WORK/badca" || rc=$?
check "untrusted CA: non-zero exit" test "$rc" -ne 0
check "untrusted CA: SSLHandshakeException, PKIX path building failed" \
  has "$WORK/badca.err" 'SSLHandshakeException: PKIX path building failed'
echo "     prints: $(says "$WORK/badca.err")"

# 4. kcat (librdkafka), optional.
if command -v kcat >/dev/null 2>&1; then
  rdk="$(kcat -V 2>&1 | sed -n 's/.*librdkafka \([0-9.]*\).*/\1/p')"
  kc() { # kc MECHANISM PASSWORD CA KCAT_ARGS...
    timeout 60 kcat -b "$SECURE" -X security.protocol=SASL_SSL -X "sasl.mechanisms=$1" \
      -X sasl.username=phasegate -X "sasl.password=$2" -X "ssl.ca.location=$3" "${@:4}"
  }
  mechs=(PLAIN)
  if [[ "$(printf '%s\n' 2.6.1 "$rdk" | sort -V | head -n1)" == 2.6.1 ]]; then
    mechs+=(SCRAM-SHA-512)
  else
    echo "skip kcat SCRAM: librdkafka $rdk < 2.6.1 fails SCRAM against Kafka 4 (edenhill/kcat#462)"
  fi
  for m in "${mechs[@]}"; do
    tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$ADDR" \
      --create --topic "kcat-$m" --partitions 1 --replication-factor 1 >/dev/null
    seq 1 1000 | kc "$m" "$(password "$m")" "$DIR/ca.pem" -P -t "kcat-$m" \
      -X "transactional.id=kcat-$m" 2>"$WORK/kcat-p.err" || cat "$WORK/kcat-p.err"
    kc "$m" "$(password "$m")" "$DIR/ca.pem" -C -t "kcat-$m" -o beginning -e -q \
      -X isolation.level=read_committed 2>/dev/null | sort -n >"$WORK/kcat-$m" || true
    check "kcat $m: 1000 transactional records read back with read_committed" \
      same "$WORK/kcat-$m" <(seq 1 1000)
  done
  rc=0
  kc PLAIN wrong-password "$DIR/ca.pem" -L -m 3 >/dev/null 2>"$WORK/kcat-badpw" || rc=$?
  check "kcat wrong password: non-zero exit and SASL authentication error" \
    bash -c "[[ $rc -ne 0 ]] && grep -q 'SASL authentication error' '$WORK/kcat-badpw'"
  echo "     prints: $(grep -m1 FAIL "$WORK/kcat-badpw" | sed 's/.*bootstrap: //')"
  rc=0
  kc PLAIN "$(password PLAIN)" "$DIR/untrusted-ca.pem" -L -m 3 >/dev/null 2>"$WORK/kcat-badca" || rc=$?
  check "kcat untrusted CA: non-zero exit and certificate verify failed" \
    bash -c "[[ $rc -ne 0 ]] && grep -q 'certificate verify failed' '$WORK/kcat-badca'"
  echo "     prints: $(grep -m1 FAIL "$WORK/kcat-badca" | sed 's/.*bootstrap: //')"
else
  echo "skip kcat checks: kcat is not installed"
fi

for m in PLAIN SCRAM-SHA-256 SCRAM-SHA-512; do
  check "the broker log does not contain the $m password" \
    not grep -qF -- "$(password "$m")" "$DIR/broker.log"
done

# 5. Crash and restart; a second fresh start keeps the CA.
"$K" kill "$DIR"
t2=$SECONDS
"$K" restart "$DIR" >/dev/null
echo "restart after kill took $((SECONDS - t2)) s"
check "restart keeps the SASL_SSL address" test "$(cat "$DIR/bootstrap-secure")" = "$SECURE"
read_committed secure-txn 20000 >"$WORK/committed.after"
check "committed records over SASL_SSL survive kill and restart" same "$WORK/committed" "$WORK/committed.after"
"$K" stop "$DIR"
cp "$DIR/ca.pem" "$WORK/ca.before"
cp "$DIR/users" "$WORK/users.before"
t3=$SECONDS
"$K" start --secure "$DIR" >/dev/null
SECURE="$(cat "$DIR/bootstrap-secure")"
echo "second start --secure took $((SECONDS - t3)) s"
check "a second start --secure reuses the CA" same "$WORK/ca.before" "$DIR/ca.pem"
check "a second start --secure makes new passwords" not same "$WORK/users.before" "$DIR/users"
list_topics "$DIR/client.properties" "$WORK/list-again" || true
check "the new client.properties authenticates" grep -qx phasegate-ready "$WORK/list-again"

"$K" stop "$DIR"
check "stop leaves no broker running" bash -c "! '$K' status '$DIR' >/dev/null"
echo "smoke-secure: $passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
