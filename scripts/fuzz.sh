#!/usr/bin/env bash
# Runs every fuzz target of the pure packages for $1 (default 60s) each.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-60s}
for pkg in ./markers ./dedupe ./watermarks; do
  for target in $(go test "$pkg" -list '^Fuzz' | grep '^Fuzz' || true); do
    echo "== $pkg $target ($time)"
    go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$time" -parallel 1
  done
done
