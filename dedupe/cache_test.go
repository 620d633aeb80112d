package dedupe

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"testing"
)

// step is one call on a Cache in a table test.
type step struct {
	op    string // add, seal
	phase uint64
	id    string
	dup   bool  // add: want dup
	err   error // add: want error
}

func add(phase uint64, id string) step { return step{op: "add", phase: phase, id: id} }
func dup(phase uint64, id string) step { return step{op: "add", phase: phase, id: id, dup: true} }
func addFull(phase uint64, id string) step {
	return step{op: "add", phase: phase, id: id, err: ErrFull}
}
func seal(phase uint64) step { return step{op: "seal", phase: phase} }

func newCache(t *testing.T, cfg Config) *Cache {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return c
}

func run(t *testing.T, c *Cache, steps []step) {
	t.Helper()
	for i, s := range steps {
		switch s.op {
		case "add":
			gotDup, err := c.Add(s.phase, []byte(s.id))
			if gotDup != s.dup || !errors.Is(err, s.err) || (s.err == nil && err != nil) {
				t.Fatalf("step %d: Add(%d, %q) = %v, %v; want %v, %v", i, s.phase, s.id, gotDup, err, s.dup, s.err)
			}
		case "seal":
			c.Seal(s.phase)
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
	}
}

func TestCache(t *testing.T) {
	small := func(phases, ids int) Config { return Config{MaxSealedPhases: phases, MaxIdentities: ids} }
	tests := []struct {
		name  string
		cfg   Config
		steps []step
		want  Stats
		held  []uint64 // phases that must still be held
		gone  []uint64 // phases that must have been evicted
		full  bool
	}{
		{
			name:  "duplicate in open phase",
			cfg:   DefaultConfig(),
			steps: []step{add(1, "a"), dup(1, "a"), add(1, "b"), dup(1, "a"), dup(1, "b"), add(2, "a"), dup(2, "a")},
			want:  Stats{OpenPhases: 2, Identities: 3},
			held:  []uint64{1, 2},
		},
		{
			name:  "ids differing in length or one byte are distinct",
			cfg:   DefaultConfig(),
			steps: []step{add(1, ""), dup(1, ""), add(1, "a"), add(1, "a\x00"), add(1, "b"), add(1, "orders/0/10"), add(1, "orders/0/1"), add(1, "orders/1/0")},
			want:  Stats{OpenPhases: 1, Identities: 7},
		},
		{
			name:  "late retry in sealed phase is a duplicate, a late record is recorded there",
			cfg:   DefaultConfig(),
			steps: []step{add(1, "a"), seal(1), dup(1, "a"), add(1, "b"), dup(1, "b")},
			want:  Stats{SealedPhases: 1, Identities: 2},
			held:  []uint64{1},
		},
		{
			name:  "seal of an unknown phase keeps later adds in the sealed LRU",
			cfg:   DefaultConfig(),
			steps: []step{seal(5), add(5, "a"), dup(5, "a")},
			want:  Stats{SealedPhases: 1, Identities: 1},
			held:  []uint64{5},
		},
		{
			name:  "sealing twice changes nothing",
			cfg:   small(2, 100),
			steps: []step{add(1, "a"), seal(1), add(2, "a"), seal(2), seal(1), seal(3)},
			want:  Stats{SealedPhases: 2, Identities: 1, Evictions: 1, EvictedIdentities: 1},
			held:  []uint64{2, 3},
			gone:  []uint64{1},
		},
		{
			name:  "sealed bound evicts the oldest sealed phase",
			cfg:   small(2, 100),
			steps: []step{add(1, "a"), seal(1), add(2, "a"), seal(2), add(3, "a"), add(3, "b"), seal(3), add(1, "a")},
			want:  Stats{OpenPhases: 1, SealedPhases: 2, Identities: 4, Evictions: 1, EvictedIdentities: 1},
			held:  []uint64{1, 2, 3},
		},
		{
			name: "eviction order is by recency: an add to a sealed phase refreshes it",
			cfg:  small(2, 100),
			steps: []step{
				add(1, "a"), seal(1), add(2, "a"), seal(2),
				add(1, "late"), // 1 is now more recent than 2
				seal(3),        // evicts 2
				dup(1, "a"), add(2, "a"),
			},
			want: Stats{OpenPhases: 1, SealedPhases: 2, Identities: 3, Evictions: 1, EvictedIdentities: 1},
			held: []uint64{1, 2, 3},
		},
		{
			name: "identity bound evicts the oldest sealed phases first, only as many as needed",
			cfg:  small(64, 4),
			steps: []step{
				add(1, "a"), add(1, "b"), seal(1),
				add(2, "a"), seal(2),
				add(3, "a"),
				add(4, "a"), // 5 > 4: evicts 1 (2 ids), not 2
				dup(2, "a"), dup(3, "a"), dup(4, "a"),
			},
			want: Stats{OpenPhases: 2, SealedPhases: 1, Identities: 3, Evictions: 1, EvictedIdentities: 2},
			held: []uint64{2, 3, 4},
			gone: []uint64{1},
		},
		{
			name:  "ErrFull only when only open phases remain, and the id is still recorded",
			cfg:   small(64, 2),
			steps: []step{add(1, "a"), add(1, "b"), addFull(1, "c"), dup(1, "c"), addFull(2, "a"), dup(2, "a")},
			want:  Stats{OpenPhases: 2, Identities: 4},
			held:  []uint64{1, 2},
			full:  true,
		},
		{
			name:  "no ErrFull while a sealed phase can go",
			cfg:   small(64, 2),
			steps: []step{add(1, "a"), add(1, "b"), seal(1), add(2, "a"), add(2, "b")},
			want:  Stats{OpenPhases: 1, Identities: 2, Evictions: 1, EvictedIdentities: 2},
			held:  []uint64{2},
			gone:  []uint64{1},
		},
		{
			name:  "the sealed phase an add writes to is not evicted by that add",
			cfg:   small(64, 2),
			steps: []step{add(1, "a"), seal(1), add(2, "a"), addFull(1, "b"), dup(1, "b")},
			want:  Stats{OpenPhases: 1, SealedPhases: 1, Identities: 3},
			held:  []uint64{1, 2},
			full:  true,
		},
		{
			name:  "seal after ErrFull evicts until the bound holds",
			cfg:   small(64, 2),
			steps: []step{add(1, "a"), add(1, "b"), addFull(1, "c"), addFull(2, "a"), seal(1)},
			want:  Stats{OpenPhases: 1, Identities: 1, Evictions: 1, EvictedIdentities: 3},
			held:  []uint64{2},
			gone:  []uint64{1},
		},
		{
			name: "open phases are never evicted, by either bound",
			cfg:  small(1, 1),
			steps: []step{
				add(1, "a"), addFull(2, "a"), addFull(3, "a"),
				seal(10), seal(11), // sealed bound and identity bound both act on sealed only
				dup(1, "a"), dup(2, "a"), dup(3, "a"),
			},
			want: Stats{OpenPhases: 3, Identities: 3, Evictions: 2},
			held: []uint64{1, 2, 3},
			gone: []uint64{10, 11},
			full: true,
		},
		{
			name:  "an evicted phase is unknown again and re-opens",
			cfg:   small(1, 100),
			steps: []step{add(1, "a"), seal(1), seal(2), add(1, "a")},
			want:  Stats{OpenPhases: 1, SealedPhases: 1, Identities: 1, Evictions: 1, EvictedIdentities: 1},
			held:  []uint64{1, 2},
		},
		{
			name:  "the caller seals a re-opened phase again, as after a late record",
			cfg:   small(1, 100),
			steps: []step{add(1, "a"), seal(1), seal(2), add(1, "a"), seal(1), dup(1, "a")},
			want:  Stats{SealedPhases: 1, Identities: 1, Evictions: 2, EvictedIdentities: 1},
			held:  []uint64{1},
			gone:  []uint64{2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, tt.cfg)
			run(t, c, tt.steps)
			if got := c.Stats(); got != tt.want {
				t.Errorf("Stats() = %+v, want %+v", got, tt.want)
			}
			if got := c.Full(); got != tt.full {
				t.Errorf("Full() = %v, want %v", got, tt.full)
			}
			for _, p := range tt.held {
				if !c.holds(p) {
					t.Errorf("phase %d not held", p)
				}
			}
			for _, p := range tt.gone {
				if c.holds(p) {
					t.Errorf("phase %d still held", p)
				}
			}
		})
	}
}

// TestAddDoesNotRetainID checks that the cache keeps no reference to the
// caller's bytes: the pipeline reuses its buffers.
func TestAddDoesNotRetainID(t *testing.T) {
	c := newCache(t, DefaultConfig())
	buf := []byte("orders/0/17")
	if d, _ := c.Add(1, buf); d {
		t.Fatal("first Add reported a duplicate")
	}
	copy(buf, "payments/3")
	if d, _ := c.Add(1, buf); d {
		t.Error("a different id in the reused buffer was reported as a duplicate")
	}
	if d, _ := c.Add(1, []byte("orders/0/17")); !d {
		t.Error("the original id was not recognised after its buffer was overwritten")
	}
}

// TestRecycledSetsStartEmpty checks that reuse of an evicted phase's set
// does not carry its identities into the next phase.
func TestRecycledSetsStartEmpty(t *testing.T) {
	c := newCache(t, Config{MaxSealedPhases: 1, MaxIdentities: 1 << 10})
	ids := []string{"a", "b", "c"}
	for phase := range uint64(50) {
		for _, id := range ids {
			if d, err := c.Add(phase, []byte(id)); d || err != nil {
				t.Fatalf("phase %d: Add(%q) = %v, %v; want false, nil", phase, id, d, err)
			}
		}
		c.Seal(phase)
	}
	st := c.Stats()
	if st.Identities != len(ids) || st.Evictions != 49 || st.EvictedIdentities != 49*3 {
		t.Errorf("Stats() = %+v", st)
	}
}

// TestPoolDropsLargeSets checks the memory rule of doc.go: the map of a
// phase that grew past the limit is not reused once the phase is sealed.
func TestPoolDropsLargeSets(t *testing.T) {
	cfg := Config{MaxSealedPhases: 1, MaxIdentities: 512} // limit = max(512/1, 256) = 512
	tests := []struct {
		name   string
		ids    int
		reused bool
	}{
		{"at the limit", 512, true},
		{"over the limit", 513, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, cfg)
			for i := range tt.ids {
				_, _ = c.Add(1, []byte{byte(i), byte(i >> 8)})
			}
			c.Seal(1)
			if got := len(c.pool.free) == 1; got != tt.reused {
				t.Errorf("map with %d ids reused = %v, want %v", tt.ids, got, tt.reused)
			}
		})
	}
}

// TestSealedPhaseKeepsItsIdentities checks that sealing compacts a phase
// (its map goes back to the pool) without forgetting anything: identities
// of before the seal and late ones added after it are all recognised, and
// the identity count stays exact through the seal and the eviction.
func TestSealedPhaseKeepsItsIdentities(t *testing.T) {
	c := newCache(t, Config{MaxSealedPhases: 1, MaxIdentities: 1 << 10})
	steps := []struct {
		name  string
		phase uint64
		id    string
		dup   bool
		ids   int
	}{
		{"new in the open phase", 1, "a", false, 1},
		{"another", 1, "b", false, 2},
		{"retry while open", 1, "a", true, 2},
		{"seal", 1, "", false, 2},
		{"retry of an identity of before the seal", 1, "b", true, 2},
		{"a late record", 1, "c", false, 3},
		{"retry of the late record", 1, "c", true, 3},
		{"same identity in the next phase is new", 2, "a", false, 4},
		{"seal of the next phase evicts the first", 2, "", false, 1},
		{"the evicted phase is unknown again", 1, "a", false, 2},
	}
	for _, st := range steps {
		if st.id == "" {
			c.Seal(st.phase)
		} else if dup, err := c.Add(st.phase, []byte(st.id)); dup != st.dup || err != nil {
			t.Fatalf("%s: Add(%d, %q) = %v, %v; want %v, nil", st.name, st.phase, st.id, dup, err, st.dup)
		}
		if got := c.Stats().Identities; got != st.ids {
			t.Fatalf("%s: %d identities, want %d", st.name, got, st.ids)
		}
	}
	if st := c.Stats(); st.Evictions != 1 || st.EvictedIdentities != 3 {
		t.Errorf("Stats() = %+v, want 1 eviction of 3 identities", st)
	}
}

// TestSortedLookup checks the sealed phase's lookup: sortByA orders by a,
// and has finds a key among others sharing its a (a 64-bit collision) and
// refuses one whose a is there with another b.
func TestSortedLookup(t *testing.T) {
	keys := []key{{a: 5, b: 1}, {a: 1 << 60, b: 7}, {a: 5, b: 9}, {a: 0, b: 0}, {a: 300, b: 2}, {a: 5, b: 3}, {a: ^uint64(0), b: 4}}
	sorted := append([]key(nil), keys...)
	sortByA(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i-1].a > sorted[i].a {
			t.Fatalf("not sorted by a: %v", sorted)
		}
	}
	tests := []struct {
		name string
		k    key
		want bool
	}{
		{"the first of three with a=5", key{5, 1}, true},
		{"the last of three with a=5", key{5, 3}, true},
		{"a=5 with another b", key{5, 2}, false},
		{"the smallest", key{0, 0}, true},
		{"the largest", key{^uint64(0), 4}, true},
		{"below all but the smallest", key{1, 0}, false},
		{"above all", key{^uint64(0), 5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := has(sorted, tt.k); got != tt.want {
				t.Errorf("has(%v) = %v, want %v (sorted %v)", tt.k, got, tt.want, sorted)
			}
		})
	}
	t.Run("10,000 hashed keys", func(t *testing.T) {
		h := newHasher()
		keys := make([]key, 10_000)
		for i := range keys {
			keys[i] = h.key([]byte(strconv.Itoa(i)))
		}
		sorted := append([]key(nil), keys...)
		sortByA(sorted)
		if !slices.IsSortedFunc(sorted, func(x, y key) int { return cmp.Compare(x.a, y.a) }) {
			t.Fatal("not sorted by a")
		}
		for _, k := range keys {
			if !has(sorted, k) {
				t.Fatalf("%v lost by the sort", k)
			}
			if has(sorted, key{k.a, k.b + 1}) {
				t.Fatalf("%v found with another b", k)
			}
		}
	})
}
