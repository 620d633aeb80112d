//go:build e2e

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pipeline names the resources of one sidecar run on the secure broker.
type pipeline struct {
	forks                      []string
	out, quarantine, watermark string
	group, txnID               string
}

// acl is one permission of docs/SECURITY.md's minimal set.
type acl struct {
	name     string // what the test calls it
	resource string // the resource's name, which the error must name
	builder  *kadm.ACLBuilder
}

// minimalACLs is docs/SECURITY.md's table: what the sidecar's principal
// needs when the quarantine and watermark topics exist beforehand.
func minimalACLs(principal string, p pipeline) []acl {
	allow := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow(principal).AllowHosts().ResourcePatternType(kadm.ACLPatternLiteral)
	}
	topic := func(name, what, topic string, op kadm.ACLOperation) acl {
		return acl{name + " topic " + what, topic, allow().Topics(topic).Operations(op)}
	}
	var out []acl
	for _, f := range p.forks {
		out = append(out, topic("READ", f+" (fork)", f, kadm.OpRead))
	}
	return append(out,
		acl{"READ group", p.group, allow().Groups(p.group).Operations(kadm.OpRead)},
		topic("WRITE", "output", p.out, kadm.OpWrite),
		topic("WRITE", "quarantine", p.quarantine, kadm.OpWrite),
		topic("READ", "watermark", p.watermark, kadm.OpRead),
		topic("WRITE", "watermark", p.watermark, kadm.OpWrite),
		// The sidecar checks an existing watermark topic's cleanup.policy
		// (proxy/fleet.go checkReportTopic).
		topic("DESCRIBE_CONFIGS", "watermark", p.watermark, kadm.OpDescribeConfigs),
		acl{"WRITE transactional ID", p.txnID, allow().TransactionalIDs(p.txnID).Operations(kadm.OpWrite)},
	)
}

// TestACLs runs the sidecar over SASL_SSL as a principal holding exactly
// the minimal ACLs (it must align the whole input and exit 0 on SIGTERM),
// then once without each of them in turn: it must exit non-zero and commit
// nothing, and must say which permission on which resource is missing
// (clear_error on its line).
func TestACLs(t *testing.T) {
	needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	b := startSecureBroker(t, ctx)
	forks := map[string]int32{"orders": 2, "payments": 2}
	for name, n := range forks {
		if resp, err := b.adm.CreateTopic(ctx, n, 1, nil, name); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, resp.Err)
		}
	}
	const records = 2000
	writeInputs(t, ctx, b.admin, []string{"orders", "payments"}, records)
	base := minimalACLs("User:"+b.user, pipeline{forks: []string{"orders", "payments"}})
	cases := []struct {
		name string
		drop int // index into the minimal set; -1 keeps them all
	}{{"all minimal ACLs", -1}}
	for i, a := range base {
		cases = append(cases, struct {
			name string
			drop int
		}{"without " + a.name, i})
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pipeline{forks: []string{"orders", "payments"}, out: fmt.Sprintf("aligned-%d", i),
				group: fmt.Sprintf("acl-group-%d", i), txnID: fmt.Sprintf("acl-txn-%d", i)}
			p.quarantine, p.watermark = p.out+".quarantine", p.out+".watermarks"
			for name, n := range map[string]int32{p.out: 2, p.quarantine: 2} {
				if resp, err := b.adm.CreateTopic(ctx, n, 1, nil, name); err != nil || resp.Err != nil {
					t.Fatalf("create %s: %v %v", name, err, resp.Err)
				}
			}
			compact := "compact"
			if resp, err := b.adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, p.watermark); err != nil || resp.Err != nil {
				t.Fatalf("create %s: %v %v", p.watermark, err, resp.Err)
			}
			// Each case starts from no ACL for the principal (the fork
			// topics are shared by every case).
			del := kadm.NewACLs().Allow("User:" + b.user).AllowHosts().AnyResource().
				Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
			if _, err := b.adm.DeleteACLs(ctx, del); err != nil {
				t.Fatalf("delete the ACLs of User:%s: %v", b.user, err)
			}
			acls := minimalACLs("User:"+b.user, p)
			var missing *acl
			for j, a := range acls {
				if j == c.drop {
					missing = &acls[j]
					continue
				}
				res, err := b.adm.CreateACLs(ctx, a.builder)
				if err == nil {
					for _, r := range res {
						if r.Err != nil {
							err = r.Err
						}
					}
				}
				if err != nil {
					t.Fatalf("create ACL %s: %v", a.name, err)
				}
			}
			run := b.runSidecar(t, ctx, p)
			committed := b.committedRecords(t, ctx, p.out) + b.committedRecords(t, ctx, p.quarantine)
			if missing == nil {
				if !run.caughtUp || run.exit != 0 || committed < records {
					t.Errorf("with the minimal ACLs: caught up %v, exit %d after SIGTERM, %d records committed (want all %d inputs, exit 0)\n%s",
						run.caughtUp, run.exit, committed, records, tailLines(run.output, 30))
				}
				fmt.Printf("ACL %-32s exit=%d caught_up=%v committed=%d\n", c.name, run.exit, run.caughtUp, committed)
				return
			}
			msg := run.firstError()
			clear := regexp.MustCompile(`(?i)authoriz`).MatchString(msg) && strings.Contains(msg, missing.resource)
			fmt.Printf("ACL %-32s exit=%d committed=%d clear_error=%v error=%s\n", c.name, run.exit, committed, clear, msg)
			if run.exit == 0 || run.caughtUp {
				t.Errorf("without %s the sidecar exited %d (caught up %v), want a non-zero exit", missing.name, run.exit, run.caughtUp)
			}
			if committed != 0 {
				t.Errorf("without %s, %d records were committed to %s/%s, want none", missing.name, committed, p.out, p.quarantine)
			}
			// A clear error says authorization and names the resource.
			if !clear {
				t.Errorf("without %s the error does not name the missing permission on %q: %s", missing.name, missing.resource, msg)
			}
		})
	}
}

// writeInputs writes n keyed records spread over the fork topics, their
// timestamps a minute in the past, so that every phase can seal by
// idleness once they are read.
func writeInputs(t *testing.T, ctx context.Context, addr string, topics []string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	base := time.Now().Add(-time.Minute).Truncate(phaseLen)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topics[i%len(topics)], Key: []byte("k" + strconv.Itoa(i%97)),
			Value: []byte("v" + strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * 10 * time.Second / time.Duration(n))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("write the inputs: %v", err)
	}
}

// sidecarRun is what one run of the sidecar did.
type sidecarRun struct {
	exit     int
	caughtUp bool // the group committed the end of every input
	output   string
}

// firstError is the first error-level log line (or the last line).
func (r sidecarRun) firstError() string {
	for _, l := range strings.Split(r.output, "\n") {
		if strings.Contains(l, `"level":"ERROR"`) || strings.HasPrefix(l, "sidecar:") || strings.Contains(l, "error:") {
			return l
		}
	}
	return tailLines(r.output, 1)
}

// runSidecar runs the built sidecar on the host as the test principal over
// SASL_SSL until its group has committed the end of every input (then
// SIGTERM) or it exits by itself, for at most 60 s.
func (b *secureBroker) runSidecar(t *testing.T, ctx context.Context, p pipeline) sidecarRun {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := l.Addr().String()
	l.Close()
	cmd := exec.CommandContext(ctx, suite.bin)
	cmd.Env = append(hostEnv(),
		"PHASEGATE_BROKERS="+b.secure, "PHASEGATE_SECURITY_PROTOCOL=SASL_SSL", "PHASEGATE_SASL_MECHANISM=PLAIN",
		"PHASEGATE_SASL_USERNAME="+b.user, "PHASEGATE_SASL_PASSWORD="+b.password, "PHASEGATE_TLS_CA_FILE="+b.caFile,
		"PHASEGATE_INPUT_TOPICS="+strings.Join(p.forks, ","), "PHASEGATE_OUTPUT_TOPIC="+p.out,
		"PHASEGATE_QUARANTINE_TOPIC="+p.quarantine, "PHASEGATE_WATERMARK_TOPIC="+p.watermark,
		"PHASEGATE_GROUP_ID="+p.group, "PHASEGATE_TRANSACTIONAL_ID="+p.txnID,
		"PHASEGATE_IDLE_TIMEOUT=1s", "PHASEGATE_LOG_FORMAT=json", "PHASEGATE_HTTP_ADDR="+httpAddr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	logFile := filepath.Join(suite.work, "acl-"+p.group+".log")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var r sidecarRun
	deadline := time.After(60 * time.Second)
loop:
	for {
		select {
		case <-exited:
			break loop
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			break loop
		case <-time.After(500 * time.Millisecond):
			if b.caughtUp(ctx, p) {
				r.caughtUp = true
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(30 * time.Second):
					_ = cmd.Process.Kill()
					<-exited
				}
				break loop
			}
		}
	}
	r.exit = cmd.ProcessState.ExitCode()
	r.output = out.String()
	_ = os.WriteFile(logFile, out.Bytes(), 0o644)
	return r
}

// caughtUp reports whether p's group committed the end of every fork.
func (b *secureBroker) caughtUp(ctx context.Context, p pipeline) bool {
	ends, err := b.adm.ListEndOffsets(ctx, p.forks...)
	if err != nil || ends.Error() != nil {
		return false
	}
	offs, err := b.adm.FetchOffsets(ctx, p.group)
	if err != nil || offs.Error() != nil {
		return false
	}
	ok := true
	ends.Each(func(e kadm.ListedOffset) {
		o, found := offs.Lookup(e.Topic, e.Partition)
		ok = ok && found && o.At >= e.Offset
	})
	return ok
}

// committedRecords counts the data records of topic visible to
// read_committed.
func (b *secureBroker) committedRecords(t *testing.T, ctx context.Context, topic string) int {
	t.Helper()
	parts, err := readTopic(ctx, []string{b.admin}, topic, true)
	if err != nil {
		t.Fatalf("read %s: %v", topic, err)
	}
	n := 0
	for _, recs := range parts {
		for _, r := range recs {
			if !isMarker(r) {
				n++
			}
		}
	}
	return n
}
