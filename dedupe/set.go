package dedupe

import "hash/maphash"

// key is the 128-bit fingerprint of an identity: two maphash values under
// independent random seeds. A fixed-size key keeps Add free of allocations
// and keeps the caller's id bytes out of the cache.
type key struct{ a, b uint64 }

// hasher turns identities into keys. Its seeds are made in New and differ
// per process, so colliding ids cannot be chosen in advance.
type hasher struct{ a, b maphash.Seed }

func newHasher() hasher { return hasher{a: maphash.MakeSeed(), b: maphash.MakeSeed()} }

func (h hasher) key(id []byte) key {
	return key{a: maphash.Bytes(h.a, id), b: maphash.Bytes(h.b, id)}
}

// set holds the keys seen in one phase. peak is the largest size the map
// ever had: Go maps never shrink, so peak stands for the memory it holds.
type set struct {
	m    map[key]struct{}
	peak int
}

// add records k and reports whether it was already there, with one map
// operation instead of a lookup followed by an insert.
func (s *set) add(k key) (dup bool) {
	n := len(s.m)
	s.m[k] = struct{}{}
	if len(s.m) == n {
		return true
	}
	if len(s.m) > s.peak {
		s.peak = len(s.m)
	}
	return false
}

// maxFree bounds the sets kept for reuse. Steady state frees about one set
// per new phase, so a few suffice.
const maxFree = 8

// pool recycles the sets of evicted phases so that a steady stream of phases
// reuses maps instead of growing new ones. A set whose map once held more
// than limit keys is dropped to the garbage collector instead: reusing it
// for a small phase would pin memory the identity bound does not count.
type pool struct {
	free  []*set
	limit int
}

func newPool(cfg Config) pool {
	limit := cfg.MaxIdentities / cfg.MaxSealedPhases
	limit = max(limit, 256)
	return pool{free: make([]*set, 0, maxFree), limit: limit}
}

func (p *pool) get() *set {
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		return s
	}
	return &set{m: make(map[key]struct{})}
}

func (p *pool) put(s *set) {
	if s.peak > p.limit || len(p.free) == cap(p.free) {
		return
	}
	clear(s.m)
	p.free = append(p.free, s)
}
