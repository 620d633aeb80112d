#!/usr/bin/env bash
# Installs what the readers of docs/CONSUMING.md need, for the e2e test R1
# (make e2e runs this first; CI too): the Python reader's pinned client
# from PyPI (examples/python-reader/requirements.txt) and the Java reader,
# built with Maven from Maven Central (offline when ~/.m2 already holds its
# artifacts). Idempotent: does nothing when both are in place and current.
set -euo pipefail
cd "$(dirname "$0")/.."

req=examples/python-reader/requirements.txt
pin=$(grep -E '^confluent-kafka==' "$req" | cut -d= -f3)
if python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('confluent-kafka') != '$pin')" 2>/dev/null; then
  echo "install-readers: confluent-kafka $pin already installed"
else
  echo "install-readers: pip install -r $req"
  python3 -m pip install -q --disable-pip-version-check -r "$req" 2>&1 | grep -v 'Running pip as the .root. user' || true
  python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('confluent-kafka') != '$pin')" \
    || { echo "install-readers: confluent-kafka $pin did not install" >&2; exit 1; }
fi

jr=examples/java-reader
class=$jr/target/classes/io/github/phasegate/reader/Reader.class
kafka=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' e2e/kafka/pom.xml)
mine=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' $jr/pom.xml)
if [ "$kafka" != "$mine" ]; then
  echo "install-readers: $jr/pom.xml has kafka.version $mine, the broker (e2e/kafka/pom.xml) $kafka: make them equal" >&2
  exit 1
fi
if [ -f "$class" ] && [ -f "$jr/target/lib/kafka-clients-$kafka.jar" ] \
   && [ -z "$(find $jr/pom.xml $jr/src -newer "$class" -print -quit)" ]; then
  echo "install-readers: Java reader already built ($jr/target)"
else
  echo "install-readers: mvn package in $jr"
  (cd $jr && { mvn -B -q -Dstyle.color=never -o package >/dev/null 2>&1 || mvn -B -q -Dstyle.color=never package; })
  [ -f "$class" ] || { echo "install-readers: the Java reader did not build" >&2; exit 1; }
fi
