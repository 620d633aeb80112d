//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// F6: the payments branch goes silent while orders go on; once the
// sidecar has sealed the phases of the silence without it (its partitions
// idle), payments comes back with records of those phases: every one of
// them is quarantined as late, and nothing of orders is.
func TestF6SilentBranchComesBackLate(t *testing.T) {
	sc := newScenario(t, "F6")
	silentFrom := span * 3 / 10
	const silentFor = 3 * time.Second // 30 phases
	p := newPlan(sc.topo, 6, func(p *plan, r *kgo.Record, off time.Duration) {
		switch {
		case r.Topic != sc.topo.payments || off < silentFrom:
		case off < silentFrom+silentFor:
			r.Value = value(p.lastSeq, expectation(markers.ReasonLate))
		default: // behind when payments comes back; late or not depends on timing
			r.Value = value(p.lastSeq, expectMaybe)
		}
	})
	from, until := p.base.Add(silentFrom), p.base.Add(silentFrom+silentFor)
	var released atomic.Bool
	sc.start(p, &divert{
		hold:    func(r *kgo.Record) bool { return r.Topic == sc.topo.payments && !r.Timestamp.Before(from) },
		release: released.Load,
	})
	silentAt := time.Now()
	sc.poll(2*time.Minute, "the sidecar to seal the phases of the silence", func() bool {
		in := sc.sup.current()
		if in == nil {
			return false
		}
		ctx, cancel := context.WithTimeout(sc.ctx, time.Second)
		defer cancel()
		st, err := in.phases(ctx)
		return err == nil && st.LastSealed != nil && *st.LastSealed >= phaseOf(until)
	})
	released.Store(true)
	t.Logf("payments silent for about %s of wall time; phases %d..%d sealed without it, then its backlog was produced",
		time.Since(silentAt).Round(100*time.Millisecond), phaseOf(from), phaseOf(until)-1)
	sc.finish()
	r := sc.check()

	backlog := 0
	for _, in := range r.inputs {
		if in.expect == expectation(markers.ReasonLate) {
			backlog++
		}
		if r.reasons[in.Source] == markers.ReasonLate && (in.rec.Topic != sc.topo.payments || in.rec.Timestamp.Before(from)) {
			t.Errorf("%s quarantined as late, but only payments records from the silence on can be", in.Source)
		}
	}
	if late := r.acc.Reasons[markers.ReasonLate]; backlog == 0 || late < backlog {
		t.Errorf("quarantined %d records as late; the backlog alone holds %d", late, backlog)
	}
	idle := 0
	for ph := phaseOf(from); ph < phaseOf(until); ph++ {
		if o := r.out.Phases[ph]; o != nil && o.SealedBy == markers.SealedByIdle {
			idle++
		}
	}
	if idle == 0 {
		t.Errorf("no phase of the silence (%d..%d) was sealed_by idle", phaseOf(from), phaseOf(until)-1)
	}
	t.Logf("backlog %d records, all late; %d phases of the silence sealed_by idle", backlog, idle)
}

// F7: malformed phase headers, malformed, stale, repeated and miscounting
// input markers, in strict mode (PHASEGATE_IDLE_TIMEOUT=0) so that no
// quarantine comes from timing: each quarantined record must carry exactly
// the reason its value announces, and nothing else may be quarantined.
func TestF7MalformedAndMarkers(t *testing.T) {
	sc := newScenario(t, "F7")
	sc.env["PHASEGATE_IDLE_TIMEOUT"] = "0"
	d := &decorator{last: map[topicPart]uint64{}, boundaries: map[topicPart]int{}}
	p := newPlan(sc.topo, 7, d.decorate)
	// Strict mode seals the last phases only when every partition says so.
	final := phaseOf(p.base.Add(span)) + 1
	for _, f := range sc.topo.forks {
		for part := range f.parts {
			p.add(d.marker(p, f.topic, part, final, p.base.Add(span), "", expectMarker), span)
		}
	}
	sc.start(p, nil)
	sc.finish()
	r := sc.check()
	want := map[markers.Reason]int{}
	for _, in := range r.inputs {
		switch in.expect {
		case expectData, expectMarker, expectMaybe:
		default:
			want[markers.Reason(in.expect)]++
		}
	}
	for _, reason := range []markers.Reason{markers.ReasonMalformed, markers.ReasonStaleMarker, markers.ReasonCountMismatch} {
		if want[reason] == 0 {
			t.Errorf("the plan holds no record expected as %s: the scenario proves nothing about it", reason)
		}
	}
	t.Logf("expected quarantine %v; got %v", want, r.acc.Reasons)
}

// decorator adds F7's malformed records and input markers to the base
// workload, partition by partition.
type decorator struct {
	n          int
	last       map[topicPart]uint64 // last data phase per input partition
	boundaries map[topicPart]int    // phase changes seen per input partition
}

type topicPart struct {
	topic     string
	partition int32
}

// badPhases are phase header values MARKERS.md section 1 rejects.
var badPhases = []string{"-1", "+5", " 5", "12a", "184467440737095516160", "0x10", ""}

func (d *decorator) decorate(p *plan, r *kgo.Record, off time.Duration) {
	d.n++
	k := topicPart{r.Topic, r.Partition}
	ph := phaseOf(r.Timestamp)
	if last, ok := d.last[k]; ok && ph > last {
		d.boundaries[k]++
		d.markers(p, r, last, d.boundaries[k], off)
	}
	d.last[k] = ph
	switch {
	case d.n%211 == 0:
		bad := badPhases[(d.n/211)%len(badPhases)]
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: markers.HeaderPhase, Value: []byte(bad)})
		r.Value = value(p.lastSeq, expectation(markers.ReasonMalformed))
	case d.n%7 == 0: // a valid header, which takes precedence over the timestamp
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: markers.HeaderPhase, Value: []byte(fmt.Sprint(ph))})
	}
}

// markers writes the input markers of one phase change on one partition:
// the boundary number picks valid, repeated, miscounting, stale or
// malformed markers.
func (d *decorator) markers(p *plan, next *kgo.Record, phase uint64, boundary int, off time.Duration) {
	add := func(r *kgo.Record) { p.add(r, off) }
	topic, part, ts := next.Topic, next.Partition, next.Timestamp
	switch boundary % 10 {
	case 1:
		add(d.marker(p, topic, part, phase, ts, "", expectMarker))
	case 3: // a retried marker is dropped
		add(d.marker(p, topic, part, phase, ts, "", expectMarker))
		add(d.marker(p, topic, part, phase, ts, "", expectMarker))
	case 5: // honoured, and quarantined for its count
		add(d.marker(p, topic, part, phase, ts, `,"count":1000000`, expectation(markers.ReasonCountMismatch)))
	case 7:
		add(d.marker(p, topic, part, phase, ts, "", expectMarker))
		if phase >= 3 {
			add(d.marker(p, topic, part, phase-3, ts, "", expectation(markers.ReasonStaleMarker)))
		}
	case 9:
		malformed := expectation(markers.ReasonMalformed)
		r := d.marker(p, topic, part, phase, ts, "", malformed)
		switch (boundary / 10) % 5 {
		case 0:
			r.Value = fmt.Appendf(nil, "not json e2e_seq=%d expect=%s", p.lastSeq, malformed)
		case 1:
			r.Value = fmt.Appendf(nil, `{"v":1,"partition":%d,"e2e_seq":%d,"expect":"%s"}`, part, p.lastSeq, malformed)
		case 2: // the value's phase differs from the header's
			r.Value = fmt.Appendf(nil, `{"v":1,"phase":%d,"partition":%d,"e2e_seq":%d,"expect":"%s"}`, phase+1, part, p.lastSeq, malformed)
		case 3: // names another partition
			r.Value = fmt.Appendf(nil, `{"v":1,"phase":%d,"partition":%d,"e2e_seq":%d,"expect":"%s"}`, phase, part+100, p.lastSeq, malformed)
		case 4:
			r.Headers[1].Value = []byte("x1")
		}
		add(r)
	}
}

// marker is an input marker written by hand as MARKERS.md section 3.1
// describes it (not with phasegate's encoder), with extra fields readers
// must ignore: e2e_seq and expect.
func (d *decorator) marker(p *plan, topic string, part int32, phase uint64, ts time.Time, extra string, exp expectation) *kgo.Record {
	p.lastSeq++
	return &kgo.Record{
		Topic: topic, Partition: part, Timestamp: ts,
		Headers: []kgo.RecordHeader{
			{Key: markers.HeaderMarker, Value: []byte("1")},
			{Key: markers.HeaderPhase, Value: []byte(fmt.Sprint(phase))},
		},
		Value: fmt.Appendf(nil, `{"v":1,"phase":%d,"partition":%d%s,"e2e_seq":%d,"expect":"%s"}`, phase, part, extra, p.lastSeq, exp),
	}
}
