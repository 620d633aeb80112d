package config

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"hash"
	"log/slog"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// Security is how the sidecar connects to the brokers: TLS and SASL, read
// with the rest of Config. Secrets are never printed: String redacts them,
// and errors name the variable, never the value.
type Security struct {
	Protocol           string `env:"SECURITY_PROTOCOL" envDefault:"PLAINTEXT" help:"PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"`
	SASLMechanism      string `env:"SASL_MECHANISM" envDefault:"PLAIN" help:"PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with SASL_*)"`
	SASLUsername       string `env:"SASL_USERNAME" help:"SASL user name"`
	SASLPassword       string `env:"SASL_PASSWORD" help:"SASL password (never printed); or use PHASEGATE_SASL_PASSWORD_FILE" secret:"true"`
	SASLPasswordFile   string `env:"SASL_PASSWORD_FILE" help:"file holding the SASL password (a mounted secret); trailing newline ignored"`
	TLSCAFile          string `env:"TLS_CA_FILE" help:"PEM CA bundle to trust (default: the system's)"`
	TLSCertFile        string `env:"TLS_CERT_FILE" help:"PEM client certificate, for mutual TLS (with PHASEGATE_TLS_KEY_FILE)"`
	TLSKeyFile         string `env:"TLS_KEY_FILE" help:"PEM client key, for mutual TLS (with PHASEGATE_TLS_CERT_FILE)"`
	TLSServerName      string `env:"TLS_SERVER_NAME" help:"server name to verify instead of the broker's host"`
	TLSInsecureSkipVer bool   `env:"TLS_INSECURE_SKIP_VERIFY" envDefault:"false" help:"skip verifying the broker's certificate (logs a warning at every start; never in production)"`

	password string // resolved from SASLPassword or SASLPasswordFile
	tls      *tls.Config
}

// TLS is the TLS configuration Resolve loaded, nil when the protocol does
// not use TLS. The preflight's broker probe shakes hands with it.
func (s Security) TLS() *tls.Config { return s.tls }

func (s Security) usesTLS() bool  { return s.Protocol == "SSL" || s.Protocol == "SASL_SSL" }
func (s Security) usesSASL() bool { return strings.HasPrefix(s.Protocol, "SASL_") }

// Resolve checks the combination and loads the files once, at start
// (Load, LoadVerify); every error is an *Error naming the variable. environ
// tells which variables were set at all (a mechanism or a TLS option set
// for a protocol that does not use it is a mistake to name).
func (s *Security) Resolve(environ map[string]string) error {
	switch s.Protocol {
	case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
	default:
		return BadVar("SECURITY_PROTOCOL", s.Protocol, "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
	}
	if v, set := environ[Prefix+"SASL_MECHANISM"]; set && !s.usesSASL() {
		return &Error{fmt.Sprintf("%sSASL_MECHANISM=%q is set but %sSECURITY_PROTOCOL=%q does not use SASL: set %sSECURITY_PROTOCOL to SASL_PLAINTEXT or SASL_SSL, or unset %sSASL_MECHANISM",
			Prefix, v, Prefix, s.Protocol, Prefix, Prefix)}
	}
	if v, set := environ[Prefix+"TLS_INSECURE_SKIP_VERIFY"]; set && s.TLSInsecureSkipVer && !s.usesTLS() {
		return &Error{fmt.Sprintf("%sTLS_INSECURE_SKIP_VERIFY=%q is set but %sSECURITY_PROTOCOL=%q does not use TLS: use SSL or SASL_SSL, or unset %sTLS_INSECURE_SKIP_VERIFY",
			Prefix, v, Prefix, s.Protocol, Prefix)}
	}
	if !s.usesTLS() {
		for name, v := range map[string]string{"TLS_CA_FILE": s.TLSCAFile, "TLS_CERT_FILE": s.TLSCertFile, "TLS_KEY_FILE": s.TLSKeyFile, "TLS_SERVER_NAME": s.TLSServerName} {
			if v != "" {
				return &Error{fmt.Sprintf("%s%s is set but %sSECURITY_PROTOCOL=%q does not use TLS: use SSL or SASL_SSL", Prefix, name, Prefix, s.Protocol)}
			}
		}
	}
	if s.usesSASL() {
		if err := s.resolveSASL(); err != nil {
			return err
		}
	} else if s.SASLUsername != "" || s.SASLPassword != "" || s.SASLPasswordFile != "" {
		return &Error{fmt.Sprintf("SASL credentials (%sSASL_USERNAME, %sSASL_PASSWORD or _FILE) are set but %sSECURITY_PROTOCOL=%q does not use SASL: use SASL_PLAINTEXT or SASL_SSL", Prefix, Prefix, Prefix, s.Protocol)}
	}
	if s.usesTLS() {
		return s.resolveTLS()
	}
	return nil
}

func (s *Security) resolveSASL() error {
	switch s.SASLMechanism {
	case sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA256, sarama.SASLTypeSCRAMSHA512:
	default:
		return BadVar("SASL_MECHANISM", s.SASLMechanism, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	}
	if s.SASLUsername == "" {
		return &Error{fmt.Sprintf("%sSASL_USERNAME is empty: %sSECURITY_PROTOCOL=%s needs a user name", Prefix, Prefix, s.Protocol)}
	}
	switch {
	case s.SASLPassword != "" && s.SASLPasswordFile != "":
		return &Error{fmt.Sprintf("%sSASL_PASSWORD and %sSASL_PASSWORD_FILE are both set: use one", Prefix, Prefix)}
	case s.SASLPasswordFile != "":
		b, err := os.ReadFile(s.SASLPasswordFile)
		if err != nil {
			return &Error{fmt.Sprintf("%sSASL_PASSWORD_FILE=%q cannot be read: %v", Prefix, s.SASLPasswordFile, pathError(err))}
		}
		s.password = strings.TrimRight(string(b), "\r\n")
	default:
		s.password = s.SASLPassword
	}
	if s.password == "" {
		return &Error{fmt.Sprintf("no SASL password: set %sSASL_PASSWORD or %sSASL_PASSWORD_FILE (mechanism %s needs credentials)", Prefix, Prefix, s.SASLMechanism)}
	}
	return nil
}

func (s *Security) resolveTLS() error {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.TLSServerName, InsecureSkipVerify: s.TLSInsecureSkipVer} //nolint:gosec // opt-in, warned at start
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return &Error{fmt.Sprintf("%sTLS_CA_FILE=%q cannot be read: %v", Prefix, s.TLSCAFile, pathError(err))}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return &Error{fmt.Sprintf("%sTLS_CA_FILE=%q holds no PEM certificate", Prefix, s.TLSCAFile)}
		}
		c.RootCAs = pool
	}
	switch {
	case s.TLSCertFile != "" && s.TLSKeyFile == "":
		return &Error{fmt.Sprintf("%sTLS_CERT_FILE is set without %sTLS_KEY_FILE: mutual TLS needs both", Prefix, Prefix)}
	case s.TLSKeyFile != "" && s.TLSCertFile == "":
		return &Error{fmt.Sprintf("%sTLS_KEY_FILE is set without %sTLS_CERT_FILE: mutual TLS needs both", Prefix, Prefix)}
	case s.TLSCertFile != "":
		cert, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
		if err != nil {
			return &Error{fmt.Sprintf("%sTLS_CERT_FILE=%q and %sTLS_KEY_FILE=%q do not load as a key pair: %v",
				Prefix, s.TLSCertFile, Prefix, s.TLSKeyFile, pathError(err))}
		}
		c.Certificates = []tls.Certificate{cert}
	}
	s.tls = c
	return nil
}

// pathError drops the file contents any error might quote.
func pathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// Warn logs what an operator must know at every start.
func (s Security) Warn(log *slog.Logger) {
	if s.usesTLS() && s.TLSInsecureSkipVer {
		log.Warn("PHASEGATE_TLS_INSECURE_SKIP_VERIFY=true: the brokers' certificates are NOT verified; anyone on the path can read and change the data")
	}
}

// Apply sets TLS and SASL on a sarama configuration, as Resolve loaded
// them. Every client of the sidecar and of `sidecar verify` gets it.
func (s Security) Apply(c *sarama.Config) {
	if s.usesTLS() {
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = s.tls.Clone()
	}
	if !s.usesSASL() {
		return
	}
	c.Net.SASL.Enable = true
	c.Net.SASL.Handshake = true
	c.Net.SASL.Mechanism = sarama.SASLMechanism(s.SASLMechanism)
	c.Net.SASL.User = s.SASLUsername
	c.Net.SASL.Password = s.password
	switch s.SASLMechanism {
	case sarama.SASLTypeSCRAMSHA256:
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha256.New} }
	case sarama.SASLTypeSCRAMSHA512:
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha512.New} }
	}
}

// scramClient adapts xdg-go/scram to sarama's SCRAMClient.
type scramClient struct {
	hash func() hash.Hash
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := scram.HashGeneratorFcn(c.hash).NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }
func (c *scramClient) Done() bool                            { return c.conv.Done() }
