#!/usr/bin/env bash
# Makes the two files docker-compose.yml's "secure" profile mounts as
# secrets (docker compose --profile secure up phasegate-secure):
#
#   secrets/kafka_password  the SCRAM password of PHASEGATE_SASL_USERNAME
#                           (phasegate), one line; taken from $KAFKA_PASSWORD,
#                           else asked for on the terminal
#   secrets/ca.pem          the CA that signed your brokers' certificates;
#                           copied from the file given as the first argument
#
#   scripts/compose-secrets.sh /path/to/your-cluster-ca.pem
#
# With --stand-in instead of a CA file it writes a throw-away self-signed CA
# and a random password: enough for `sidecar config` to accept the
# configuration, not to connect to any cluster. SECRETS_DIR (default
# ./secrets) chooses where. Both files are readable by all (0644), because
# compose's file secrets keep the host's mode and the image runs as the
# unprivileged user 65532; the directory is ignored by git and docker.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${SECRETS_DIR:-secrets}
mkdir -p "$dir"
case "${1:-}" in
  --stand-in)
    openssl rand -hex 24 > "$dir/kafka_password"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=phasegate-stand-in-ca \
      -keyout /dev/null -out "$dir/ca.pem" 2>/dev/null
    ;;
  "")
    echo "usage: $0 <your cluster's CA file> | --stand-in" >&2
    exit 2
    ;;
  *)
    [ -r "$1" ] && grep -q 'BEGIN CERTIFICATE' "$1" || { echo "compose-secrets: $1 is not a readable PEM certificate" >&2; exit 2; }
    cp "$1" "$dir/ca.pem"
    if [ -n "${KAFKA_PASSWORD:-}" ]; then
      printf '%s\n' "$KAFKA_PASSWORD" > "$dir/kafka_password"
    else
      read -rsp "SCRAM password of user phasegate: " pw; echo
      printf '%s\n' "$pw" > "$dir/kafka_password"
    fi
    ;;
esac
chmod 0644 "$dir/kafka_password" "$dir/ca.pem"
echo "compose-secrets: wrote $dir/kafka_password and $dir/ca.pem"
