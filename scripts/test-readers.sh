#!/usr/bin/env bash
# Runs the shared reader vectors (markers/testdata/reader-vectors.json, the
# Go reader tables as data; format and procedure in
# markers/testdata/README.md) on the Python and the Java reader of
# docs/CONSUMING.md, after scripts/install-readers.sh. Exits non-zero when
# either reader differs from a vector, naming the vectors that differ.
# No broker needed; the Go reader meets the same file in go test ./markers.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-readers.sh
vectors=markers/testdata/reader-vectors.json
status=0

echo "test-readers: python"
python3 -m unittest discover -s examples/python-reader -q || status=1
python3 examples/python-reader/reader.py --vectors "$vectors" || status=1

echo "test-readers: java"
java -Xmx64m -XX:TieredStopAtLevel=1 -cp 'examples/java-reader/target/classes:examples/java-reader/target/lib/*' \
  io.github.phasegate.reader.Reader --vectors "$vectors" || status=1

if [ "$status" -ne 0 ]; then
  echo "test-readers: FAIL" >&2
fi
exit "$status"
