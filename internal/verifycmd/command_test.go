package verifycmd

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/phasegate/phasegate/internal/verify"
)

// Bad usage exits 2 with one line naming the flag or variable; --help
// exits 0.
func TestVerifyUsage(t *testing.T) {
	base := map[string]string{"PHASEGATE_BROKERS": "127.0.0.1:1", "PHASEGATE_OUTPUT_TOPIC": "out"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string // stderr, or the start of stdout for --help
	}{
		{"help", []string{"--help"}, base, 0, "Usage: sidecar verify [flags]"},
		{"no brokers", nil, with("PHASEGATE_BROKERS", ""), 2, "sidecar verify: PHASEGATE_BROKERS is not set: it is required (see sidecar --help)\n"},
		{"no topic", nil, with("PHASEGATE_OUTPUT_TOPIC", ""), 2, "sidecar verify: no topic: give --topic or set PHASEGATE_OUTPUT_TOPIC\n"},
		{"unknown flag", []string{"--topc", "x"}, base, 2, "sidecar verify: flag provided but not defined: -topc (see sidecar verify --help)\n"},
		{"bad time", []string{"--from", "yesterday"}, base, 2, "sidecar verify: --from=\"yesterday\": not an RFC 3339 time such as 2026-12-02T10:00:00Z\n"},
		{"two starts", []string{"--from-offset", "3", "--group", "join"}, base, 2, "sidecar verify: --from, --from-offset and --group each give the start: use one\n"},
		{"bad offsets", []string{"--to-offset", "0:1,x"}, base, 2, "sidecar verify: --to-offset=\"0:1,x\": give N (every partition) or P:N,P:N with N >= 0\n"},
		{"end before start", []string{"--from", "2026-12-02T10:00:00Z", "--to", "2026-12-02T09:00:00Z"}, base, 2,
			"sidecar verify: --to=2026-12-02T09:00:00Z is not after --from=2026-12-02T10:00:00Z\n"},
		{"inputs from an unset variable", []string{"--inputs=env"}, base, 2, "sidecar verify: --inputs=env but PHASEGATE_INPUT_TOPICS is not set\n"},
		{"old protocol", nil, with("PHASEGATE_KAFKA_VERSION", "0.10.0"), 2,
			"sidecar verify: PHASEGATE_KAFKA_VERSION=\"0.10.0\": a Kafka version of at least 2.5.0 (KIP-447: a former owner of a task is fenced by its group generation), such as 3.9.0\n"},
		{"argument", []string{"out"}, base, 2, "sidecar verify: unexpected argument \"out\" (see sidecar verify --help)\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Run(context.Background(), c.args, c.env, &out, &errb)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, c.code, errb.String())
			}
			if c.code == 0 {
				if !strings.HasPrefix(out.String(), c.want) || !strings.Contains(out.String(), "-max-open-phases") {
					t.Fatalf("help:\n%s", out.String())
				}
				return
			}
			if errb.String() != c.want {
				t.Fatalf("stderr %q, want %q", errb.String(), c.want)
			}
		})
	}
}

// A cluster that does not answer is exit 3, not 1: nothing was checked.
func TestVerifyUnreachable(t *testing.T) {
	var out, errb bytes.Buffer
	env := map[string]string{"PHASEGATE_BROKERS": "127.0.0.1:1", "PHASEGATE_OUTPUT_TOPIC": "out"}
	if code := Run(context.Background(), nil, env, &out, &errb); code != exitCannotCheck {
		t.Fatalf("exit %d, want %d: %s", code, exitCannotCheck, errb.String())
	}
	if !strings.HasPrefix(errb.String(), "sidecar verify: connect to PHASEGATE_BROKERS=127.0.0.1:1: ") {
		t.Fatalf("stderr %q", errb.String())
	}
}

func TestWriteHistogram(t *testing.T) {
	var b bytes.Buffer
	writeHistogram(&b, "records per phase", verify.Histogram{Bounds: []float64{1, 10, 100}, Counts: []int64{0, 4, 1, 2}}, "")
	want := "  records per phase        phases\n" +
		"  <= 10                         4 ########################################\n" +
		"  <= 100                        1 ##########\n" +
		"  > 100                         2 ####################\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
