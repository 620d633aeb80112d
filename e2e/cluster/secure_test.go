//go:build e2e

package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	mnet "github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// secureBroker is one Kafka node with the StandardAuthorizer on: a
// SASL_SSL listener (PLAIN, a test CA) for the principal under test, and a
// PLAINTEXT listener whose ANONYMOUS principal is a super user, for the
// test's own administration (topics, ACLs, reading back).
type secureBroker struct {
	admin    string // 127.0.0.1:port, PLAINTEXT, super user
	secure   string // 127.0.0.1:port, SASL_SSL
	caFile   string
	user     string
	password string
	adm      *kadm.Client
	cl       *kgo.Client
}

func startSecureBroker(t *testing.T, ctx context.Context) *secureBroker {
	t.Helper()
	dir := t.TempDir()
	caFile, keystore, err := testCerts(dir)
	if err != nil {
		t.Fatalf("test certificates: %v", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	b := &secureBroker{
		admin: "127.0.0.1:" + strconv.Itoa(ports[0]), secure: "127.0.0.1:" + strconv.Itoa(ports[1]),
		caFile: caFile, user: "phasegate", password: fmt.Sprintf("pw-%d", time.Now().UnixNano()),
	}
	p0, p1 := strconv.Itoa(ports[0]), strconv.Itoa(ports[1])
	env := map[string]string{
		"KAFKA_NODE_ID":                                       "1",
		"KAFKA_PROCESS_ROLES":                                 "broker,controller",
		"KAFKA_CONTROLLER_QUORUM_VOTERS":                      "1@localhost:9093",
		"KAFKA_LISTENERS":                                     "PLAINTEXT://0.0.0.0:" + p0 + ",SASL_SSL://0.0.0.0:" + p1 + ",CONTROLLER://0.0.0.0:9093",
		"KAFKA_ADVERTISED_LISTENERS":                          "PLAINTEXT://127.0.0.1:" + p0 + ",SASL_SSL://127.0.0.1:" + p1,
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":                "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"KAFKA_INTER_BROKER_LISTENER_NAME":                    "PLAINTEXT",
		"KAFKA_CONTROLLER_LISTENER_NAMES":                     "CONTROLLER",
		"KAFKA_AUTHORIZER_CLASS_NAME":                         "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"KAFKA_SUPER_USERS":                                   "User:ANONYMOUS",
		"KAFKA_SASL_ENABLED_MECHANISMS":                       "PLAIN",
		"KAFKA_LISTENER_NAME_SASL__SSL_SSL_KEYSTORE_TYPE":     "PEM",
		"KAFKA_LISTENER_NAME_SASL__SSL_SSL_KEYSTORE_LOCATION": "/var/lib/kafka/broker.pem",
		"KAFKA_LISTENER_NAME_SASL__SSL_PLAIN_SASL_JAAS_CONFIG": fmt.Sprintf(
			`org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";`, b.user, b.password),
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                 "1",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":         "1",
		"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                    "1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":            "1",
		"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                 "0",
		"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                        "false",
		"KAFKA_LOG_CLEANER_DEDUPE_BUFFER_SIZE":                   "8388608",
		"KAFKA_HEAP_OPTS":                                        "-Xmx384m -Xms128m",
	}
	bindings := mnet.PortMap{}
	var exposed []string
	for _, p := range []string{p0, p1} {
		bindings[mnet.MustParsePort(p+"/tcp")] = []mnet.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: p}}
		exposed = append(exposed, p+"/tcp")
	}
	c, err := testcontainers.Run(ctx, kafkaImage,
		testcontainers.WithName(fmt.Sprintf("pg%d-kafka-secure", time.Now().UnixNano()%1_000_000_000)),
		testcontainers.WithEnv(env),
		testcontainers.WithFiles(testcontainers.ContainerFile{HostFilePath: keystore, ContainerFilePath: "/var/lib/kafka/broker.pem", FileMode: 0o644}),
		testcontainers.WithExposedPorts(exposed...),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.PortBindings = bindings }),
		testcontainers.WithWaitStrategyAndDeadline(3*time.Minute, wait.ForLog("Kafka Server started").WithStartupTimeout(3*time.Minute)),
	)
	if c != nil {
		t.Cleanup(func() {
			if out, err := docker(context.Background(), "logs", "--tail", "200", c.GetContainerID()); err == nil && t.Failed() {
				_ = os.WriteFile(filepath.Join(suite.work, "kafka-secure.log"), []byte(out), 0o644)
			}
			if err := testcontainers.TerminateContainer(c); err != nil {
				t.Errorf("remove the secure broker: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("start the secure broker: %v", err)
	}
	if b.cl, err = kgo.NewClient(kgo.SeedBrokers(b.admin)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.cl.Close)
	b.adm = kadm.NewClient(b.cl)
	return b
}

// testCerts writes a throw-away CA (ca.pem) and the broker's PEM keystore
// (PKCS#8 key and certificate for 127.0.0.1 and localhost) into dir.
func testCerts(dir string) (caFile, keystore string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "phasegate cluster test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	caFile, keystore = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "broker.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	ks := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(caFile, ca, 0o644); err != nil {
		return "", "", err
	}
	return caFile, keystore, os.WriteFile(keystore, ks, 0o644)
}
