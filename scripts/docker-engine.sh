#!/usr/bin/env bash
# scripts/docker-engine.sh: a running Docker Engine from Debian's packages, on
# a machine without an init system (CI's and the developers' machines).
#
#   scripts/docker-engine.sh          install what is missing, start dockerd, wait
#   scripts/docker-engine.sh stop     stop the dockerd this script started
#
# Idempotent: a daemon that already answers `docker info` is left alone.
# Installs docker.io (the engine, Debian bookworm: 20.10), docker-compose
# (1.29.2), debootstrap (for images/build.sh's base image) and iptables.
# dockerd's log: /var/log/phasegate-dockerd.log. No registry is reachable
# from these machines: every image is built locally (images/build.sh).
set -euo pipefail

readonly LOG=/var/log/phasegate-dockerd.log
readonly PIDFILE=/var/run/phasegate-dockerd.pid
readonly WAIT="${PHASEGATE_DOCKERD_WAIT:-60}"

log() { printf 'docker-engine.sh: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

answers() { timeout 10 docker info >/dev/null 2>&1; }

install_packages() {
  local missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v iptables >/dev/null 2>&1 || missing+=(iptables)
  ((${#missing[@]} == 0)) && return
  [[ "$(id -u)" == 0 ]] || die "need root to install ${missing[*]} (apt-get)"
  log "installing ${missing[*]} from Debian's packages"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
}

start() {
  if answers; then
    log "dockerd already answers"
    return
  fi
  install_packages
  [[ "$(id -u)" == 0 ]] || die "need root to start dockerd"
  if [[ -s "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    log "dockerd pid $(cat "$PIDFILE") runs but does not answer yet; waiting"
  else
    # A stale pid file from a killed daemon makes dockerd refuse to start.
    rm -f /var/run/docker.pid
    log "starting dockerd (log: $LOG)"
    nohup setsid dockerd --storage-driver=overlay2 </dev/null >>"$LOG" 2>&1 &
    echo $! >"$PIDFILE"
  fi
  local deadline=$((SECONDS + WAIT))
  until answers; do
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      tail -n 30 "$LOG" >&2
      die "dockerd exited (log: $LOG)"
    fi
    ((SECONDS < deadline)) || {
      tail -n 30 "$LOG" >&2
      die "dockerd did not answer 'docker info' within ${WAIT} s (log: $LOG)"
    }
    sleep 0.5
  done
  log "dockerd answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
}

stop() {
  [[ -s "$PIDFILE" ]] || {
    log "no dockerd started by this script"
    return
  }
  local pid i
  pid="$(cat "$PIDFILE")"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  rm -f "$PIDFILE"
  log "dockerd stopped"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
*) die "usage: $0 [start|stop]" ;;
esac
