//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// P1's layout, issue 15's at a smaller record count: two forks of 256
// partitions each (512 input partitions), output and quarantine of 256,
// keys over 1,000 values (forks split them, so some partitions get no
// key and stay empty).
const (
	wideForkParts = 256
	wideOutParts  = 256
	wideKeys      = 1000
	wideSpan      = 20 * time.Second // event time the backlog covers
	// wideFactor times records() makes the backlog: with 100,000 records
	// the sidecar had read everything before the first lag measurement,
	// so no partition was ever seen holding the watermark with lag.
	wideFactor = 3
	// wideBufferBytes bounds the buffer below the backlog (about 45 MB of
	// records), so that partitions are paused while the holders are read,
	// as in issue 15's run: under the default 256 MiB everything fits, and
	// a sidecar that reads the backlog in 3 s (streaming, issue 12) left
	// no sample with a holder behind.
	wideBufferBytes = 8 << 20
)

// P1: 3 x records() records (300,000 by default; 100-byte values,
// 100 ms phases as in the rest of the suite, over 20 s of event time) are
// written (an hour in the past) before the sidecar
// starts, so it starts with a backlog on 512 partitions, as a new user's
// first run would. The scenario measures, from outside the process:
//
//   - first commit: from the sidecar's exec to the first /phases that
//     lists a committed phase (polled every 50 ms; /phases is rebuilt at
//     most every 200 ms, so the figure is late by up to 250 ms);
//   - starvation: every 100 ms it reads /phases?partitions=all; a partition
//     that holds the global watermark, is not paused and has records left
//     (its position, the next offset the session expects, is below the end
//     offset the backlog left it: nothing is written after) is "hungry";
//     its starvation is how long its position stayed the same while it was
//     hungry in consecutive samples. The longest over the run is printed.
//     The resolution is 100-300 ms. (Until 2026-12-06 "records left" was
//     the sidecar's lag, measured every second, so a holder that had just
//     caught up counted as hungry until the next measurement.)
//
// Then the usual check (internal/verify and the rest) and one line of
// counts.
func TestP1ManyPartitions(t *testing.T) {
	sc := newShapedScenario(t, needBroker(t), "P1", shape{
		forks:    []fork{{"orders", wideForkParts, 0.5}, {"payments", wideForkParts, 0.5}},
		outParts: wideOutParts,
	})
	wide := sc.topo
	// A new topic of 256 partitions takes a moment to have a leader for
	// each: a record produced before that is refused.
	sc.poll(time.Minute, "leaders for every partition of the new topics", func() bool {
		ends, err := sc.adm.ListEndOffsets(sc.ctx, wide.orders, wide.payments, wide.out)
		if err != nil {
			return false
		}
		n := 0
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			n++
			ok = ok && o.Err == nil
		})
		return ok && n == 2*wideForkParts+wideOutParts
	})
	sc.env["PHASEGATE_LOG_LEVEL"] = "info" // debug writes a line per partition transition
	sc.env["PHASEGATE_MAX_BUFFER_BYTES"] = strconv.Itoa(wideBufferBytes)

	p := widePlan(wide, 15)
	pr, err := produce(sc.ctx, sc.b.addrs, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc.prod = pr
	sc.plan = p
	if err := pr.wait(sc.ctx); err != nil {
		t.Fatalf("producing the backlog: %v", err)
	}
	listed, err := sc.adm.ListEndOffsets(sc.ctx, wide.orders, wide.payments)
	if err != nil {
		t.Fatalf("end offsets of the backlog: %v", err)
	}
	ends := map[string]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Topic+"/"+strconv.Itoa(int(o.Partition))] = o.Offset })
	var env []string
	for k, v := range sc.env {
		env = append(env, k+"="+v)
	}
	sc.sup = newSupervisor(t, sc.dir, env)
	in := sc.sup.start()

	w := watchStarvation(sc.ctx, in, ends)
	var first time.Duration
	sc.poll(2*time.Minute, "the first committed phase", func() bool {
		st, err := in.phases(sc.ctx)
		if err == nil && st.LastSealed != nil {
			first = time.Since(in.started)
			return true
		}
		return false
	})
	sc.finish()
	starved, who, samples, hungry := w.stop()
	r := sc.check()
	fmt.Printf("P1 partitions=%d in=%d out=%d phases=%d first_commit=%s longest_holder_starvation=%s (%s; %d samples of /phases, %d with a hungry holder)\n",
		2*wideForkParts, len(r.inputs), r.acc.Out, len(r.out.Phases), first.Round(10*time.Millisecond),
		starved.Round(10*time.Millisecond), who, samples, hungry)
	if hungry == 0 {
		t.Errorf("no sample of /phases (of %d) showed a watermark-holding partition with lag: the backlog was too small for the starvation figure to mean anything", samples)
	}
}

// widePlan writes records() records over wideSpan of event time, an hour
// in the past; key k (of wideKeys) goes to orders when k is even, else to
// payments, on the partition Kafka's Java producer would pick. Every
// record is produced at once (planned offset 0): a backlog, not a live
// stream.
func widePlan(topo *topology, seed uint64) *plan {
	p := &plan{
		base: time.Now().Add(-time.Hour).Truncate(phaseLen),
		rng:  rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		part: kgo.StickyKeyPartitioner(nil).ForTopic(""),
	}
	n := wideFactor * records()
	for i := range n {
		k := p.rng.IntN(wideKeys)
		topic := topo.orders
		if k%2 == 1 {
			topic = topo.payments
		}
		key := "k-" + strconv.Itoa(k)
		off := time.Duration(int64(wideSpan) * int64(i) / int64(n))
		r := p.record(topic, p.partitionOf(key, wideForkParts), off, key, expectData)
		p.add(r, 0)
	}
	return p
}

// wideRow is the part of a /phases partition row the watch needs.
type wideRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Paused    bool   `json:"paused"`
	Position  int64  `json:"position"`
	Holds     bool   `json:"holds_watermark"`
}

// starvationWatch samples /phases?partitions=all (every partition's row)
// in the background; ends are the partitions' end offsets
// ("topic/partition").
type starvationWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex // mu guards the fields below
	longest time.Duration
	who     string
	from    time.Duration // when the longest starvation began, since the instance started
	samples int
	hungry  int // samples with at least one hungry partition
}

func watchStarvation(ctx context.Context, in *instance, ends map[string]int64) *starvationWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &starvationWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		type seen struct {
			pos   int64
			since time.Time // when pos was first seen while hungry
		}
		hungry := map[string]seen{}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rows, err := partitionRows(ctx, in)
			if err != nil {
				continue // not up yet, or shutting down
			}
			now := time.Now()
			w.mu.Lock()
			w.samples++
			anyHungry := false
			for _, r := range rows {
				k := r.Topic + "/" + strconv.Itoa(int(r.Partition))
				if !r.Holds || r.Paused || r.Position >= ends[k] {
					delete(hungry, k)
					continue
				}
				anyHungry = true
				s, ok := hungry[k]
				if !ok || s.pos != r.Position {
					hungry[k] = seen{pos: r.Position, since: now}
					continue
				}
				if d := now.Sub(s.since); d > w.longest {
					w.longest, w.who, w.from = d, k, s.since.Sub(in.started)
				}
			}
			if anyHungry {
				w.hungry++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// stop ends the watch and returns the longest starvation seen, whose it
// was, how many samples were taken and in how many a partition was hungry.
func (w *starvationWatch) stop() (time.Duration, string, int, int) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	who := w.who
	if who == "" {
		who = "none"
	} else {
		who += fmt.Sprintf(" from %s", w.from.Round(10*time.Millisecond))
	}
	return w.longest, who, w.samples, w.hungry
}

// partitionRows reads every partition's row of /phases (a status that
// summarises answers the full list with ?partitions=all; one that does
// not ignores the parameter).
func partitionRows(ctx context.Context, in *instance) ([]wideRow, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+in.http+"/phases?partitions=all", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/phases: %s", resp.Status)
	}
	var st struct {
		Partitions []wideRow `json:"partitions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return st.Partitions, nil
}
