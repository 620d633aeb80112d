//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// secureRecords is S1's base workload: a security test, not a load test.
const secureRecords = 20_000

// TestSecure runs the S-scenarios of issue 7 on a broker of their own,
// started with `kafka.sh start --secure`: the sidecar reaches it over
// SASL_SSL with SCRAM-SHA-512, the test's own clients over its PLAINTEXT
// listener.
//
//	S1  happy path with the password from a file and one SIGKILL restart;
//	    the shared checks, plus a ConsoleConsumer read over SASL_SSL
//	S2  a wrong password: exit 1, an authentication error naming the user
//	    and PHASEGATE_SASL_PASSWORD, without the password
//	S3  a CA that did not sign the broker's certificate: exit 1, a TLS
//	    error naming PHASEGATE_TLS_CA_FILE
//	S4  no password of DIR/users in anything the sidecar printed or
//	    answered in S1-S3, nor in --help and config
func TestSecure(t *testing.T) {
	sb := startSecureBroker(t)
	out := &secretOutputs{}
	t.Run("S1", func(t *testing.T) { secureHappyPath(t, sb, out) })
	t.Run("S2", func(t *testing.T) {
		env := sb.env("ca.pem")
		// A real password of the user, but SCRAM-SHA-256's: wrong for
		// SCRAM-SHA-512, and a secret S4 looks for.
		env["PHASEGATE_SASL_PASSWORD"] = sb.users["SCRAM-SHA-256"]
		secureBadCredentials(t, sb, out, "S2", env, []string{
			"SASL authentication failed", sb.secure, `"` + secureUser + `"`, "SCRAM-SHA-512", "PHASEGATE_SASL_PASSWORD",
		})
	})
	t.Run("S3", func(t *testing.T) {
		env := sb.env("untrusted-ca.pem")
		env["PHASEGATE_SASL_PASSWORD_FILE"] = sb.passwordFile(t, t.TempDir())
		secureBadCredentials(t, sb, out, "S3", env, []string{"TLS", sb.secure, "PHASEGATE_TLS_CA_FILE"})
	})
	t.Run("S4", func(t *testing.T) { secretNowhere(t, sb, out) })
}

// secureHappyPath is S1: the F-scenarios' workload (20,000 base records
// over orders, 3 partitions, and payments, 2) through a sidecar on
// SASL_SSL, SIGKILLed once half of the input is committed. /phases,
// /metrics, /healthz and /readyz are scraped all along for S4.
func secureHappyPath(t *testing.T, sb *secureBroker, out *secretOutputs) {
	sc := newSecureScenario(t, sb, "S1")
	t.Setenv("PHASEGATE_E2E_RECORDS", strconv.Itoa(secureRecords)) // read by newPlan
	sc.start(newPlan(sc.topo, 11, nil), nil)
	t.Cleanup(func() {
		for _, in := range sc.sup.instances() {
			out.add("S1 sidecar logs", in.log)
		}
	})
	scr := startScraper(sc.ctx, sc.sup, filepath.Join(sc.dir, "http-responses.txt"), 500*time.Millisecond)
	out.add("S1 HTTP answers", scr.path)
	t.Cleanup(func() { _ = scr.wait() })

	got := sc.waitProgress(0.5)
	in := sc.sup.current()
	if in == nil || in.exited() {
		t.Fatalf("no sidecar running at %.0f %% committed", got*100)
	}
	if err := in.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL to instance %d at %.0f %% committed", in.n, got*100)
	if !in.wait(40 * time.Second) {
		t.Fatalf("instance %d still running 40 s after SIGKILL", in.n)
	}
	sc.poll(time.Minute, "the supervisor to restart the sidecar", func() bool {
		cur := sc.sup.current()
		return cur != nil && cur != in
	})
	sc.finish()
	if err := scr.wait(); err != nil {
		t.Errorf("scraping: %v", err)
	}
	r := sc.check()

	// Kafka's own client, through the listener the sidecar used.
	jr, err := sb.consoleConsumerSecure(sc.ctx, sc.topo.out)
	if err != nil {
		t.Fatal(err)
	}
	if err := compareJava(jr, r.outRecs); err != nil {
		t.Errorf("ConsoleConsumer over SASL_SSL and franz-go over PLAINTEXT disagree:\n%s", shown(err))
	}
	if n := sc.restarts(); n != 1 {
		t.Errorf("the sidecar was restarted %d times; only the SIGKILL should have restarted it", n)
		for _, in := range sc.sup.instances() {
			t.Logf("%s\n%s", in.describe(), in.excerpt(10))
		}
	}
	for _, p := range []string{"/phases", "/metrics"} {
		if scr.ok[p] == 0 {
			t.Errorf("no %s answer was scraped: S4 would prove nothing about it", p)
		}
	}
	if len(scr.instances) < 2 {
		t.Errorf("/metrics answered from %d instance(s); want the one killed and the one after it", len(scr.instances))
	}
	t.Logf("S1 over SASL_SSL: ConsoleConsumer read %d records (it says %d), %d markers; franz-go read %d; scraped %v from instances %v",
		len(jr.positions), jr.processed, jr.markers, len(flatten(r.outRecs)), scr.ok, secureSortedKeys(scr.instances))
}

// secureBadCredentials runs one sidecar (no supervisor) with the security
// settings env, which the broker must refuse: it has to exit 1 (a runtime
// error, not configuration) with one ERROR line holding every string of
// want and no password of DIR/users.
func secureBadCredentials(t *testing.T, sb *secureBroker, out *secretOutputs, name string, env map[string]string, want []string) {
	t0 := time.Now()
	dir := filepath.Join(suite.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%s-%d", strings.ToLower(name), time.Now().UnixNano()%1_000_000_000)
	env["PHASEGATE_INPUT_TOPICS"] = id + "-orders," + id + "-payments"
	env["PHASEGATE_OUTPUT_TOPIC"] = id + "-out"
	env["PHASEGATE_GROUP_ID"] = id + "-group"
	env["PHASEGATE_LOG_LEVEL"] = "debug"
	env["PHASEGATE_LOG_FORMAT"] = "json"
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	in, err := startInstance(1, dir, list)
	if err != nil {
		t.Fatal(err)
	}
	out.add(name+" sidecar log", in.log)
	code, msg := -1, ""
	t.Cleanup(func() {
		if !in.exited() {
			_ = in.signal(syscall.SIGKILL)
			in.wait(10 * time.Second)
		}
		verdict, after := "PASS", "-"
		if t.Failed() {
			verdict = "FAIL"
		}
		if in.exited() {
			after = in.exitAt.Sub(in.started).Round(time.Millisecond).String()
		}
		fmt.Printf("%s exit=%d after=%s message=%q time=%s verdict=%s\n", name, code,
			after, msg, time.Since(t0).Round(100*time.Millisecond), verdict)
	})
	if !in.wait(2 * time.Minute) {
		t.Fatalf("the sidecar still runs 2 min after it started with bad credentials:\n%s", in.excerpt(20))
	}
	code = in.state.ExitCode()
	lines, err := in.lines()
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, l := range lines {
		if l.Level == "ERROR" {
			errs = append(errs, l.Msg)
		}
	}
	if len(errs) > 0 {
		msg = errs[len(errs)-1]
	}
	raw, _ := os.ReadFile(in.log)
	switch {
	case code != 1:
		t.Errorf("exit status %d, want 1 (a runtime error; 2 is for bad configuration):\n%s", code, tail(string(raw), 20))
	case len(errs) != 1:
		t.Errorf("%d ERROR lines, want the one that explains the failure:\n%s", len(errs), tail(string(raw), 20))
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the error does not name %q: %s", w, msg)
		}
	}
	for _, l := range secretLeaks([]byte(msg), sb.users, "the error message") {
		t.Errorf("%s", l)
	}
}

// secretNowhere is S4: it adds what --help and config print (with the
// PLAIN password in PHASEGATE_SASL_PASSWORD, so every password of
// DIR/users has been given to the sidecar somewhere) to what S1-S3
// collected, and looks for every password in all of it.
func secretNowhere(t *testing.T, sb *secureBroker, out *secretOutputs) {
	t0 := time.Now()
	dir := filepath.Join(suite.work, "S4")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	nfiles, nbytes, nfound := 0, 0, 0
	t.Cleanup(func() {
		verdict := "PASS"
		if t.Failed() {
			verdict = "FAIL"
		}
		fmt.Printf("S4 files=%d bytes=%d passwords=%d found=%d time=%s verdict=%s\n",
			nfiles, nbytes, len(sb.users), nfound, time.Since(t0).Round(100*time.Millisecond), verdict)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := func() map[string]string {
		env := sb.env("ca.pem")
		env["PHASEGATE_INPUT_TOPICS"] = "s4-orders,s4-payments"
		env["PHASEGATE_OUTPUT_TOPIC"] = "s4-out"
		return env
	}
	withPassword := base()
	withPassword["PHASEGATE_SASL_MECHANISM"] = "PLAIN"
	withPassword["PHASEGATE_SASL_PASSWORD"] = sb.users["PLAIN"]
	withFile := base()
	withFile["PHASEGATE_SASL_PASSWORD_FILE"] = sb.passwordFile(t, dir)
	withBoth := base()
	withBoth["PHASEGATE_SASL_PASSWORD"] = sb.users["SCRAM-SHA-512"]
	withBoth["PHASEGATE_SASL_PASSWORD_FILE"] = withFile["PHASEGATE_SASL_PASSWORD_FILE"]
	runs := []struct {
		name string
		env  map[string]string
		args []string
		code int
		must string // printed by a run that shows the setting at all
	}{
		{"help", withPassword, []string{"--help"}, 0, "PHASEGATE_SASL_PASSWORD "},
		{"config-password", withPassword, []string{"config"}, 0, "PHASEGATE_SASL_PASSWORD "},
		{"config-password-file", withFile, []string{"config"}, 0, "PHASEGATE_SASL_PASSWORD_FILE "},
		{"config-both", withBoth, []string{"config"}, 2, "PHASEGATE_SASL_PASSWORD_FILE"},
	}
	for _, r := range runs {
		code, path, err := runSidecarOnce(ctx, dir, r.name, r.env, r.args...)
		if err != nil {
			t.Fatalf("sidecar %s: %v", strings.Join(r.args, " "), err)
		}
		out.add("sidecar "+strings.Join(r.args, " "), path)
		b, _ := os.ReadFile(path)
		if code != r.code || !strings.Contains(string(b), r.must) {
			t.Errorf("%s: sidecar %s exited %d (want %d) and printed (want %q in it):\n%s", r.name, strings.Join(r.args, " "), code, r.code, r.must, b)
		}
	}

	files := out.snapshot()
	for _, kind := range []string{"S1 sidecar logs", "S1 HTTP answers", "S2 sidecar log", "S3 sidecar log"} {
		if len(files[kind]) == 0 {
			t.Errorf("nothing collected as %q: S4 cannot vouch for it", kind)
		}
	}
	if n := len(files["S1 sidecar logs"]); n < 2 {
		t.Errorf("%d S1 sidecar log(s); the killed instance and its successor make 2", n)
	}
	var found []string
	for _, kind := range secureSortedKeys(files) {
		for _, f := range files[kind] {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Errorf("%s: %v", kind, err)
				continue
			}
			nfiles++
			nbytes += len(b)
			found = append(found, secretLeaks(b, sb.users, f)...)
		}
	}
	nfound = len(found)
	for _, l := range found {
		t.Errorf("%s", l)
	}
}

func secureSortedKeys[V any, K interface{ ~string | ~int }](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// The S-scenarios' own reading of outputs: if these are wrong, S4 and the
// SASL_SSL read prove nothing. They need no broker.

func TestSecretLeaks(t *testing.T) {
	secrets := map[string]string{"PLAIN": "pA55-w0rd_x", "SCRAM-SHA-512": "zz9-Yq"}
	cases := []struct {
		name string
		data string
		want []string
	}{
		{"none", "SASL authentication failed for user \"phasegate\"\n", nil},
		{"in a JSON log line", "a\nb\n{\"msg\":\"password pA55-w0rd_x\"}\n", []string{"the PLAIN password is in f, line 3"}},
		{"at the start", "zz9-Yq", []string{"the SCRAM-SHA-512 password is in f, line 1"}},
		{"a prefix is not the secret", "pA55-w0rd", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := secretLeaks([]byte(c.data), secrets, "f")
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("leaks = %q, want %q", got, c.want)
			}
			for _, l := range got {
				for _, s := range secrets {
					if strings.Contains(l, s) {
						t.Fatalf("the report %q repeats the secret", l)
					}
				}
			}
		})
	}
}

func TestReadSecureUsers(t *testing.T) {
	cases := []struct {
		name, file string
		want       map[string]string
		err        bool
	}{
		{"kafka.sh's three lines", "PLAIN phasegate a\nSCRAM-SHA-256 phasegate b\nSCRAM-SHA-512 phasegate c\n",
			map[string]string{"PLAIN": "a", "SCRAM-SHA-256": "b", "SCRAM-SHA-512": "c"}, false},
		{"another user", "PLAIN admin a\n", nil, true},
		{"a field missing", "PLAIN phasegate\n", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "users")
			if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readSecureUsers(path)
			if (err != nil) != c.err || fmt.Sprint(got) != fmt.Sprint(c.want) && !c.err {
				t.Fatalf("readSecureUsers = %v, %v; want %v (error: %v)", got, err, c.want, c.err)
			}
		})
	}
}

func TestSecureParseConsole(t *testing.T) {
	cases := []struct {
		name, out, stderr       string
		records, markers, total int
		err                     string
	}{
		{"records and a marker",
			"Partition:0\tOffset:0\tNO_HEADERS\nPartition:1\tOffset:4\tphasegate.marker:1,phasegate.phase:7\nWARN noise\n",
			"Processed a total of 2 messages\n", 2, 1, 2, ""},
		{"printed twice", "Partition:0\tOffset:0\tNO_HEADERS\nPartition:0\tOffset:0\tNO_HEADERS\n", "", 0, 0, 0, "twice"},
		{"a bad offset", "Partition:0\tOffset:x\tNO_HEADERS\n", "", 0, 0, 0, "Offset:x"},
		{"no total", "Partition:2\tOffset:9\tphasegate.marker:10\n", "", 1, 0, -1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jr, err := parseConsole([]byte(c.out), c.stderr)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || len(jr.positions) != c.records || jr.markers != c.markers || jr.processed != c.total {
				t.Fatalf("got %d records, %d markers, total %d, err %v; want %d, %d, %d",
					len(jr.positions), jr.markers, jr.processed, err, c.records, c.markers, c.total)
			}
		})
	}
}
