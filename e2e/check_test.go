//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/internal/verify"
	"github.com/phasegate/phasegate/markers"
)

// result is what a scenario's check found.
type result struct {
	inputs  []input
	out     *verify.Output
	acc     *verify.Accounting
	outRecs [][]*kgo.Record // read_committed
	quar    []*kgo.Record   // read_committed
	reasons map[string]markers.Reason
	aborted int
}

// maxShown bounds the violations printed per check.
const maxShown = 25

// check reads everything back with independent clients and runs every check
// of the package doc once. The sidecar must be stopped.
func (sc *scenario) check() *result {
	sc.t.Helper()
	ctx, cancel := context.WithTimeout(sc.ctx, 3*time.Minute)
	defer cancel()
	brokers := sc.b.addrs
	read := func(topic string, committed bool) [][]*kgo.Record {
		parts, err := readAll(ctx, brokers, topic, committed)
		if err != nil {
			sc.t.Fatalf("read %s: %v", topic, err)
		}
		return parts
	}
	r := &result{reasons: map[string]markers.Reason{}}
	var inParts [][]*kgo.Record
	for _, topic := range sc.topo.inputs() {
		inParts = append(inParts, read(topic, false)...)
	}
	r.inputs = toInputs(inParts)
	if len(r.inputs) != len(sc.plan.records) {
		sc.t.Errorf("the fork topics hold %d records, the plan produced %d", len(r.inputs), len(sc.plan.records))
	}
	r.outRecs = read(sc.topo.out, true)
	quarParts := read(sc.topo.quarantine, true)
	r.quar = flatten(quarParts)

	// The one verifier call: MARKERS.md 3.2 and the accounting.
	r.out = verify.CheckOutput(toMarkers(r.outRecs))
	r.acc = verify.Account(verifyInputs(r.inputs), r.out, flatten(toMarkers(quarParts)))
	if err := r.out.Err(); err != nil {
		sc.t.Errorf("output breaks MARKERS.md 3.2:\n%s", shown(err))
	}
	if err := r.acc.Err(); err != nil {
		sc.t.Errorf("input accounting:\n%s", shown(err))
	}

	// Nothing of an aborted transaction is visible.
	for _, topic := range []string{sc.topo.out, sc.topo.quarantine} {
		committed := r.outRecs
		if topic == sc.topo.quarantine {
			committed = quarParts
		}
		n, err := compareIsolation(committed, read(topic, false))
		if err != nil {
			sc.t.Errorf("%s: read_committed vs read_uncommitted:\n%s", topic, shown(err))
		}
		r.aborted += n
	}

	sc.checkVerifyCommand(ctx, r)
	sc.checkJava(ctx, r)
	sc.checkTransactions(ctx)
	sc.checkRaces()
	for _, q := range r.quar {
		r.reasons[header(q, markers.HeaderSource)] = markers.Reason(header(q, markers.HeaderReason))
	}
	sc.checkExpectations(r)
	sc.res = r
	return r
}

// checkJava reads the output with Kafka's ConsoleConsumer and compares.
// Without Java the check is skipped outside CI and fails in CI.
func (sc *scenario) checkJava(ctx context.Context, r *result) {
	if _, err := exec.LookPath("java"); err != nil && os.Getenv("JAVA_HOME") == "" {
		if os.Getenv("CI") == "true" {
			sc.t.Errorf("no java for Kafka's ConsoleConsumer (CI=true: required)")
		} else {
			sc.t.Logf("no java: the ConsoleConsumer check is skipped")
		}
		return
	}
	jr, err := consoleConsumer(ctx, sc.b.addrs, sc.topo.out)
	if err == nil && len(jr.positions) == 0 && len(flatten(r.outRecs)) > 0 {
		// Its --timeout-ms counts from its first poll: on a loaded
		// machine (R2: three readers and a broker on 2 cores) it gave up
		// before its first fetch came back. Once more, with more time.
		sc.t.Logf("the ConsoleConsumer read nothing in 8 s; once more with 30 s")
		jr, err = consoleConsumer(ctx, sc.b.addrs, sc.topo.out, "--timeout-ms", "30000")
	}
	if err != nil {
		sc.t.Errorf("%v", err)
		return
	}
	if err := compareJava(jr, r.outRecs); err != nil {
		sc.t.Errorf("Kafka's ConsoleConsumer and franz-go disagree:\n%s", shown(err))
	}
	sc.t.Logf("ConsoleConsumer (read_committed) read %d records, %d markers: same as franz-go", len(jr.positions), jr.markers)
}

// checkRaces fails when a sidecar built with PHASEGATE_E2E_RACE=1 reported
// a data race (an instance that was killed never gets to exit with 66).
func (sc *scenario) checkRaces() {
	for _, in := range sc.instances() {
		b, err := os.ReadFile(in.log)
		if err != nil {
			sc.t.Errorf("read %s: %v", in.log, err)
			continue
		}
		if i := strings.Index(string(b), "WARNING: DATA RACE"); i >= 0 {
			sc.t.Errorf("instance %d reported a data race:\n%s", in.n, tail(string(b[i:min(len(b), i+4000)]), 60))
		}
	}
}

// checkTransactions fails when a transaction of one of the scenario's
// transactional IDs is still open.
func (sc *scenario) checkTransactions(ctx context.Context) {
	d, err := sc.adm.DescribeTransactions(ctx, sc.txnIDs...)
	if err != nil {
		sc.t.Errorf("describe transactions %v: %v", sc.txnIDs, err)
		return
	}
	for _, id := range sc.txnIDs {
		tx, ok := d[id]
		switch {
		case !ok || tx.Err != nil:
			sc.t.Errorf("describe transaction %s: %v", id, tx.Err)
		case tx.State == "Ongoing":
			sc.t.Errorf("transaction %s left open: state %s since %s, partitions %v", id, tx.State,
				time.UnixMilli(tx.StartTimestamp).Format(time.RFC3339Nano), tx.Topics)
		default:
			sc.t.Logf("transaction %s: %s (producer %d epoch %d)", id, tx.State, tx.ProducerID, tx.ProducerEpoch)
		}
	}
	open, err := sc.adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		sc.t.Errorf("list open transactions: %v", err)
		return
	}
	for _, id := range open.TransactionalIDs() {
		if slices.Contains(sc.txnIDs, id) {
			sc.t.Errorf("ListTransactions: %s is Ongoing", id)
		}
	}
}

// checkExpectations compares each input record's fate with what its value
// says the scenario expects.
func (sc *scenario) checkExpectations(r *result) {
	// A retry whose twin (same phasegate.id, same phase) was quarantined
	// may be dropped as a proven duplicate instead (MARKERS.md 5); the
	// verifier has already checked that such a twin exists.
	type idPhase struct {
		id    string
		phase uint64
	}
	twin := map[idPhase]markers.Reason{}
	for _, in := range r.inputs {
		if reason, ok := r.reasons[in.Source]; ok && !in.Marker {
			twin[idPhase{in.ID, in.Phase}] = reason
		}
	}
	var errs []error
	for _, in := range r.inputs {
		got, quarantined := r.reasons[in.Source]
		_, published := r.out.Published[in.Source]
		if !quarantined && !published && !in.Marker {
			if reason, ok := twin[idPhase{in.ID, in.Phase}]; ok {
				got = reason // dropped as the duplicate of a quarantined record
				quarantined = in.expect != expectData
			}
		}
		switch exp := in.expect; exp {
		case expectMaybe:
		case expectData:
			if quarantined && !(got == markers.ReasonLate && sc.lateOK != nil && sc.lateOK(in)) {
				errs = append(errs, fmt.Errorf("%s (phase %d) is quarantined as %s; it should be published", in.Source, in.Phase, got))
			}
		case expectMarker:
			if quarantined || published {
				errs = append(errs, fmt.Errorf("input marker %s is in the output or the quarantine (%q)", in.Source, got))
			}
		default:
			if !quarantined || got != markers.Reason(exp) {
				errs = append(errs, fmt.Errorf("%s (phase %d) should be quarantined as %s; quarantined=%v reason=%q published=%v",
					in.Source, in.Phase, exp, quarantined, got, published))
			}
		}
	}
	if len(r.quar) != r.acc.Quarantined {
		errs = append(errs, fmt.Errorf("the quarantine holds %d records, %d of them input records", len(r.quar), r.acc.Quarantined))
	}
	if len(errs) > 0 {
		sc.t.Errorf("%d input records did not meet their expectation:\n%s", len(errs), shown(errors.Join(errs...)))
	}
}

// header returns a header's value as a string.
func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// shown is err's first maxShown lines and how many more there were.
func shown(err error) string {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) <= maxShown {
		return err.Error()
	}
	return strings.Join(lines[:maxShown], "\n") + fmt.Sprintf("\n... and %d more", len(lines)-maxShown)
}

// sealedBy counts the output's phases by how they were sealed.
func sealedBy(out *verify.Output) string {
	n := map[markers.SealedBy]int{}
	for _, p := range out.Phases {
		n[p.SealedBy]++
	}
	var parts []string
	for k, v := range n {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
