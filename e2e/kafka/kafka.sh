#!/usr/bin/env bash
# kafka.sh: a real single-node Apache Kafka (KRaft) broker for phasegate's
# end-to-end tests, from Maven Central jars, without Docker.
#
#   kafka.sh fetch              gather the broker and tool jars into the cache
#   kafka.sh start   [DIR]      fresh broker in DIR; prints its bootstrap address last
#   kafka.sh start --secure [DIR]  the same plus a SASL_SSL listener (DIR/bootstrap-secure)
#   kafka.sh stop    [DIR]      SIGTERM, up to 30 s, then SIGKILL
#   kafka.sh kill    [DIR]      SIGKILL now (crash tests)
#   kafka.sh restart [DIR]      start again on the same ports and data
#   kafka.sh status  [DIR]      exit 0 when running, 3 when not
#   kafka.sh tool CLASS [ARGS]  run a Kafka tool class on the same classpath
#
# DIR defaults to e2e/.kafka (git-ignored). See README.md for the details.
# Progress goes to stderr; stdout carries only results (the bootstrap address).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly HERE
readonly POM="$HERE/pom.xml"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")"
readonly KAFKA_VERSION
[[ -n "$KAFKA_VERSION" ]] || {
  echo "kafka.sh: error: no <kafka.version> in $POM" >&2
  exit 1
}
readonly CACHE="${PHASEGATE_KAFKA_CACHE:-$HOME/.cache/phasegate/kafka-$KAFKA_VERSION}"
readonly LIBS="$CACHE/libs"
readonly STAMP="$CACHE/complete"
readonly START_TIMEOUT="${PHASEGATE_KAFKA_START_TIMEOUT:-90}"
readonly BROKER_HEAP="-Xmx512m"
readonly TOOL_HEAP="${PHASEGATE_KAFKA_TOOL_HEAP:--Xmx256m}"
readonly MARK=".phasegate-kafka" # names a DIR this script made and may wipe
readonly PROBE_TOPIC="phasegate-ready"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# shellcheck source=SCRIPTDIR/secure.sh
source "$HERE/secure.sh"

# check_prereqs stops with a clear message unless java >= 17 (and, when
# fetching, mvn) are on the PATH.
check_prereqs() {
  command -v "$JAVA" >/dev/null 2>&1 || die "java not found (need Java 17 or newer; set JAVA_HOME or PATH)"
  local v major
  v="$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)"
  major="${v%%[.+-]*}" # 17.0.15, 21+35, 22-ea
  [[ "$major" == 1 ]] && major="$(cut -d. -f2 <<<"$v")"
  [[ "$major" =~ ^[0-9]+$ ]] || die "cannot read the Java version from '$JAVA -version'"
  ((major >= 17)) || die "java $v is too old: Apache Kafka $KAFKA_VERSION needs Java 17 or newer"
  if [[ "${1:-}" == mvn ]]; then
    command -v mvn >/dev/null 2>&1 || die "mvn not found (need Maven 3.6.3 or newer to fetch Kafka)"
  fi
}

# lock FILE: holds an exclusive lock on FILE (fd 9) until the script exits,
# so parallel callers (go test runs packages at once) wait for each other.
lock() {
  exec 9>"$1"
  flock -w 300 9 || die "timed out waiting for the lock $1"
}

pom_sum() { sha256sum "$POM" | cut -d' ' -f1; }

fetched() { [[ -f "$STAMP" && "$(cat "$STAMP")" == "kafka=$KAFKA_VERSION pom=$(pom_sum)" ]]; }

cmd_fetch() {
  check_prereqs mvn
  mkdir -p "$CACHE"
  lock "$CACHE/.lock"
  if fetched; then
    log "Kafka $KAFKA_VERSION already fetched in $LIBS"
    echo "$LIBS"
    return
  fi
  local t0=$SECONDS tmp="$CACHE/libs.tmp" mlog="$CACHE/fetch.log"
  rm -rf "$tmp" "$STAMP"
  log "fetching Apache Kafka $KAFKA_VERSION with Maven (log: $mlog)"
  if ! mvn -B -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$tmp" >"$mlog" 2>&1; then
    tail -n 40 "$mlog" >&2
    die "mvn failed; full log in $mlog"
  fi
  [[ -f "$tmp/kafka_2.13-$KAFKA_VERSION.jar" && -f "$tmp/kafka-tools-$KAFKA_VERSION.jar" ]] ||
    die "mvn succeeded but the Kafka jars are missing from $tmp"
  rm -rf "$LIBS"
  mv "$tmp" "$LIBS"
  echo "kafka=$KAFKA_VERSION pom=$(pom_sum)" >"$STAMP" # written last: marks the cache complete
  log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars in $((SECONDS - t0)) s into $LIBS"
  echo "$LIBS"
}

ensure_fetched() {
  check_prereqs
  fetched || cmd_fetch >/dev/null
}

# java_tool CLASS ARGS...: runs a Kafka tool class in the foreground.
java_tool() {
  "$JAVA" "$TOOL_HEAP" -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$HERE/log4j2-tools.xml" -cp "$LIBS/*" "$@"
}

cmd_tool() {
  [[ $# -ge 1 ]] || die "usage: kafka.sh tool CLASS [ARGS...]"
  ensure_fetched
  java_tool "$@"
}

# --- state directory -------------------------------------------------------

state_dir() {
  local d="${1:-$HERE/../.kafka}"
  mkdir -p "$d"
  (cd "$d" && pwd)
}

# port_in_use PORT: true when any TCP socket (IPv4 or IPv6, any state) has PORT
# as its local port. Reads /proc, so it needs neither ss nor netstat.
port_in_use() {
  local hex
  hex="$(printf '%04X' "$1")"
  awk -v p="$hex" 'FNR > 1 { n = split($2, a, ":"); if (a[n] == p) found = 1 } END { exit !found }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# free_port [EXCEPT]: a random loopback port that nothing uses, below the
# kernel's ephemeral range so outgoing connections cannot take it later.
free_port() {
  local lo=20000 hi p i
  hi="$(awk '{ print $1 - 1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32767)"
  ((hi > lo + 1000)) || hi=32767
  for ((i = 0; i < 200; i++)); do
    p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo)))
    [[ "$p" != "${1:-}" ]] && ! port_in_use "$p" && echo "$p" && return
  done
  die "found no free port between $lo and $hi"
}

# write_server_properties DIR BROKER_PORT CONTROLLER_PORT [SECURE_PORT]: the
# whole broker configuration. Extend here and nowhere else. With SECURE_PORT
# (start --secure) it adds a SASL_SSL listener there; make_certs and
# make_users must have run.
write_server_properties() {
  local dir="$1" bport="$2" cport="$3" sport="${4:-}"
  local listeners="PLAINTEXT://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport"
  local advertised="PLAINTEXT://127.0.0.1:$bport"
  local protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  if [[ -n "$sport" ]]; then
    listeners+=",SASL_SSL://127.0.0.1:$sport"
    advertised+=",SASL_SSL://127.0.0.1:$sport"
    protocols+=",SASL_SSL:SASL_SSL"
  fi
  (
    [[ -z "$sport" ]] || umask 077 # holds the PLAIN password
    cat >"$dir/server.properties" <<EOF
# Written by e2e/kafka/kafka.sh; rewritten on every fresh start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=$listeners
advertised.listeners=$advertised
listener.security.protocol.map=$protocols
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.cleaner.dedupe.buffer.size=8388608
EOF
    [[ -z "$sport" ]] || secure_server_properties "$dir" >>"$dir/server.properties"
  )
  cat >"$dir/admin.properties" <<EOF
# Client settings for the readiness probe: fail fast, the caller retries.
request.timeout.ms=5000
default.api.timeout.ms=10000
socket.connection.setup.timeout.ms=1000
socket.connection.setup.timeout.max.ms=2000
EOF
  echo "127.0.0.1:$bport" >"$dir/bootstrap.tmp"
  printf 'broker_port=%s\ncontroller_port=%s\n' "$bport" "$cport" >"$dir/ports"
  if [[ -n "$sport" ]]; then
    echo "127.0.0.1:$sport" >"$dir/bootstrap-secure.tmp"
    printf 'secure_port=%s\n' "$sport" >>"$dir/ports"
  fi
}

read_port() { sed -n "s/^$2=\\([0-9]*\\)\$/\\1/p" "$1/ports"; }

# broker_pid DIR: prints the pid of the broker started from DIR, if it runs.
# The command line must name DIR's server.properties, so a recycled pid or a
# zombie never counts as our broker.
broker_pid() {
  local dir="$1" pid
  [[ -f "$dir/broker.pid" ]] || return 1
  pid="$(cat "$dir/broker.pid")"
  [[ "$pid" =~ ^[0-9]+$ && -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $dir/server.properties" || return 1
  echo "$pid"
}

tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# probe DIR ADDR: true when a real client sees the probe topic with a leader,
# creating the topic first when it is missing (a fresh broker). Each call is
# bounded: the admin client gives up after admin.properties' timeouts, and
# timeout(1) ends a tool that hangs anyway.
probe() {
  local dir="$1" addr="$2"
  local -a topics=(timeout 30 "$JAVA" "$TOOL_HEAP" -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$HERE/log4j2-tools.xml" -cp "$LIBS/*"
    org.apache.kafka.tools.TopicCommand --bootstrap-server "$addr"
    --command-config "$dir/admin.properties")
  has_leader() {
    local out # captured, not piped: grep -q would end the pipe early under pipefail
    out="$("${topics[@]}" --describe --topic "$PROBE_TOPIC" 2>/dev/null)" &&
      grep -q "Topic: $PROBE_TOPIC.*Leader: 1" <<<"$out"
  }
  if [[ -f "$dir/probed" ]]; then
    has_leader && return
  fi
  "${topics[@]}" --create --if-not-exists --topic "$PROBE_TOPIC" \
    --partitions 1 --replication-factor 1 >/dev/null 2>&1 || return 1
  has_leader || return 1
  touch "$dir/probed" # the topic exists now: later probes only describe it
}

# launch DIR: starts the broker in the background, in its own session, with
# its output appended to DIR/broker.log. Fd 9 (the lock) is not inherited.
launch() {
  local dir="$1"
  rm -f "$dir/broker.pid"
  # shellcheck disable=SC2016 # $$ and "$@" expand in the inner shell
  nohup setsid bash -c 'echo $$ >"$1/broker.pid"; shift; exec "$@"' _ "$dir" \
    "$JAVA" "$BROKER_HEAP" -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$HERE/log4j2-broker.xml" -cp "$LIBS/*" \
    kafka.Kafka "$dir/server.properties" </dev/null >>"$dir/broker.log" 2>&1 9>&- &
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -s "$dir/broker.pid" ]] && return
    sleep 0.1
  done
  die "the broker did not start (see $dir/broker.log)"
}

# wait_ready DIR ADDR: 0 once a client can use the broker (and, when DIR's
# ports name a secure_port, once that port completes a verified TLS
# handshake); 1 when the broker died (DIR/broker.log says why); dies when
# START_TIMEOUT passes.
wait_ready() {
  local dir="$1" addr="$2" deadline=$((SECONDS + START_TIMEOUT)) sport
  sport="$(read_port "$dir" secure_port)"
  while ((SECONDS < deadline)); do
    broker_pid "$dir" >/dev/null || return 1
    if tcp_open "${addr##*:}" && probe "$dir" "$addr" &&
      { [[ -z "$sport" ]] || tls_ready "$dir" "$sport"; }; then
      return 0
    fi
    sleep 0.5
  done
  tail -n 30 "$dir/broker.log" >&2
  signal_and_wait "$dir" KILL 10 || true # a failed start leaves no broker behind
  die "broker from $dir not ready after ${START_TIMEOUT} s; killed it (log: $dir/broker.log)"
}

broker_died() {
  tail -n 30 "$1/broker.log" >&2
  die "the broker exited during startup (log: $1/broker.log)"
}

# fresh DIR [secure]: wipes what an earlier run of this script left in DIR,
# writes a new configuration on new ports and formats the storage. With
# "secure", also makes (or keeps) the test certificates, new SASL users
# (SCRAM ones stored at format time) and client.properties.
fresh() {
  local dir="$1" secure="${2:-}" bport cport sport="" cluster
  local -a scram=()
  if [[ ! -e "$dir/$MARK" ]] && find "$dir" -mindepth 1 -maxdepth 1 ! -name .lock | grep -q .; then
    die "$dir is not empty and was not made by kafka.sh; refusing to wipe it"
  fi
  rm -rf "$dir/data" "$dir/probed" "$dir/server.properties" "$dir/admin.properties" "$dir/ports" \
    "$dir/bootstrap" "$dir/bootstrap.tmp" "$dir/broker.pid" "$dir/broker.log" \
    "$dir/bootstrap-secure" "$dir/bootstrap-secure.tmp" "$dir/users" "$dir/client.properties"
  touch "$dir/$MARK"
  bport="$(free_port)"
  cport="$(free_port "$bport")"
  if [[ -n "$secure" ]]; then
    sport="$(free_port "$bport")"
    while [[ "$sport" == "$cport" ]]; do sport="$(free_port "$bport")"; done
    make_certs "$dir"
    make_users "$dir"
    write_client_properties "$dir"
    mapfile -t scram < <(scram_format_args "$dir")
  fi
  write_server_properties "$dir" "$bport" "$cport" "$sport"
  # A cluster ID is 16 random bytes in URL-safe base64 without padding; it
  # must not start with '-' (Kafka's Uuid.randomUuid rule, for command lines).
  cluster="-"
  while [[ "$cluster" == -* ]]; do
    cluster="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  done
  java_tool kafka.tools.StorageTool format -t "$cluster" -c "$dir/server.properties" "${scram[@]}" \
    >"$dir/format.log" 2>&1 || {
    cat "$dir/format.log" >&2
    die "formatting the storage in $dir/data failed"
  }
}

# cmd_start [--secure] [DIR]
cmd_start() {
  local dir="" secure="" addr pid attempt t0=$SECONDS arg
  for arg in "$@"; do
    case "$arg" in
    --secure) secure=secure ;;
    -*) die "unknown option '$arg' for start (usage: kafka.sh start [--secure] [DIR])" ;;
    *)
      [[ -z "$dir" ]] || die "usage: kafka.sh start [--secure] [DIR]"
      dir="$arg"
      ;;
    esac
  done
  ensure_fetched
  dir="$(state_dir "$dir")"
  lock "$dir/.lock"
  if pid="$(broker_pid "$dir")" && [[ -f "$dir/bootstrap" ]]; then
    addr="$(cat "$dir/bootstrap")"
    if [[ -n "$secure" && ! -f "$dir/bootstrap-secure" ]]; then
      die "broker pid $pid from $dir runs without a SASL_SSL listener; stop it first or use another DIR"
    fi
    if tcp_open "${addr##*:}"; then
      log "broker already running from $dir (pid $pid)"
      echo "$addr"
      return
    fi
    die "broker pid $pid from $dir runs but does not listen on $addr; run 'kafka.sh stop $dir'"
  fi
  stop_broker "$dir" # a broker that never became ready: never wipe data under it
  # A port found free can still be taken before the broker binds it: try anew.
  for attempt in 1 2 3; do
    fresh "$dir" "$secure"
    addr="$(cat "$dir/bootstrap.tmp")"
    log "starting Apache Kafka $KAFKA_VERSION on $addr${secure:+ and SASL_SSL on $(cat "$dir/bootstrap-secure.tmp")} (state: $dir)"
    launch "$dir"
    if wait_ready "$dir" "$addr"; then
      [[ -z "$secure" ]] || mv "$dir/bootstrap-secure.tmp" "$dir/bootstrap-secure"
      mv "$dir/bootstrap.tmp" "$dir/bootstrap"
      log "broker ready on $addr${secure:+ and SASL_SSL on $(cat "$dir/bootstrap-secure")} in $((SECONDS - t0)) s"
      echo "$addr"
      return
    fi
    grep -q "Address already in use" "$dir/broker.log" || broker_died "$dir"
    log "port taken before the broker bound it (attempt $attempt); choosing new ports"
  done
  broker_died "$dir"
}

# signal_and_wait DIR SIGNAL SECONDS: sends SIGNAL to DIR's broker and waits
# up to SECONDS for it to exit. Returns 1 if it still runs.
signal_and_wait() {
  local dir="$1" sig="$2" secs="$3" pid i
  pid="$(broker_pid "$dir")" || return 0
  kill "-$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < secs * 10; i++)); do
    broker_pid "$dir" >/dev/null || return 0
    sleep 0.1
  done
  return 1
}

existing_dir() {
  local d="${1:-$HERE/../.kafka}"
  [[ -d "$d" ]] || die "no state directory $d"
  (cd "$d" && pwd)
}

stop_broker() {
  local dir="$1"
  broker_pid "$dir" >/dev/null || return 0
  if signal_and_wait "$dir" TERM 30; then
    log "broker stopped"
    return
  fi
  log "broker still running 30 s after SIGTERM; sending SIGKILL"
  signal_and_wait "$dir" KILL 10 || die "broker from $dir survived SIGKILL"
}

# running_dir DIR: the absolute DIR when a broker from it runs; otherwise
# says so and fails, which stop and kill treat as success.
running_dir() {
  local d="${1:-$HERE/../.kafka}"
  if [[ -d "$d" ]]; then
    d="$(cd "$d" && pwd)"
    broker_pid "$d" >/dev/null && echo "$d" && return
  fi
  log "no broker running from $d"
  return 1
}

cmd_stop() {
  local dir
  dir="$(running_dir "${1:-}")" || return 0
  lock "$dir/.lock"
  stop_broker "$dir"
}

cmd_kill() {
  local dir
  dir="$(running_dir "${1:-}")" || return 0
  lock "$dir/.lock"
  signal_and_wait "$dir" KILL 10 || die "broker from $dir survived SIGKILL"
  log "broker killed"
}

cmd_restart() {
  ensure_fetched
  local dir addr bport cport sport t0=$SECONDS
  dir="$(existing_dir "${1:-}")"
  lock "$dir/.lock"
  [[ -f "$dir/server.properties" && -f "$dir/ports" && -f "$dir/bootstrap" ]] ||
    die "nothing to restart in $dir: run 'kafka.sh start' first"
  stop_broker "$dir"
  addr="$(cat "$dir/bootstrap")"
  bport="$(read_port "$dir" broker_port)"
  cport="$(read_port "$dir" controller_port)"
  sport="$(read_port "$dir" secure_port)" # empty unless started with --secure
  for p in "$bport" "$cport" ${sport:+"$sport"}; do
    ! tcp_open "$p" || die "port $p is taken by another process; cannot restart on the same ports"
  done
  log "restarting the broker on $addr${sport:+ and SASL_SSL on 127.0.0.1:$sport} with its data (state: $dir)"
  launch "$dir"
  wait_ready "$dir" "$addr" || broker_died "$dir"
  log "broker ready on $addr${sport:+ and SASL_SSL on 127.0.0.1:$sport} in $((SECONDS - t0)) s"
  echo "$addr"
}

cmd_status() {
  local dir="${1:-$HERE/../.kafka}" pid
  if [[ ! -d "$dir" ]] || ! dir="$(cd "$dir" && pwd)" || ! pid="$(broker_pid "$dir")"; then
    echo "stopped"
    return 3
  fi
  echo "running pid=$pid bootstrap=$(cat "$dir/bootstrap" 2>/dev/null || cat "$dir/bootstrap.tmp")$(
    [[ ! -f "$dir/bootstrap-secure" ]] || echo " bootstrap-secure=$(cat "$dir/bootstrap-secure")"
  )"
}

usage() {
  sed -n '2,15s/^# \{0,1\}//p' "$0" >&2
  exit 2
}

main() {
  [[ $# -ge 1 ]] || usage
  local cmd="$1"
  shift
  case "$cmd" in
  fetch) cmd_fetch ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  kill) cmd_kill "$@" ;;
  restart) cmd_restart "$@" ;;
  status) cmd_status "$@" ;;
  tool) cmd_tool "$@" ;;
  -h | --help | help) usage ;;
  *)
    log "unknown subcommand '$cmd'"
    usage
    ;;
  esac
}

main "$@"
