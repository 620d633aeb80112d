//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// secureBroker is a broker started by `kafka.sh start --secure` for the
// S-scenarios alone: a PLAINTEXT listener (the test's own clients) and a
// SASL_SSL one (the sidecar, and one ConsoleConsumer read).
type secureBroker struct {
	dir    string
	plain  string // DIR/bootstrap
	secure string // DIR/bootstrap-secure
	users  map[string]string
}

// startSecureBroker starts the secure broker in the suite's work directory
// and stops it when t ends. Only a suite that starts its own brokers with
// kafka.sh does so; with PHASEGATE_E2E_BROKERS or testcontainers the
// S-scenarios skip, unless CI=true, where they run whenever kafka.sh can.
func startSecureBroker(t *testing.T) *secureBroker {
	t.Helper()
	b := needBroker(t)
	if !b.canRestart() {
		usable := secureScriptUsable()
		switch {
		case os.Getenv("CI") == "true" && usable != nil:
			t.Fatalf("the S-scenarios need e2e/kafka/kafka.sh start --secure (CI=true: not skipped): %v", usable)
		case os.Getenv("CI") != "true":
			t.Skipf("the S-scenarios start their own secure broker with e2e/kafka/kafka.sh, and do so only when the suite's broker comes from it; this one came from %s", b.source)
		}
	}
	sb := &secureBroker{dir: filepath.Join(suite.work, "kafka-secure")}
	if err := os.MkdirAll(sb.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	addr, err := kafkaScript(ctx, "start", "--secure", sb.dir)
	// Registered before the error check: a start that failed half-way
	// may have left a broker running.
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := kafkaScript(sctx, "stop", sb.dir); err != nil {
			t.Errorf("stop the secure broker: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("start the secure broker: %v", err)
	}
	sb.plain = addr
	sec, err := os.ReadFile(filepath.Join(sb.dir, "bootstrap-secure"))
	if err != nil {
		t.Fatalf("kafka.sh start --secure: %v", err)
	}
	sb.secure = strings.TrimSpace(string(sec))
	if sb.users, err = readSecureUsers(filepath.Join(sb.dir, "users")); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		if sb.users[m] == "" {
			t.Fatalf("%s/users has no %s password", sb.dir, m)
		}
	}
	t.Logf("secure broker: PLAINTEXT %s, SASL_SSL %s, started in %s (state %s)", sb.plain, sb.secure, time.Since(t0).Round(100*time.Millisecond), sb.dir)
	return sb
}

// secureScriptUsable says why kafka.sh cannot start a broker here, or nil.
func secureScriptUsable() error {
	if _, err := os.Stat(suite.script); err != nil {
		return err
	}
	if _, err := exec.LookPath("java"); err != nil && os.Getenv("JAVA_HOME") == "" {
		return fmt.Errorf("no java: %w", err)
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		return fmt.Errorf("no openssl: %w", err)
	}
	return nil
}

// readSecureUsers reads "MECHANISM USER PASSWORD" lines: mechanism -> password.
// The user is phasegate on every line (kafka.sh's SASL_USER).
func readSecureUsers(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	users := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[1] != secureUser {
			return nil, fmt.Errorf("%s: line %q is not \"MECHANISM %s PASSWORD\"", path, l, secureUser)
		}
		users[f[0]] = f[2]
	}
	return users, nil
}

// secureUser is the one user kafka.sh start --secure creates.
const secureUser = "phasegate"

// env is the sidecar's security settings for SCRAM-SHA-512 over SASL_SSL;
// callers add PHASEGATE_SASL_PASSWORD or PHASEGATE_SASL_PASSWORD_FILE.
func (sb *secureBroker) env(caFile string) map[string]string {
	return map[string]string{
		"PHASEGATE_BROKERS":           sb.secure,
		"PHASEGATE_SECURITY_PROTOCOL": "SASL_SSL",
		"PHASEGATE_SASL_MECHANISM":    "SCRAM-SHA-512",
		"PHASEGATE_SASL_USERNAME":     secureUser,
		"PHASEGATE_TLS_CA_FILE":       filepath.Join(sb.dir, caFile),
		"PHASEGATE_ALLOW_SPLIT_KEYS":  "true", // orders 3, payments 2 under partition routing
	}
}

// passwordFile writes the SCRAM-SHA-512 password into dir as a mounted
// secret would hold it (trailing newline, mode 0600) and returns its path.
func (sb *secureBroker) passwordFile(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "sasl-password")
	if err := os.WriteFile(path, []byte(sb.users["SCRAM-SHA-512"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newSecureScenario is newScenario on the secure broker: topics, the
// test's clients and the verifier's reads go over its PLAINTEXT listener,
// the sidecar over SASL_SSL with the settings of every F-scenario.
func newSecureScenario(t *testing.T, sb *secureBroker, name string) *scenario {
	t.Helper()
	sc := newScenarioOn(t, &broker{addrs: []string{sb.plain}, source: "kafka.sh start --secure", dir: sb.dir}, name)
	for k, v := range sb.env("ca.pem") {
		sc.env[k] = v
	}
	sc.env["PHASEGATE_SASL_PASSWORD_FILE"] = sb.passwordFile(t, sc.dir)
	return sc
}

// consoleConsumerSecure reads topic with Kafka's ConsoleConsumer over the
// SASL_SSL listener (DIR/client.properties: SCRAM-SHA-512, ca.pem),
// read_committed, printing what consoleConsumer prints.
func (sb *secureBroker) consoleConsumerSecure(ctx context.Context, topic string) (*javaRead, error) {
	return consoleConsumer(ctx, []string{sb.secure}, topic, "--consumer.config", filepath.Join(sb.dir, "client.properties"))
}

// scraper asks the supervised sidecar's HTTP endpoints every interval and
// appends every answer to one file, for the secret check (S4).
type scraper struct {
	sup  *supervisor
	path string
	stop context.CancelFunc
	wg   sync.WaitGroup
	// ok counts answers with status 200 per endpoint; read after wait.
	ok map[string]int
	// instances is how many different instances answered /metrics.
	instances map[int]bool
	err       error
}

// scrapedPaths are the endpoints scraped during S1.
var scrapedPaths = []string{"/phases", "/metrics", "/healthz", "/readyz"}

// startScraper starts scraping into path until wait is called.
func startScraper(ctx context.Context, sup *supervisor, path string, interval time.Duration) *scraper {
	ctx, cancel := context.WithCancel(ctx)
	s := &scraper{sup: sup, path: path, stop: cancel, ok: map[string]int{}, instances: map[int]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.err = s.run(ctx, interval)
	}()
	return s
}

func (s *scraper) run(ctx context.Context, interval time.Duration) error {
	f, err := os.Create(s.path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if in := s.sup.current(); in != nil && !in.exited() {
			for _, p := range scrapedPaths {
				body, status, err := scrapeGet(ctx, "http://"+in.http+p)
				if err != nil {
					continue // starting, killed, or shutting down
				}
				fmt.Fprintf(w, "== instance %d GET %s: %d at %s\n", in.n, p, status, time.Now().Format(time.RFC3339Nano))
				_, _ = w.Write(body)
				fmt.Fprintln(w)
				if status == http.StatusOK {
					s.ok[p]++
					if p == "/metrics" {
						s.instances[in.n] = true
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// wait stops scraping and returns the first error writing the file.
func (s *scraper) wait() error {
	s.stop()
	s.wg.Wait()
	return s.err
}

// scrapeGet fetches url with a short timeout.
func scrapeGet(ctx context.Context, url string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

// secretOutputs collects the files holding what the sidecar printed or answered
// during the S-scenarios, for S4. Safe for concurrent use.
type secretOutputs struct {
	mu    sync.Mutex // mu guards files
	files map[string][]string
}

// add records files under a kind ("S1 log", "/metrics", ...).
func (o *secretOutputs) add(kind string, files ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.files == nil {
		o.files = map[string][]string{}
	}
	o.files[kind] = append(o.files[kind], files...)
}

func (o *secretOutputs) snapshot() map[string][]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]string{}
	for k, v := range o.files {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// secretLeaks returns, for each secret found in data, a line naming the secret
// by its mechanism (never the secret itself) and where it was found.
func secretLeaks(data []byte, secrets map[string]string, where string) []string {
	var out []string
	for mech, s := range secrets {
		if i := bytes.Index(data, []byte(s)); i >= 0 {
			line := bytes.Count(data[:i], []byte("\n")) + 1
			out = append(out, fmt.Sprintf("the %s password is in %s, line %d", mech, where, line))
		}
	}
	return out
}

// runSidecarOnce runs the sidecar binary with args and env added to the process
// environment, writes its stdout and stderr to dir/name.out, and returns
// the exit status and that file.
func runSidecarOnce(ctx context.Context, dir, name string, env map[string]string, args ...string) (int, string, error) {
	path := filepath.Join(dir, name+".out")
	f, err := os.Create(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, suite.bin, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), path, nil
	}
	return 0, path, err
}
