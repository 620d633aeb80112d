package align

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasegate/phasegate/markers"
)

// Property test: random input logs (in-order, out-of-order and late
// records, retries with the same phasegate.id, phase headers, malformed
// ones, input markers), read in random interleavings with pauses applied as
// the gates would, lag reports, clock steps, Steps whose transactions
// commit or fail, and crashes that rebuild the session from the committed
// offsets. After a final drain every property is checked on what the
// committed transactions wrote. Each run is fixed by its seed:
// `go test -run 'TestExactlyOnce/seed=N$' ./align` replays it.

const (
	exactlyOnceSeeds = 300
	exactlyOnceOps   = 400
)

func TestExactlyOnce(t *testing.T) {
	var streamed, fellBack atomic.Int64 // Batches over every seed
	t.Cleanup(func() {
		// The seeds must reach the streaming paths, or the properties say
		// nothing of them.
		if !t.Failed() && (streamed.Load() == 0 || fellBack.Load() == 0) {
			t.Errorf("the seeds wrote %d StreamBatches and %d AbortBatches; want both above 0", streamed.Load(), fellBack.Load())
		}
		t.Logf("%d StreamBatches, %d AbortBatches over %d seeds", streamed.Load(), fellBack.Load(), exactlyOnceSeeds)
	})
	for seed := range uint64(exactlyOnceSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			c := newChaos(t, seed)
			c.run(exactlyOnceOps)
			streamed.Add(int64(c.kinds[StreamBatch]))
			fellBack.Add(int64(c.kinds[AbortBatch]))
		})
	}
}

// chaos is one random run over a harness.
type chaos struct {
	*harness
	rng                        *rand.Rand
	clocks                     map[TP]int64 // each producer's event time, ms after base
	ids                        map[TP]int   // identities issued per partition
	paused                     map[TP]bool
	lastCommit                 map[TP]int64
	commits, failures, crashes int
	kinds                      [3]int // Batches by BatchKind
}

func newChaos(t *testing.T, seed uint64) *chaos {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	topics := map[string]int32{}
	for i := range 1 + rng.IntN(3) {
		topics[string(rune('a'+i))] = int32(1 + rng.IntN(3))
	}
	idle := []time.Duration{300 * time.Millisecond, time.Second}[rng.IntN(2)]
	out := int32(1 + rng.IntN(3))
	var maxP int32
	for _, n := range topics {
		maxP = max(maxP, n)
	}
	opts := func(c *Config) {
		c.Watermarks.IdleTimeout = idle
		c.Watermarks.MaxOutOfOrderness = time.Duration(rng.IntN(3)*50) * time.Millisecond
		c.Routing = Routing(rng.IntN(2))
		if c.Routing == RouteKey && maxP >= 2 && rng.IntN(2) == 0 {
			// Several tasks in the session, every one writing every output
			// partition: one lane each there (MARKERS.md 3.3).
			keyTasks(topics, out, int32(2+rng.IntN(int(maxP)-1)))(c)
		}
		if rng.IntN(2) == 0 {
			c.Watermarks.MaxBufferBytes = 16 << 10
		}
		if rng.IntN(2) == 0 {
			c.Dedupe.MaxSealedPhases, c.Dedupe.MaxIdentities = 2, 40
		}
		if rng.IntN(2) == 0 {
			// Batches of one to a few phases: sealed phases wait for the
			// next Batch, across crashes and failed commits.
			c.BatchBytes = int64(1 + rng.IntN(4000))
		}
		if rng.IntN(2) == 0 {
			// The oldest open phase streams; short limits fall back often,
			// and a failed StreamBatch or AbortBatch rewinds like a commit.
			c.StreamFor = []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, 5 * time.Second}[rng.IntN(3)]
		}
	}
	h := newHarness(t, topics, out, opts)
	c := &chaos{harness: h, rng: rng, clocks: map[TP]int64{}, ids: map[TP]int{}, paused: map[TP]bool{}, lastCommit: map[TP]int64{}}
	return c
}

func (c *chaos) run(ops int) {
	c.t.Helper()
	tps := sortedTPs(c.next)
	for range ops {
		k := tps[c.rng.IntN(len(tps))]
		switch n := c.rng.IntN(100); {
		case n < 40:
			c.append(k)
		case n < 60:
			if !c.paused[k] {
				c.readSome(k)
			}
		case n < 70:
			c.caughtUp()
		case n < 80:
			c.clk.add(time.Duration(1+c.rng.IntN(300)) * time.Millisecond)
		case n < 97:
			c.stepOnce(0.85)
		default:
			c.crash()
		}
	}
	c.drain()
	c.check()
}

// append writes one random record to k's log.
func (c *chaos) append(k TP) {
	c.clocks[k] += int64(c.rng.IntN(60))
	r := in{topic: k.Topic, part: k.Partition, ms: c.clocks[k], size: c.rng.IntN(400)}
	switch n := c.rng.IntN(100); {
	case n < 10: // out of order by up to 200 ms, sometimes late
		r.ms = max(0, r.ms-int64(c.rng.IntN(200)))
	case n < 13: // far behind: late once its phase sealed
		r.ms = max(0, r.ms-1000)
	case n < 25: // a retry of an earlier record of this partition
		if log := c.log[k]; len(log) > 0 {
			prev := log[c.rng.IntN(len(log))]
			if prev.marker == nil && prev.id != "" {
				r = prev
			}
		}
	case n < 30:
		r.phase = fmt.Sprint(phaseAt(r.ms) + uint64(c.rng.IntN(2)))
	case n < 32:
		r.phase = "x" + fmt.Sprint(n) // malformed
	case n < 37: // an input marker for the phase before this producer's clock
		mk := &markers.Marker{Phase: phaseAt(r.ms) - 1, Partition: k.Partition}
		if c.rng.IntN(2) == 0 {
			mk.Count, mk.HasCount = int64(c.rng.IntN(3)), true
		}
		r = in{topic: k.Topic, part: k.Partition, marker: mk}
	}
	if c.cfg.Routing == RouteKey && r.marker == nil && r.key == "" && c.rng.IntN(4) > 0 {
		r.key = fmt.Sprintf("k%d", c.rng.IntN(8)) // a retry above keeps its key
	}
	if r.id == "" && r.marker == nil && c.rng.IntN(2) == 0 {
		c.ids[k]++
		r.id = fmt.Sprintf("%s-%d", k, c.ids[k])
	}
	c.log[k] = append(c.log[k], r)
}

// readSome reads up to 5 records of k, as a claim would.
func (c *chaos) readSome(k TP) {
	for range 1 + c.rng.IntN(5) {
		if c.next[k] >= int64(len(c.log[k])) {
			return
		}
		c.s.Handle(ptr(c.record(c.log[k][c.next[k]], c.next[k])))
		c.next[k]++
	}
}

// stepOnce runs Step; its Batch commits with probability ok, else the
// transaction fails and the session is rebuilt (a rewind).
func (c *chaos) stepOnce(ok float64) {
	st := c.s.Step()
	for _, a := range st.Actions {
		c.paused[a.TP] = a.Pause
	}
	if st.Batch == nil {
		return
	}
	c.kinds[st.Batch.Kind]++
	if c.rng.Float64() >= ok {
		c.failures++
		c.crash()
		return
	}
	for _, o := range st.Batch.Offsets {
		if o.Offset < c.lastCommit[o.TP] {
			c.t.Fatalf("%s: committed offset went back from %d to %d", o.TP, c.lastCommit[o.TP], o.Offset)
		}
		c.lastCommit[o.TP] = o.Offset
	}
	c.commits++
	c.commit(st.Batch)
}

// crash drops the session; the next one starts from the committed offsets.
func (c *chaos) crash() {
	c.crashes++
	c.restart()
	clear(c.paused)
}

// drain reads everything and lets every partition go idle until nothing is
// buffered and nothing queued.
func (c *chaos) drain() {
	for round := 0; ; round++ {
		if round > 50 {
			c.t.Fatalf("not drained after 50 rounds: %d bytes buffered, %d quarantined queued, global %d",
				c.s.BufferedBytes(), len(c.s.quar), c.s.Global())
		}
		c.readAll()
		c.caughtUp()
		c.clk.add(c.cfg.Watermarks.IdleTimeout + gapSettle)
		c.stepOnce(1)
		c.stepOnce(1)
		if c.s.BufferedBytes() == 0 && len(c.s.quar) == 0 && c.s.inflight == nil && len(c.s.sealed) == 0 {
			return
		}
	}
}

// identity is a data record's dedupe key: its phasegate.id (or its
// position) and its phase.
func (c *chaos) identity(k TP, off int64) (string, bool) {
	r := c.log[k][off]
	rec := c.record(r, off)
	if rec.MetaErr != nil || rec.Meta.Marker {
		return "", false
	}
	ph := rec.Meta.Phase
	if !rec.Meta.HasPhase {
		ph = phaseAt(r.ms)
	}
	id := label(k, off)
	if r.id != "" {
		id = r.id
	}
	return fmt.Sprintf("%s#%d", id, ph), true
}

// check: MARKERS.md 3.2 on every output partition (markers.Reader), and
// every input record published or quarantined exactly once, or a proven
// duplicate of one that was (docs/DESIGN.md, invariant 2).
func (c *chaos) check() {
	c.t.Helper()
	phases := c.phases() // fails the test on any reader violation
	fate := map[string]int{}
	for _, labels := range phases {
		for _, l := range labels {
			fate[l]++
		}
	}
	for _, q := range c.quar {
		fate[q[strings.IndexByte(q, ' ')+1:]]++
	}
	seen := map[string]bool{} // identities of records that reached an output
	for _, k := range sortedTPs(c.next) {
		for off := range int64(len(c.log[k])) {
			l := label(k, off)
			if fate[l] > 1 {
				c.t.Fatalf("%s written %d times", l, fate[l])
			}
			id, data := c.identity(k, off)
			if fate[l] == 1 {
				if data {
					seen[id] = true
				}
				continue
			}
			if !data {
				continue // an input marker, honoured or a repeat
			}
			if !seen[id] {
				c.t.Fatalf("%s (%s) neither written nor a duplicate of a record that was (commits %d, failures %d, crashes %d)",
					l, id, c.commits, c.failures, c.crashes)
			}
		}
	}
	// Published records sit in their own phase.
	for ph, labels := range phases {
		for _, l := range labels {
			var k TP
			var off int64
			i := strings.LastIndexByte(l, '@')
			fmt.Sscanf(l[i+1:], "%d", &off)
			j := strings.LastIndexByte(l[:i], '/')
			k.Topic = l[:j]
			fmt.Sscanf(l[j+1:i], "%d", &k.Partition)
			id, _ := c.identity(k, off)
			if !strings.HasSuffix(id, fmt.Sprintf("#%d", ph+basePh)) {
				c.t.Fatalf("%s published in phase +%d, its identity is %s", l, ph, id)
			}
		}
	}
}
