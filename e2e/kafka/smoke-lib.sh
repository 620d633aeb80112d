# shellcheck shell=bash
# smoke-lib.sh: the part smoke.sh and smoke-secure.sh share, sourced as
#   source "$HERE/smoke-lib.sh" TAG [DIR]
# It sets DIR (the broker's state dir: the argument, or a temporary one that
# is removed at exit), WORK (scratch files), stops the broker on exit, and
# defines check NAME CONDITION... with the passed/failed counters.
SMOKE_TAG="$1"
shift
OWN_DIR=""
if [[ $# -ge 1 ]]; then
  DIR="$1"
else
  DIR="$(mktemp -d "${TMPDIR:-/tmp}/phasegate-kafka-$SMOKE_TAG.XXXXXX")"
  OWN_DIR="$DIR"
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/phasegate-kafka-$SMOKE_TAG-out.XXXXXX")"
cleanup() {
  "$K" stop "$DIR" >/dev/null 2>&1 || true
  rm -rf "$WORK" ${OWN_DIR:+"$OWN_DIR"}
}
trap cleanup EXIT
trap "exit 130" INT TERM

passed=0
failed=0
check() { # check NAME CONDITION...: counts and reports one assertion
  local name="$1"
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "ok   $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name"
  fi
}
