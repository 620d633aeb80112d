package dedupe

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// op is one call in a generated sequence.
type op struct {
	kind  byte // 'a' add, 's' seal
	phase uint64
	id    string
}

// model is a plain reference for Cache: maps of string sets and a slice for
// the recency order, with the bounds applied step by step as the package
// documentation states them. ever remembers every (phase, id) ever added and
// is never bounded: a duplicate it has not seen is false.
type model struct {
	cfg    Config
	open   map[uint64]map[string]bool
	sealed map[uint64]map[string]bool
	order  []uint64 // sealed phases, least recently used first
	ever   map[uint64]map[string]bool
	ids    int
}

func newModel(cfg Config) *model {
	return &model{
		cfg:    cfg,
		open:   map[uint64]map[string]bool{},
		sealed: map[uint64]map[string]bool{},
		ever:   map[uint64]map[string]bool{},
	}
}

func (m *model) touch(phase uint64) {
	i := slices.Index(m.order, phase)
	m.order = append(slices.Delete(m.order, i, i+1), phase)
}

func (m *model) evictOldest() {
	p := m.order[0]
	m.order = m.order[1:]
	m.ids -= len(m.sealed[p])
	delete(m.sealed, p)
}

func (m *model) add(phase uint64, id string) (dup, full bool) {
	if m.ever[phase] == nil {
		m.ever[phase] = map[string]bool{}
	}
	m.ever[phase][id] = true
	s, ok := m.open[phase]
	if !ok {
		if s, ok = m.sealed[phase]; ok {
			m.touch(phase)
		} else {
			s = map[string]bool{}
			m.open[phase] = s
		}
	}
	if s[id] {
		return true, false
	}
	s[id] = true
	m.ids++
	for m.ids > m.cfg.MaxIdentities {
		if len(m.order) == 0 || m.order[0] == phase {
			return false, true
		}
		m.evictOldest()
	}
	return false, false
}

func (m *model) seal(phase uint64) {
	if s, ok := m.open[phase]; ok {
		delete(m.open, phase)
		m.sealed[phase] = s
		m.order = append(m.order, phase)
	} else if _, ok := m.sealed[phase]; !ok {
		m.sealed[phase] = map[string]bool{}
		m.order = append(m.order, phase)
	}
	if len(m.order) > m.cfg.MaxSealedPhases {
		m.evictOldest()
	}
	for m.ids > m.cfg.MaxIdentities && len(m.order) > 0 {
		m.evictOldest()
	}
}

// check runs ops on a Cache and on the model and fails at the first
// difference.
func check(t *testing.T, cfg Config, ops []op) {
	t.Helper()
	c := newCache(t, cfg)
	m := newModel(cfg)
	touched := map[uint64]bool{}
	for i, o := range ops {
		switch o.kind {
		case 'a':
			touched[o.phase] = true
			seenBefore := m.ever[o.phase][o.id]
			heldBefore := m.open[o.phase][o.id] || m.sealed[o.phase][o.id]
			gotDup, err := c.Add(o.phase, []byte(o.id))
			wantDup, wantFull := m.add(o.phase, o.id)
			if gotDup && !seenBefore {
				t.Fatalf("op %d: Add(%d, %q) is a false duplicate: never added to that phase", i, o.phase, o.id)
			}
			if heldBefore && !gotDup {
				t.Fatalf("op %d: Add(%d, %q) missed a duplicate in a phase held since", i, o.phase, o.id)
			}
			if gotDup != wantDup || errors.Is(err, ErrFull) != wantFull || (err != nil && !errors.Is(err, ErrFull)) {
				t.Fatalf("op %d: Add(%d, %q) = %v, %v; model %v, full %v", i, o.phase, o.id, gotDup, err, wantDup, wantFull)
			}
		case 's':
			touched[o.phase] = true
			c.Seal(o.phase)
			m.seal(o.phase)
		}
		st := c.Stats()
		if st.OpenPhases != len(m.open) || st.SealedPhases != len(m.sealed) || st.Identities != m.ids {
			t.Fatalf("op %d %c(%d): Stats() = %+v; model open %d sealed %d ids %d", i, o.kind, o.phase, st, len(m.open), len(m.sealed), m.ids)
		}
		if st.SealedPhases > cfg.MaxSealedPhases {
			t.Fatalf("op %d: %d sealed phases held, bound %d", i, st.SealedPhases, cfg.MaxSealedPhases)
		}
		if c.Full() != (m.ids > cfg.MaxIdentities) {
			t.Fatalf("op %d: Full() = %v with %d ids, bound %d", i, c.Full(), m.ids, cfg.MaxIdentities)
		}
		for p := range touched {
			_, o := m.open[p]
			_, s := m.sealed[p]
			if c.holds(p) != (o || s) {
				t.Fatalf("op %d: holds(%d) = %v; model open %v sealed %v", i, p, c.holds(p), o, s)
			}
		}
	}
}

// genOps draws a sequence from a window of phases that moves forward, as a
// pipeline's does, with a few late adds and retries.
func genOps(r *rand.Rand, n int) []op {
	ops := make([]op, 0, n)
	base := uint64(0)
	for range n {
		phase := base + r.Uint64N(4)
		if r.IntN(10) == 0 && base > 0 {
			phase = r.Uint64N(base + 1) // late: any older phase
		}
		switch x := r.IntN(100); {
		case x < 80:
			ops = append(ops, op{kind: 'a', phase: phase, id: "t/" + strconv.Itoa(r.IntN(12))})
		default:
			ops = append(ops, op{kind: 's', phase: phase})
			if phase == base {
				base++
			}
		}
	}
	return ops
}

func TestCacheMatchesModel(t *testing.T) {
	configs := []Config{
		{MaxSealedPhases: 1, MaxIdentities: 1},
		{MaxSealedPhases: 2, MaxIdentities: 8},
		{MaxSealedPhases: 4, MaxIdentities: 20},
		{MaxSealedPhases: 8, MaxIdentities: 1000},
	}
	for _, cfg := range configs {
		for seed := range uint64(25) {
			name := "phases=" + strconv.Itoa(cfg.MaxSealedPhases) + "/ids=" + strconv.Itoa(cfg.MaxIdentities) + "/seed=" + strconv.FormatUint(seed, 10)
			t.Run(name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(cfg.MaxIdentities)))
				check(t, cfg, genOps(r, 1500))
			})
		}
	}
}

// FuzzCache decodes bytes into a configuration and a sequence of calls and
// checks them against the model. Run with -fuzz=FuzzCache to explore.
func FuzzCache(f *testing.F) {
	f.Add([]byte{1, 2, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 2})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 3, 0, 0})
	f.Add([]byte{3, 15, 0, 5, 9, 1, 5, 0, 0, 5, 9, 0, 6, 9, 1, 6, 0, 1, 7, 0, 0, 5, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		cfg := Config{MaxSealedPhases: int(data[0]%4) + 1, MaxIdentities: int(data[1]%16) + 1}
		var ops []op
		for b := data[2:]; len(b) >= 3; b = b[3:] {
			o := op{phase: uint64(b[1] % 8), id: strconv.Itoa(int(b[2] % 8))}
			o.kind = 'a'
			if b[0]%16 < 4 {
				o.kind = 's'
			}
			ops = append(ops, o)
		}
		check(t, cfg, ops)
	})
}
