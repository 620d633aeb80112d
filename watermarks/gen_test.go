package watermarks

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// The property checker's generator: a random configuration and partition
// set, and random operations, each applied to the tracker and the model.

// run is one random run: the tracker, the model and the generator.
type run struct {
	seed     uint64
	rng      *rand.Rand
	clk      *clock
	cfg      Config
	tr       *Tracker
	parts    []*mpart
	buffered map[uint64]*mphase // accepted records of phases not yet returned
	returned map[uint64]bool
	lastG    uint64
	lastMs   int64
	maxPhase uint64
	step     int
	ops      []string
	seen     map[string]int // what the run exercised, so a pass is not vacuous
	topics   int            // 1-3
	mode     int            // records carry 0: timestamps, 1: header phases, 2: either per partition
}

const maxPartitions = 8

func newRun(seed uint64, f fault) *run {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	clk := newClock()
	pick := func(vs ...time.Duration) time.Duration { return vs[rng.IntN(len(vs))] }
	cfg := Config{
		PhaseLength:       pick(time.Second, 500*time.Millisecond),
		MaxOutOfOrderness: pick(0, 200*time.Millisecond, time.Second),
		IdleTimeout:       pick(0, 2*time.Second, 5*time.Second),
		MaxBufferBytes:    500 + rng.Int64N(5000),
		SealTimeoutMin:    time.Second + dur(rng, 4*time.Second),
		SealPolicy:        Policy(rng.IntN(2)),
		Now:               clk.Now,
	}
	cfg.SealTimeoutMax = cfg.SealTimeoutMin + dur(rng, 30*time.Second)
	tr, err := New(cfg, rng.Uint64N(12))
	if err != nil {
		panic(err) // the generator only makes valid configurations
	}
	tr.fault = f
	r := &run{
		seed: seed, rng: rng, clk: clk, cfg: cfg, tr: tr,
		buffered: make(map[uint64]*mphase),
		returned: make(map[uint64]bool),
		lastG:    tr.Global(),
		seen:     make(map[string]int),
	}
	r.topics, r.mode = 1+rng.IntN(3), rng.IntN(3)
	for range 1 + rng.IntN(maxPartitions) {
		r.addPartition()
	}
	r.logf("config %+v, sealedBelow %d, %d partitions, mode %d", cfg, tr.Global(), len(r.parts), r.mode)
	return r
}

// addPartition adds a partition to a random topic, as a rebalance would. Its
// event time starts near the others' so it may be behind or ahead.
func (r *run) addPartition() {
	topic := fmt.Sprintf("t%d", r.rng.IntN(r.topics))
	n := int32(0)
	for _, m := range r.parts {
		if m.topic == topic {
			n++
		}
	}
	cursor := int64(10_000)
	if len(r.parts) > 0 {
		cursor = r.parts[r.rng.IntN(len(r.parts))].cursor
	}
	p := r.tr.Add(topic, n)
	r.logf("Add(%s, %d) = %d", topic, n, p)
	r.parts = append(r.parts, &mpart{
		topic:      topic,
		startLow:   r.tr.Global(),
		startMs:    r.tr.GlobalMs(),
		quietSince: r.clk.Now(),
		reasons:    map[string]bool{},
		timed:      r.mode == 0 || (r.mode == 2 && r.rng.IntN(2) == 0),
		cursor:     cursor + r.rng.Int64N(5_000) - 2_500,
		weight:     []int{0, 1, 1, 4}[r.rng.IntN(4)],
	})
}

// dur is a random duration in [0, d).
func dur(rng *rand.Rand, d time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(d))) }

func (r *run) logf(format string, args ...any) {
	r.ops = append(r.ops, fmt.Sprintf(format, args...))
	if len(r.ops) > 60 {
		r.ops = slices.Delete(r.ops, 0, 30)
	}
}

// after every operation: apply Actions to the model, then check the state.
func (r *run) after() *violation {
	if v := r.applyActions(); v != nil {
		return v
	}
	return r.checkState()
}

func (r *run) randomOp() *violation {
	p := r.rng.IntN(len(r.parts))
	m := r.parts[p]
	switch n := r.rng.IntN(100); {
	case n < 40:
		if q, ok := r.pickActive(); ok {
			return r.record(q, r.genRec(q))
		}
		return r.tick()
	case n < 47:
		return r.marker(p, uint64(max(0, m.cursor/r.tr.phaseMs-r.rng.Int64N(4))))
	case n < 54:
		return r.lag(p, []int64{0, 0, 0, 0, 0, 0, 3, 17, 50, -1}[r.rng.IntN(10)])
	case n < 59:
		reason := []string{"operator", "rebalance"}[r.rng.IntN(2)]
		m.reasons[reason] = true
		r.tr.Pause(P(p), reason)
		r.logf("Pause(%d, %s)", p, reason)
		return r.after()
	case n < 64:
		reason := []string{"operator", "rebalance"}[r.rng.IntN(2)]
		delete(m.reasons, reason)
		r.tr.Resume(P(p), reason)
		r.logf("Resume(%d, %s)", p, reason)
		return r.after()
	case n < 67:
		m.weight = []int{0, 1, 1, 4}[r.rng.IntN(4)]
		r.logf("partition %d now has weight %d", p, m.weight)
		return nil
	case n < 68 && len(r.parts) < maxPartitions:
		r.addPartition()
		r.seen["add"]++
		return r.after()
	case n < 69:
		if got := r.tr.Add(m.topic, r.partNumber(p)); got != P(p) {
			return r.fail("add", "Add(%s) again = %d, want %d", m.topic, got, p)
		}
		return nil
	case n < 84:
		return r.tick()
	}
	return r.advance()
}

// partNumber is p's partition number within its topic.
func (r *run) partNumber(p int) int32 {
	_, n := r.tr.Partition(P(p))
	return n
}

// pickActive picks a partition by weight; a paused one rarely delivers (only
// records already in flight when it was paused).
func (r *run) pickActive() (int, bool) {
	total := 0
	ws := make([]int, len(r.parts))
	for i, m := range r.parts {
		ws[i] = m.weight
		if m.paused && r.rng.IntN(5) != 0 {
			ws[i] = 0
		}
		total += ws[i]
	}
	if total == 0 {
		return 0, false
	}
	k := r.rng.IntN(total)
	for i, w := range ws {
		if k < w {
			return i, true
		}
		k -= w
	}
	panic("unreachable")
}

// genRec makes the next record of p: its event time moves forward, and the
// record's timestamp lags it by up to 1.5 × the out-of-orderness bound.
func (r *run) genRec(p int) Rec {
	m := r.parts[p]
	m.cursor += r.rng.Int64N(700)
	ooo := r.cfg.MaxOutOfOrderness.Milliseconds()
	rec := Rec{EventMs: m.cursor - r.rng.Int64N(ooo+ooo/2+50), Bytes: 1 + r.rng.IntN(200)}
	if m.timed {
		rec.Timed = true
		rec.Phase = uint64(max(rec.EventMs, 0) / r.tr.phaseMs)
	} else {
		rec.Phase = uint64(max(m.cursor/r.tr.phaseMs+r.rng.Int64N(3)-1, 0))
	}
	return rec
}

func (r *run) record(p int, rec Rec) *violation {
	g := r.tr.Global()
	v := r.tr.Record(P(p), rec)
	r.logf("Record(%d, %+v) = %s", p, rec, v)
	if want := map[bool]Verdict{true: Late, false: Accepted}[rec.Phase < g]; v != want {
		return r.fail("a", "record of phase %d with Global %d is %s", rec.Phase, g, v)
	}
	m := r.parts[p]
	m.quietSince = r.clk.Now()
	if rec.Timed && (!m.anyEv || rec.EventMs > m.maxEv) {
		m.maxEv, m.anyEv = rec.EventMs, true
	}
	if !rec.Timed {
		m.maxHeader = max(m.maxHeader, rec.Phase)
	}
	if v == Late {
		r.seen["late"]++
		return r.after()
	}
	ph := r.buffered[rec.Phase]
	if ph == nil {
		ph = &mphase{perPart: map[int]int64{}}
		r.buffered[rec.Phase] = ph
	}
	ph.records++
	ph.bytes += int64(rec.Bytes)
	ph.perPart[p] += int64(rec.Bytes)
	r.maxPhase = max(r.maxPhase, rec.Phase)
	return r.after()
}

func (r *run) marker(p int, phase uint64) *violation {
	m := r.parts[p]
	r.tr.Marker(P(p), phase)
	r.logf("Marker(%d, %d)", p, phase)
	m.quietSince = r.clk.Now()
	if !m.marked || phase > m.marker {
		m.marker, m.marked = phase, true
	}
	return r.after()
}

func (r *run) lag(p int, n int64) *violation {
	r.tr.Lag(P(p), n)
	r.logf("Lag(%d, %d)", p, n)
	m := r.parts[p]
	if !m.lagKnown && n >= 0 {
		m.quietSince = r.clk.Now() // silence counts only while it can be observed
	}
	m.lag, m.lagKnown = n, n >= 0
	return r.after()
}

func (r *run) tick() *violation {
	d := dur(r.rng, 1500*time.Millisecond)
	if r.rng.IntN(5) == 0 {
		d = dur(r.rng, 70*time.Second)
	}
	r.clk.step(d)
	r.logf("clock +%s", d)
	return r.after()
}

func (r *run) advance() *violation {
	b := r.preAdvance()
	seals := r.tr.Advance()
	r.logf("Advance() = %d seals, Global %d, GlobalMs %d", len(seals), r.tr.Global(), r.tr.GlobalMs())
	for _, s := range seals {
		r.seen["seal:"+s.By.String()]++
	}
	for i, m := range r.parts {
		if b.idle[i] && !m.paused && b.low[i] < r.tr.Global() {
			r.seen["idle behind"]++
		}
	}
	if v := r.checkSeals(b, seals); v != nil {
		return v
	}
	return r.after()
}
