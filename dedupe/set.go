package dedupe

import (
	"cmp"
	"hash/maphash"
	"math/bits"
	"slices"
)

// key is the 128-bit fingerprint of an identity: two maphash values under
// independent random seeds. A fixed-size key keeps Add free of allocations
// and keeps the caller's id bytes out of the cache.
type key struct{ a, b uint64 }

// sortByA sorts keys by a in O(n): a counting pass on the top bits of a
// into about n/4 buckets, then an insertion sort of each bucket. Seal runs
// on the pipeline's loop: with a comparison sort, the Seal of a 1 s
// phase's 262,144 keys took 63 ms, with this one 25 ms (BenchmarkSeal).
// The buckets stay small because a is a seeded hash, uniform and unknown
// to whoever writes the records. Keys with the same a (as likely as a
// 64-bit hash collision) end up next to each other.
func sortByA(keys []key) {
	if len(keys) < 2 {
		return
	}
	shift := 64 - max(bits.Len(uint(len(keys)))-2, 1)
	at := make([]int32, 1<<(64-shift)+1)
	for _, k := range keys {
		at[k.a>>shift+1]++
	}
	for i := 1; i < len(at); i++ {
		at[i] += at[i-1]
	}
	out := make([]key, len(keys))
	for _, k := range keys {
		b := k.a >> shift
		out[at[b]] = k
		at[b]++
	}
	// at[b] is now where bucket b+1 starts.
	start := int32(0)
	for _, end := range at[:len(at)-1] {
		insertionSort(out[start:end])
		start = end
	}
	copy(keys, out)
}

func insertionSort(ks []key) {
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j].a < ks[j-1].a; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
}

// has reports whether k is in sorted (sorted by a).
func has(sorted []key, k key) bool {
	i, _ := slices.BinarySearchFunc(sorted, k.a, func(x key, a uint64) int { return cmp.Compare(x.a, a) })
	for ; i < len(sorted) && sorted[i].a == k.a; i++ {
		if sorted[i].b == k.b {
			return true
		}
	}
	return false
}

// hasher turns identities into keys. Its seeds are made in New and differ
// per process, so colliding ids cannot be chosen in advance.
type hasher struct{ a, b maphash.Seed }

func newHasher() hasher { return hasher{a: maphash.MakeSeed(), b: maphash.MakeSeed()} }

func (h hasher) key(id []byte) key {
	return key{a: maphash.Bytes(h.a, id), b: maphash.Bytes(h.b, id)}
}

// set holds the keys seen in one phase. While the phase is open they are in
// the map m. Sealing moves them into sorted, 16 bytes a key against 53 in
// the map (BenchmarkSeal): a sealed phase is only kept to recognise late
// retries, and the sealed phases hold most of the identities. Keys added
// after the seal (late records, late retries) go into m again, nil until
// one is.
type set struct {
	m      map[key]struct{}
	sorted []key // ascending by a; nil while open
	// peak is the largest size m ever had: Go maps never shrink, so peak
	// stands for the memory it holds.
	peak int
}

// add records k and reports whether it was already there, with one map
// operation instead of a lookup followed by an insert (after a binary
// search of sorted, for a sealed phase).
func (s *set) add(k key) (dup bool) {
	if has(s.sorted, k) {
		return true
	}
	if s.m == nil {
		s.m = make(map[key]struct{})
	}
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

// len is the number of keys held.
func (s *set) len() int { return len(s.sorted) + len(s.m) }

// seal moves the keys of an open set into sorted and gives its map back to
// p, where it serves the next open phase.
func (s *set) seal(p *pool) {
	if len(s.m) == 0 {
		return
	}
	keys := make([]key, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	sortByA(keys)
	s.sorted = keys
	p.put(s.m, s.peak)
	s.m, s.peak = nil, 0
}

// maxFree bounds the maps kept for reuse. Steady state frees about one map
// per new phase, so a few suffice.
const maxFree = 8

// pool recycles the maps of sealed and evicted phases so that a steady
// stream of phases reuses maps instead of growing new ones. A map that once
// held more than limit keys is dropped to the garbage collector instead:
// reusing it for a small phase would pin memory the identity bound does not
// count.
type pool struct {
	free  []map[key]struct{}
	limit int
}

func newPool(cfg Config) pool {
	limit := cfg.MaxIdentities / cfg.MaxSealedPhases
	limit = max(limit, 256)
	return pool{free: make([]map[key]struct{}, 0, maxFree), limit: limit}
}

// get returns a set for an open phase.
func (p *pool) get() *set {
	if n := len(p.free); n > 0 {
		m := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		return &set{m: m}
	}
	return &set{m: make(map[key]struct{})}
}

// put takes back a map whose size peaked at peak.
func (p *pool) put(m map[key]struct{}, peak int) {
	if m == nil || peak > p.limit || len(p.free) == cap(p.free) {
		return
	}
	clear(m)
	p.free = append(p.free, m)
}
