# secure.sh: the SASL_SSL side of kafka.sh (`kafka.sh start --secure`),
# sourced by kafka.sh; not run on its own. Everything here is for tests: a
# throwaway CA, a broker certificate and random passwords, made anew when
# missing and written under the state DIR only.
#
# Files in DIR (see README.md):
#   ca.pem             the CA that signed the broker certificate (trust this)
#   untrusted-ca.pem   another CA, which signed nothing the broker presents
#   users              "MECHANISM USER PASSWORD" per line (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
#   client.properties  SASL_SSL + SCRAM-SHA-512 + ca.pem for Kafka's Java tools
#   bootstrap-secure   127.0.0.1:PORT of the SASL_SSL listener (once ready)
#   tls/               ca.key, broker.key, broker.crt, broker.pem (key + cert, the broker's keystore)
# shellcheck shell=bash

readonly SASL_USER="phasegate"
readonly CERT_DAYS=365  # broker certificate; reused while valid for one more day
readonly CA_DAYS=3650
readonly CA_SUBJECT="/CN=phasegate e2e test CA"
readonly UNTRUSTED_SUBJECT="/CN=phasegate e2e untrusted CA"

# certs_valid DIR: true when DIR holds a complete set from make_certs that
# is good for at least one more day: the broker certificate verifies against
# ca.pem for 127.0.0.1 and localhost, and not against untrusted-ca.pem.
certs_valid() {
  local dir="$1" t="$1/tls" f
  for f in "$dir/ca.pem" "$dir/untrusted-ca.pem" "$t/ca.key" "$t/broker.key" "$t/broker.crt" "$t/broker.pem"; do
    [[ -s "$f" ]] || return 1
  done
  openssl x509 -in "$dir/ca.pem" -noout -checkend 86400 >/dev/null 2>&1 &&
    openssl x509 -in "$t/broker.crt" -noout -checkend 86400 >/dev/null 2>&1 &&
    openssl verify -CAfile "$dir/ca.pem" -verify_ip 127.0.0.1 "$t/broker.crt" >/dev/null 2>&1 &&
    openssl verify -CAfile "$dir/ca.pem" -verify_hostname localhost "$t/broker.crt" >/dev/null 2>&1 &&
    ! openssl verify -CAfile "$dir/untrusted-ca.pem" "$t/broker.crt" >/dev/null 2>&1
}

# new_ca KEY CERT SUBJECT: a self-signed P-256 CA.
new_ca() {
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$1" -out "$2" -days "$CA_DAYS" -subj "$3" -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# make_certs DIR: makes the test CA, the broker's key and certificate
# (SAN IP:127.0.0.1 and DNS:localhost, signed by the CA) and a second,
# unrelated CA, with openssl only (EC P-256: about 0.1 s in all). Idempotent:
# a valid set already in DIR is kept. Keys are readable by the owner only.
make_certs() {
  local dir="$1" t="$1/tls" t0
  if certs_valid "$dir"; then
    log "reusing the test CA and broker certificate in $t"
    return
  fi
  command -v openssl >/dev/null 2>&1 || die "openssl not found (needed by --secure to make test certificates)"
  t0="$(date +%s%N)"
  rm -rf "$t" "$dir/ca.pem" "$dir/untrusted-ca.pem"
  mkdir -m 700 "$t"
  (
    umask 077
    new_ca "$t/ca.key" "$dir/ca.pem" "$CA_SUBJECT" &&
      openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$t/broker.key" -out "$t/broker.csr" -subj "/CN=localhost" 2>/dev/null &&
      openssl x509 -req -in "$t/broker.csr" -CA "$dir/ca.pem" -CAkey "$t/ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days "$CERT_DAYS" -sha256 \
        -extfile <(printf '%s\n' "basicConstraints=critical,CA:FALSE" \
          "keyUsage=critical,digitalSignature,keyEncipherment" \
          "extendedKeyUsage=serverAuth" \
          "subjectAltName=IP:127.0.0.1,DNS:localhost") \
        -out "$t/broker.crt" 2>/dev/null &&
      cat "$t/broker.key" "$t/broker.crt" >"$t/broker.pem" &&
      new_ca "$t/untrusted.key" "$dir/untrusted-ca.pem" "$UNTRUSTED_SUBJECT"
  ) || die "openssl failed to make the test certificates in $t"
  rm -f "$t/broker.csr" "$t/untrusted.key" # nothing is ever signed by the untrusted CA
  chmod 644 "$dir/ca.pem" "$dir/untrusted-ca.pem"
  certs_valid "$dir" || die "the certificates made in $t do not verify"
  log "made a test CA and broker certificate in $((($(date +%s%N) - t0) / 1000000)) ms ($t)"
}

# make_users DIR: new random passwords for $SASL_USER, one per mechanism
# (different ones, so a client that uses the wrong line fails), in DIR/users.
# URL-safe base64, so they need no quoting in JAAS or librdkafka configs.
make_users() {
  local dir="$1" m
  (
    umask 077
    for m in PLAIN SCRAM-SHA-256 SCRAM-SHA-512; do
      printf '%s %s %s\n' "$m" "$SASL_USER" "$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')"
    done >"$dir/users"
  )
}

# user_password DIR MECHANISM: the password of MECHANISM's line in DIR/users.
user_password() { awk -v m="$2" '$1 == m { print $3; exit }' "$1/users"; }

# secure_server_properties DIR: the lines write_server_properties adds for
# the SASL_SSL listener (its PEM keystore and SASL mechanisms).
secure_server_properties() {
  local dir="$1"
  cat <<EOF
# SASL_SSL listener (kafka.sh start --secure): test-only CA and passwords.
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$dir/tls/broker.pem
listener.name.sasl_ssl.ssl.client.auth=none
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER="$(user_password "$dir" PLAIN)";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
}

# scram_format_args DIR: StorageTool arguments that store the SCRAM users of
# DIR/users in the cluster metadata at format time (KRaft has no ZooKeeper
# to hold them, and this needs no running broker).
scram_format_args() {
  local m u p
  while read -r m u p; do
    [[ "$m" == SCRAM-* ]] && printf '%s\n' --add-scram "$m=[name=$u,password=$p]"
  done <"$1/users"
}

# write_client_properties DIR: DIR/client.properties for Kafka's Java tools
# (--command-config, --producer.config, --consumer.config).
write_client_properties() {
  local dir="$1"
  (
    umask 077
    cat >"$dir/client.properties" <<EOF
# Written by e2e/kafka/kafka.sh start --secure: Kafka's Java clients over SASL_SSL.
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$SASL_USER" password="$(user_password "$dir" SCRAM-SHA-512)";
ssl.truststore.type=PEM
ssl.truststore.location=$dir/ca.pem
EOF
  )
}

# tls_ready DIR PORT: true when PORT completes a TLS handshake whose
# certificate verifies against DIR/ca.pem for 127.0.0.1 (no JVM: ~10 ms).
tls_ready() {
  timeout 10 openssl s_client -connect "127.0.0.1:$2" -CAfile "$1/ca.pem" \
    -verify_return_error -verify_ip 127.0.0.1 -brief </dev/null >/dev/null 2>&1
}
