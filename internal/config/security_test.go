package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad security combinations fail at start with an *Error (exit 2) of one
// line naming the variable; no secret appears in it.
func TestBadSecurityCombinations(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-Pa55"
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown protocol", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SSH"}, "PHASEGATE_SECURITY_PROTOCOL"},
		{"SASL mechanism without credentials", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SASL_SSL", "PHASEGATE_SASL_MECHANISM": "SCRAM-SHA-512"}, "PHASEGATE_SASL_USERNAME"},
		{"user without password", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "PHASEGATE_SASL_USERNAME": "alice"}, "PHASEGATE_SASL_PASSWORD"},
		{"unknown mechanism", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "PHASEGATE_SASL_MECHANISM": "GSSAPI", "PHASEGATE_SASL_USERNAME": "a", "PHASEGATE_SASL_PASSWORD": secret}, "PHASEGATE_SASL_MECHANISM"},
		{"password and password file", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "PHASEGATE_SASL_USERNAME": "a", "PHASEGATE_SASL_PASSWORD": secret, "PHASEGATE_SASL_PASSWORD_FILE": "/x"}, "PHASEGATE_SASL_PASSWORD_FILE"},
		{"unreadable password file", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "PHASEGATE_SASL_USERNAME": "a", "PHASEGATE_SASL_PASSWORD_FILE": filepath.Join(dir, "missing")}, "PHASEGATE_SASL_PASSWORD_FILE"},
		{"credentials without SASL", map[string]string{"PHASEGATE_SASL_USERNAME": "a", "PHASEGATE_SASL_PASSWORD": secret}, "PHASEGATE_SECURITY_PROTOCOL"},
		{"client key without its certificate", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SSL", "PHASEGATE_TLS_KEY_FILE": filepath.Join(dir, "k.pem")}, "PHASEGATE_TLS_CERT_FILE"},
		{"client certificate without its key", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SSL", "PHASEGATE_TLS_CERT_FILE": filepath.Join(dir, "c.pem")}, "PHASEGATE_TLS_KEY_FILE"},
		{"unreadable CA file", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SSL", "PHASEGATE_TLS_CA_FILE": filepath.Join(dir, "missing.pem")}, "PHASEGATE_TLS_CA_FILE"},
		{"CA file without a certificate", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SSL", "PHASEGATE_TLS_CA_FILE": notPEM}, "PHASEGATE_TLS_CA_FILE"},
		{"TLS file without TLS", map[string]string{"PHASEGATE_TLS_CA_FILE": notPEM}, "PHASEGATE_SECURITY_PROTOCOL"},
		{"insecure flag not a bool", map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SSL", "PHASEGATE_TLS_INSECURE_SKIP_VERIFY": "sure"}, "PHASEGATE_TLS_INSECURE_SKIP_VERIFY"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := validEnv()
			for k, v := range c.env {
				env[k] = v
			}
			_, _, err := Load(env)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load: %v, want an *Error (exit status 2)", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
				t.Fatalf("%q: want one line naming %s", msg, c.want)
			}
			if strings.Contains(msg, secret) {
				t.Fatalf("the password appears in the output: %q", msg)
			}
		})
	}
}

func TestPasswordFromFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(f, []byte("from-a-mounted-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := validEnv()
	env["PHASEGATE_SECURITY_PROTOCOL"] = "SASL_PLAINTEXT"
	env["PHASEGATE_SASL_MECHANISM"] = "SCRAM-SHA-256"
	env["PHASEGATE_SASL_USERNAME"] = "alice"
	env["PHASEGATE_SASL_PASSWORD_FILE"] = f
	cfg, _, err := Load(env)
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.Kafka().Base()
	if !sc.Net.SASL.Enable || sc.Net.SASL.Password != "from-a-mounted-secret" || sc.Net.SASL.SCRAMClientGeneratorFunc == nil || sc.Net.TLS.Enable {
		t.Fatalf("SASL not configured from the file: %+v", sc.Net.SASL)
	}
	if err := sc.Validate(); err != nil {
		t.Fatalf("sarama rejects the configuration: %v", err)
	}
}
