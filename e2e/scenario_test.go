//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/internal/kafkatest"
)

// topology names one scenario's topics and the workload's shape over them;
// names are unique per run, so a shared broker (PHASEGATE_E2E_BROKERS) can
// run the suite again.
type topology struct {
	orders, payments, out, quarantine string
	// forks are the input topics; forks[0] is orders (the hot key's
	// branch), forks[1] payments.
	forks    []fork
	outParts int32
	hot      float64 // share of the orders branch on one key
	// emptyPart, when set, is an orders partition that gets no record.
	emptyPart bool
}

// fork is one input topic of a topology and its share of the records.
type fork struct {
	topic string
	parts int32
	share float64
}

// inputs are the fork topics' names.
func (t *topology) inputs() []string {
	out := make([]string, len(t.forks))
	for i, f := range t.forks {
		out[i] = f.topic
	}
	return out
}

// shape is a topology's layout before it has topic names.
type shape struct {
	forks     []fork // topic: a suffix of the scenario's ID
	outParts  int32
	hot       float64
	emptyPart bool
}

// defaultShape is F1-F8's: two forks of 3 and 2 partitions, 3 outputs.
var defaultShape = shape{
	forks:    []fork{{"orders", ordersParts, ordersShare}, {"payments", paymentsParts, 1 - ordersShare}},
	outParts: outParts, hot: hotShare,
}

// scenario is one fault-injection run: its topics, sidecar settings, the
// supervised sidecar and the producer of its inputs.
type scenario struct {
	t       *testing.T
	name    string
	started time.Time
	b       *broker
	topo    *topology
	group   string
	txnID   string
	env     map[string]string
	dir     string
	sup     *supervisor
	// more are the supervisors of further instances in the same group
	// (addInstance), each with its own transactional ID in txnIDs.
	more   []*supervisor
	txnIDs []string
	cl     *kgo.Client
	adm    *kadm.Client
	prod   *producer
	plan   *plan
	res    *result // set by check
	// lateOK, when set, lets a data record be quarantined as late (F3:
	// records the producer could only deliver after the broker restart).
	lateOK func(in input) bool
	// note, when set, adds counts of the scenario's own to its line (R2:
	// the readers').
	note func() string
	// quiet, when set, leaves out the scenario's line (a round of a test
	// that prints its own).
	quiet bool
	// ctx bounds the whole scenario.
	ctx context.Context
}

// scenarioTimeout bounds one scenario, far above its expected run time.
const scenarioTimeout = 6 * time.Minute

// newScenario creates the topics and the sidecar's settings. The
// settings follow the advice: 100 ms phases over synthetic event
// time, a 1 s idle timeout, a 5 s transaction timeout below a 6 s session
// timeout (the broker's minimum), debug logs in JSON.
func newScenario(t *testing.T, name string) *scenario {
	t.Helper()
	return newScenarioOn(t, needBroker(t), name)
}

// newScenarioOn is newScenario on broker b.
func newScenarioOn(t *testing.T, b *broker, name string) *scenario {
	t.Helper()
	return newShapedScenario(t, b, name, defaultShape)
}

// newShapedScenario is newScenarioOn with the topics of sh.
func newShapedScenario(t *testing.T, b *broker, name string, sh shape) *scenario {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	t.Cleanup(cancel)
	id := fmt.Sprintf("%s-%d", strings.ToLower(name), time.Now().UnixNano()%1_000_000_000)
	topo := &topology{out: id + "-out", outParts: sh.outParts, hot: sh.hot, emptyPart: sh.emptyPart}
	topo.quarantine = topo.out + ".quarantine"
	parts := map[string]int32{topo.out: sh.outParts}
	for _, f := range sh.forks {
		f.topic = id + "-" + f.topic
		topo.forks = append(topo.forks, f)
		parts[f.topic] = f.parts
	}
	topo.orders, topo.payments = topo.forks[0].topic, topo.forks[1].topic
	if err := kafkatest.CreateTopics(b.addrs, parts); err != nil {
		t.Fatalf("create topics: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	dir := filepath.Join(suite.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sc := &scenario{
		t: t, name: name, started: time.Now(), b: b, topo: topo,
		group: id + "-group", txnID: id + "-txn", txnIDs: []string{id + "-txn"}, dir: dir, cl: cl, adm: kadm.NewClient(cl), ctx: ctx,
	}
	t.Cleanup(sc.report) // after the supervisor's cleanup: the line comes last
	sc.env = map[string]string{
		"PHASEGATE_BROKERS":              strings.Join(b.addrs, ","),
		"PHASEGATE_INPUT_TOPICS":         strings.Join(topo.inputs(), ","),
		"PHASEGATE_OUTPUT_TOPIC":         topo.out,
		"PHASEGATE_QUARANTINE_TOPIC":     topo.quarantine,
		"PHASEGATE_GROUP_ID":             sc.group,
		"PHASEGATE_TRANSACTIONAL_ID":     sc.txnID,
		"PHASEGATE_PHASE_LENGTH":         phaseLen.String(),
		"PHASEGATE_MAX_OUT_OF_ORDERNESS": "50ms",
		"PHASEGATE_IDLE_TIMEOUT":         "1s",
		"PHASEGATE_TRANSACTION_TIMEOUT":  "5s",
		"PHASEGATE_SESSION_TIMEOUT":      "6s",
		"PHASEGATE_LOG_LEVEL":            "debug",
		"PHASEGATE_LOG_FORMAT":           "json",
		"PHASEGATE_ALLOW_SPLIT_KEYS":     "true", // orders 3, payments 2 under partition routing: the split is what F1-F7 check
	}
	return sc
}

// start produces the plan in the background and starts the supervised
// sidecar.
func (sc *scenario) start(p *plan, dv *divert) {
	sc.t.Helper()
	sc.plan = p
	var env []string
	for k, v := range sc.env {
		env = append(env, k+"="+v)
	}
	sc.sup = newSupervisor(sc.t, sc.dir, env)
	pr, err := produce(sc.ctx, sc.b.addrs, p, dv)
	if err != nil {
		sc.t.Fatal(err)
	}
	sc.prod = pr
	sc.sup.start()
}

// committed is the sidecar group's committed input offsets, summed, and
// the end offsets of the inputs, summed.
func (sc *scenario) committed() (committed, end int64, err error) {
	ctx, cancel := context.WithTimeout(sc.ctx, 10*time.Second)
	defer cancel()
	offs, err := sc.adm.FetchOffsets(ctx, sc.group)
	if err != nil {
		return 0, 0, err
	}
	ends, err := sc.adm.ListEndOffsets(ctx, sc.topo.inputs()...)
	if err != nil {
		return 0, 0, err
	}
	ends.Each(func(o kadm.ListedOffset) {
		end += o.Offset
		if c, ok := offs.Lookup(o.Topic, o.Partition); ok && c.Err == nil {
			committed += min(c.At, o.Offset)
		}
	})
	return committed, end, nil
}

// progress is the committed share of the planned input.
func (sc *scenario) progress() float64 {
	c, _, err := sc.committed()
	if err != nil {
		return 0
	}
	return float64(c) / float64(len(sc.plan.records))
}

// waitProgress waits until at least share of the planned input is
// committed by the sidecar, and returns the share reached.
func (sc *scenario) waitProgress(share float64) float64 {
	sc.t.Helper()
	var got float64
	sc.poll(3*time.Minute, fmt.Sprintf("%.0f %% of the input committed", share*100), func() bool {
		got = sc.progress()
		return got >= share
	})
	return got
}

// poll is poll that also fails at once when the supervisor gave up on a
// sidecar that keeps exiting: waiting for progress would be pointless.
func (sc *scenario) poll(timeout time.Duration, what string, cond func() bool) {
	sc.t.Helper()
	poll(sc.t, timeout, what, func() bool {
		for _, s := range sc.supervisors() {
			if in := s.givenUp(); in != nil {
				sc.t.Fatalf("while waiting for %s: the sidecar exited %d times in a row; the supervisor gave up. Last: %s\n%s",
					what, maxRestarts+1, in.describe(), in.excerpt(10))
			}
		}
		return cond()
	})
}

// poll checks cond every 50 ms until it holds, and fails the test when
// timeout passes first.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// finish waits for the producer and for the sidecar to commit every input
// offset, stops the sidecar with SIGTERM (it must exit 0) and returns the
// instance that was stopped.
func (sc *scenario) finish() *instance {
	sc.t.Helper()
	if err := sc.prod.wait(sc.ctx); err != nil {
		sc.t.Fatalf("producing the input: %v", err)
	}
	var c, e int64
	sc.poll(3*time.Minute, "the sidecar to commit every input offset", func() bool {
		var err error
		c, e, err = sc.committed()
		return err == nil && c == e && e > 0
	})
	var last *instance
	for _, s := range sc.supervisors() {
		if s.isLost() {
			continue
		}
		in, err := s.stop()
		if err != nil {
			sc.t.Errorf("final shutdown: %v", err)
		} else if code := in.state.ExitCode(); code != 0 {
			sc.t.Errorf("instance %d exited %d after SIGTERM, want 0:\n%s", in.n, code, in.excerpt(20))
		}
		if s == sc.sup {
			last = in
		}
	}
	return last
}

// supervisors are the scenario's supervisors, the first one's first.
func (sc *scenario) supervisors() []*supervisor {
	if sc.sup == nil {
		return nil
	}
	return append([]*supervisor{sc.sup}, sc.more...)
}

// report prints the scenario's one line of counts, also when the scenario
// failed before its check.
func (sc *scenario) report() {
	if sc.quiet {
		return
	}
	verdict := "PASS"
	if sc.t.Failed() {
		verdict = "FAIL"
	}
	if sc.t.Skipped() {
		verdict = "SKIP"
	}
	counts := "(no counts: the scenario stopped before its check)"
	if r := sc.res; r != nil {
		counts = fmt.Sprintf("%s restarts=%d phases=%d (%s) aborted_seen=%d", r.acc, sc.restarts(), len(r.out.Phases), sealedBy(r.out), r.aborted)
	}
	if sc.note != nil {
		counts += " " + sc.note()
	}
	fmt.Printf("%s %s time=%s verdict=%s\n", sc.name, counts, time.Since(sc.started).Round(100*time.Millisecond), verdict)
}

func (sc *scenario) restarts() int {
	n := 0
	for _, s := range sc.supervisors() {
		n += s.restartCount()
	}
	return n
}
