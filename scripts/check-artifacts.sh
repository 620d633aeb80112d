#!/usr/bin/env bash
# Checks the shipping artifacts without a Docker engine (scripts/compose-smoke.sh
# runs the image and the compose stack where one answers):
# the Dockerfile's build step as a plain command gives a static binary that
# links no franz-go (the demo's broker and client) and whose healthcheck
# subcommand works, and docker-compose.yml parses and configures
# the sidecar validly (checked by the binary's own `sidecar config`).
set -euo pipefail
cd "$(dirname "$0")/.."
out=bin/docker
mkdir -p "$out"

# 1. The Dockerfile's build line, run as written.
build=$(grep -E '^RUN CGO_ENABLED=0 go build' Dockerfile | sed -e 's/^RUN //' -e "s#/out/sidecar#$out/sidecar#")
[ -n "$build" ] || { echo "check-artifacts: no go build step in Dockerfile" >&2; exit 1; }
echo "+ $build"
eval "$build"
if readelf -d "$out/sidecar" 2>/dev/null | grep -q NEEDED; then
  echo "check-artifacts: $out/sidecar is dynamically linked; distroless/static needs a static binary" >&2; exit 1
fi
# The production binary links no test broker and no second Kafka client:
# kfake, kgo and kadm belong to cmd/demo and the tests (go version -m lists
# every module the binary was built with; -s -w keep that list).
if go version -m "$out/sidecar" | grep -E 'github\.com/twmb/franz-go'; then
  echo "check-artifacts: $out/sidecar links franz-go (kfake, kgo or kadm); only cmd/demo and tests may" >&2; exit 1
fi
# The base images are build arguments whose defaults stay the public ones;
# images/build.sh passes local ones where no registry answers.
grep -qx 'ARG GO_IMAGE=golang:1.26' Dockerfile && grep -qx 'ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot' Dockerfile \
  || { echo "check-artifacts: Dockerfile's GO_IMAGE/RUNTIME_IMAGE defaults must stay golang:1.26 and distroless static nonroot" >&2; exit 1; }
grep -qx 'USER 65532:65532' Dockerfile || { echo "check-artifacts: the image must run as nonroot (USER 65532:65532)" >&2; exit 1; }
grep -q 'HEALTHCHECK .*"/sidecar", "healthcheck"' Dockerfile

# 2. healthcheck: fails without a sidecar, succeeds against one serving /healthz.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
if PHASEGATE_HTTP_ADDR="127.0.0.1:$port" "$out/sidecar" healthcheck 2>/dev/null; then
  echo "check-artifacts: healthcheck passed with nothing listening" >&2; exit 1
fi
python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404); self.end_headers(); self.wfile.write(b"ok\n")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()' "$port" &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
PHASEGATE_HTTP_ADDR="127.0.0.1:$port" "$out/sidecar" healthcheck

# 3. docker-compose.yml parses; each sidecar service's environment is a
#    valid configuration (the secure one with stand-in secret files).
python3 -c "import yaml" 2>/dev/null || pip install -q pyyaml
tmp=$(mktemp -d)
printf 'stand-in-password\n' > "$tmp/kafka_password"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=stand-in-ca -keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
python3 - "$tmp" "$out/sidecar" <<'PY'
import subprocess, sys, yaml
tmp, sidecar = sys.argv[1], sys.argv[2]
d = yaml.safe_load(open("docker-compose.yml"))
services = d["services"]
for need in ("kafka", "topics", "orders", "payments", "phasegate", "join", "phasegate-secure"):
    assert need in services, f"docker-compose.yml lacks service {need}"
assert "read_committed" in services["join"]["command"], "the join must read with read_committed"
for name in ("phasegate", "phasegate-secure"):
    env = {k: str(v) for k, v in services[name]["environment"].items()}
    for k, v in list(env.items()):
        if v.startswith("/run/secrets/"):
            env[k] = f"{tmp}/" + {"kafka_password": "kafka_password", "kafka_ca": "ca.pem"}[v.rsplit("/", 1)[1]]
    r = subprocess.run([sidecar, "config"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, f"{name}: sidecar config rejects the compose environment: {r.stderr}"
    assert "stand-in-password" not in r.stdout, f"{name}: a secret was printed"
    print(f"docker-compose.yml: service {name}: configuration valid")
# The Kafka image is a variable whose default stays apache/kafka.
for name in ("kafka", "topics", "orders", "payments", "join"):
    assert services[name]["image"] == "${KAFKA_IMAGE:-apache/kafka:4.1.2}", f"{name}: image must be ${{KAFKA_IMAGE:-apache/kafka:4.1.2}}"
# From the host: a second listener advertised as localhost:9092 and published.
kafka = {k: str(v) for k, v in services["kafka"]["environment"].items()}
assert "HOST://localhost:9092" in kafka["KAFKA_ADVERTISED_LISTENERS"], "no listener advertised as localhost:9092"
assert "HOST://:29092" in kafka["KAFKA_LISTENERS"] and "HOST:PLAINTEXT" in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
assert "9092:29092" in services["kafka"].get("ports", []), "the HOST listener is not published on localhost:9092"
for name in ("kafka", "orders", "payments", "phasegate", "join"):
    assert services[name].get("restart") == "unless-stopped", f"{name}: no restart policy"
for name in ("orders", "payments"):
    assert "parse.key=true" in services[name]["command"][0], f"{name}: records without keys"
# Forks of 3 and 2 partitions: partition routing would split keys and is refused.
assert services["phasegate"]["environment"].get("PHASEGATE_ROUTING") == "key", "phasegate: forks of 3 and 2 partitions need key routing"
print("docker-compose.yml: localhost:9092 listener, restart policies, keyed producers, key routing")
PY
SECRETS_DIR="$tmp/made" ./scripts/compose-secrets.sh --stand-in >/dev/null
[ -s "$tmp/made/kafka_password" ] && openssl x509 -noout -in "$tmp/made/ca.pem" \
  || { echo "check-artifacts: scripts/compose-secrets.sh did not make the secrets" >&2; exit 1; }
grep -qx 'secrets/' .dockerignore && grep -qx '.git' .dockerignore \
  || { echo "check-artifacts: .dockerignore must keep .git and secrets/ out of the build context" >&2; exit 1; }
rm -rf "$tmp"
echo "check-artifacts: ok (Dockerfile build step, static binary without franz-go, healthcheck, docker-compose.yml); docker build and compose up: scripts/compose-smoke.sh"
