//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// addInstance starts one more supervised sidecar in the scenario's group,
// with a transactional ID (hence static member name) of its own and its
// logs in a directory of its own.
func (sc *scenario) addInstance(name string) *supervisor {
	sc.t.Helper()
	id := sc.txnID + "-" + name
	var env []string
	for k, v := range sc.env {
		if k == "PHASEGATE_TRANSACTIONAL_ID" {
			v = id
		}
		env = append(env, k+"="+v)
	}
	dir := filepath.Join(sc.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		sc.t.Fatal(err)
	}
	s := newSupervisor(sc.t, dir, env)
	sc.more = append(sc.more, s)
	sc.txnIDs = append(sc.txnIDs, id)
	s.start()
	return s
}

// instances are every instance of every supervisor of the scenario.
func (sc *scenario) instances() []*instance {
	var out []*instance
	for _, s := range sc.supervisors() {
		out = append(out, s.instances()...)
	}
	return out
}

// fleetShape is M1's: forks of 7, 3 and 1 partitions, an orders partition
// left empty, a key with 90 % of the orders, 7 output partitions (7 tasks,
// so that a fourth instance has work).
var fleetShape = shape{
	forks:    []fork{{"orders", 7, 0.6}, {"payments", 3, 0.3}, {"refunds", 1, 0.1}},
	outParts: 7, hot: 0.9, emptyPart: true,
}

// M1: three sidecars share one group; one is SIGKILLed twice (restarted
// at once: the time from its new process's start to its first committed
// phase is measured and must stay under 3 s), one is stopped with SIGTERM
// and restarted, a fourth joins mid-run, and one is lost for good (SIGKILL,
// never restarted: its tasks move after the session timeout). Retries and
// input markers in the input. Then the usual check over the whole output
// (every record once, every phase complete on every output partition, no
// open transaction of any of the four transactional IDs, read_committed vs
// read_uncommitted) and the check that partition routing stayed version 1.
func TestM1ThreeInstances(t *testing.T) {
	sc := newShapedScenario(t, needBroker(t), "M1", fleetShape)
	d := &decorator{last: map[topicPart]uint64{}, boundaries: map[topicPart]int{}}
	sc.start(newPlan(sc.topo, 21, d.inputMarkers), nil)
	b, c := sc.addInstance("b"), sc.addInstance("c")
	sc.waitShared(3)
	var resumed []string
	for _, at := range []float64{0.15, 0.3} {
		sc.waitProgress(at)
		took := sc.killAndResume(b)
		resumed = append(resumed, took.Round(10*time.Millisecond).String())
		if took > 3*time.Second {
			t.Errorf("the restarted instance committed its first phase %s after its start, want under 3 s", took)
		}
	}
	sc.waitProgress(0.45)
	term := c.current()
	if err := term.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !term.wait(40*time.Second) || term.state.ExitCode() != 0 {
		t.Errorf("SIGTERM: %s, want exit 0", term.describe())
	}
	sc.waitProgress(0.6)
	sc.addInstance("d")
	sc.waitShared(4)
	sc.waitProgress(0.75)
	if err := sc.sup.lose(); err != nil {
		t.Fatal(err)
	}
	sc.finish()
	r := sc.check()
	checkVersion1(t, r.outRecs)
	fmt.Printf("M1 restart: first committed phase %s after the restarted process started (SIGKILL twice, restart delay %s)\n",
		strings.Join(resumed, " and "), restartDelay)
}

// M3: one instance, then two: the output of partition routing stays
// wire format version 1, byte for byte, read by today's markers.Reader.
func TestM3OneThenTwo(t *testing.T) {
	sc := newScenario(t, "M3")
	sc.start(newPlan(sc.topo, 23, nil), nil)
	sc.waitProgress(0.4)
	sc.addInstance("b")
	sc.waitShared(2)
	sc.finish()
	r := sc.check()
	checkVersion1(t, r.outRecs)
}

// M2: key routing with two instances over PHASEGATE_TASKS=3 (the largest
// input, orders, has 3 partitions) tasks, every one writing every
// output partition: each partition has 3 writers, each writing its own
// lane (MARKERS.md 3.3), whichever instance owns the task. One instance
// is SIGKILLed once mid-run and restarted by its supervisor: its tasks'
// lanes fall silent and resume, readers see nothing torn. Then the usual
// check (through markers.Reader's lane rules) and the check that the
// output is version 2 with writers = 3.
func TestM2KeyRouting(t *testing.T) {
	sc := newScenario(t, "M2")
	sc.env["PHASEGATE_ROUTING"] = "key"
	sc.env["PHASEGATE_TASKS"] = fmt.Sprint(ordersParts)
	sc.start(newPlan(sc.topo, 22, nil), nil)
	b := sc.addInstance("b")
	sc.waitShared(2)
	sc.waitProgress(0.4)
	took := sc.killAndResume(b)
	sc.finish()
	r := sc.check()
	checkWriters(t, r.outRecs, ordersParts)
	t.Logf("the restarted instance committed its first phase %s after its start", took.Round(10*time.Millisecond))
}

// checkWriters fails unless every output marker is version 2 with
// writers = w and a task below w, every data record carries a
// phasegate.task below w, and every partition has markers of all w
// writers: key routing with w tasks (MARKERS.md 3.3).
func checkWriters(t *testing.T, parts [][]*kgo.Record, w int32) {
	t.Helper()
	bad := 0
	for p, recs := range parts {
		seen := map[int32]bool{}
		for _, r := range recs {
			if header(r, markers.HeaderMarker) != "1" {
				task, err := strconv.ParseInt(header(r, markers.HeaderTask), 10, 32)
				if err != nil || task < 0 || task >= int64(w) {
					if bad++; bad <= 5 {
						t.Errorf("partition %d offset %d: data record with %s %q, want a task below %d", p, r.Offset, markers.HeaderTask, header(r, markers.HeaderTask), w)
					}
				}
				continue
			}
			m, err := markers.DecodeOutputMarker(r.Value)
			if err != nil || m.Writers != w || m.Task < 0 || m.Task >= w || !strings.HasPrefix(string(r.Value), `{"v":2,`) {
				if bad++; bad <= 5 {
					t.Errorf("partition %d offset %d: not a version 2 marker of %d writers (%v): %s", p, r.Offset, w, err, r.Value)
				}
				continue
			}
			seen[m.Task] = true
		}
		if len(recs) > 0 && len(seen) != int(w) {
			t.Errorf("partition %d has markers of %d writers, want %d", p, len(seen), w)
		}
	}
	if bad > 0 {
		t.Errorf("%d output records are not version 2 of %d writers", bad, w)
	}
}

// waitShared waits until n running instances each own at least one task
// (their /phases).
func (sc *scenario) waitShared(n int) {
	sc.t.Helper()
	sc.poll(time.Minute, fmt.Sprintf("%d instances to own tasks", n), func() bool {
		working := 0
		for _, s := range sc.supervisors() {
			in := s.current()
			if in == nil {
				continue
			}
			st, err := in.phases(sc.ctx)
			if err == nil && st.owned() > 0 {
				working++
			}
		}
		return working >= n
	})
}

// killAndResume SIGKILLs s's instance and returns the time from the
// restarted process's start to its first committed phase.
func (sc *scenario) killAndResume(s *supervisor) time.Duration {
	sc.t.Helper()
	in := s.current()
	if in == nil {
		sc.t.Fatal("no instance to kill")
	}
	if err := in.signal(syscall.SIGKILL); err != nil {
		sc.t.Fatal(err)
	}
	var next *instance
	sc.poll(time.Minute, "the supervisor to restart the killed instance", func() bool {
		next = s.current()
		return next != nil && next != in
	})
	var at time.Time
	sc.poll(time.Minute, "the restarted instance's first committed phase", func() bool {
		ctx, cancel := context.WithTimeout(sc.ctx, time.Second)
		defer cancel()
		st, err := next.phases(ctx)
		if err == nil && st.LastSealed != nil {
			at = time.Now()
			return true
		}
		return false
	})
	return at.Sub(next.started)
}

// checkVersion1 fails on an output marker that is not version 1 or a data
// record with a phasegate.task header: partition routing has one writer per
// output partition (MARKERS.md 3.3), whatever the number of instances.
func checkVersion1(t *testing.T, parts [][]*kgo.Record) {
	t.Helper()
	bad := 0
	for p, recs := range parts {
		for _, r := range recs {
			if header(r, markers.HeaderMarker) != "1" {
				if header(r, markers.HeaderTask) != "" {
					bad++
				}
				continue
			}
			m, err := markers.DecodeOutputMarker(r.Value)
			if err != nil || m.Writers != 0 || !strings.HasPrefix(string(r.Value), `{"v":1,`) {
				if bad++; bad <= 5 {
					t.Errorf("partition %d offset %d: not a version 1 marker (%v): %s", p, r.Offset, err, r.Value)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d output records are not version 1", bad)
	}
}

// inputMarkers adds a valid input marker at every third phase change of a
// partition, retried (twice in a row) at every seventh: markers the
// sidecars honour or drop, never quarantine.
func (d *decorator) inputMarkers(p *plan, r *kgo.Record, off time.Duration) {
	k := topicPart{r.Topic, r.Partition}
	ph := phaseOf(r.Timestamp)
	if last, ok := d.last[k]; ok && ph > last {
		d.boundaries[k]++
		if n := d.boundaries[k]; n%3 == 0 {
			p.add(d.marker(p, r.Topic, r.Partition, last, r.Timestamp, "", expectMarker), off)
			if n%7 == 0 {
				p.add(d.marker(p, r.Topic, r.Partition, last, r.Timestamp, "", expectMarker), off)
			}
		}
	}
	d.last[k] = ph
}
