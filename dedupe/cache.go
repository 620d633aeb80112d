package dedupe

import (
	"fmt"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache remembers which identities were seen in which phase, so that a retry
// of a record (same phasegate.id, same phase) is recognised and dropped.
//
// Not safe for concurrent use: one goroutine (the pipeline) owns it.
type Cache struct {
	cfg  Config
	hash hasher
	pool pool

	// open holds phases not yet sealed; they are never evicted.
	open map[uint64]*set
	// sealed holds recently sealed phases, least recently used evicted first.
	// Its eviction callback keeps ids and the counters exact.
	sealed *simplelru.LRU[uint64, *set]

	ids        int    // identities held over open and sealed phases, exact
	evictions  uint64 // sealed phases evicted to respect a bound
	evictedIDs uint64 // identities those phases held
}

// Stats is a snapshot of a Cache, for /phases and tests.
type Stats struct {
	OpenPhases   int `json:"open_phases"`   // phases added to and not sealed
	SealedPhases int `json:"sealed_phases"` // sealed phases still held for late-retry detection
	Identities   int `json:"identities"`    // identities held over all phases, exact
	// Evictions counts sealed phases dropped to respect MaxSealedPhases or
	// MaxIdentities since New, and EvictedIdentities the identities they
	// held. Both only grow over the Cache's life.
	Evictions         uint64 `json:"evictions"`
	EvictedIdentities uint64 `json:"evicted_identities"`
}

// New returns an empty Cache bounded by cfg, or cfg's validation error.
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dedupe: new cache: %w", err)
	}
	c := &Cache{
		cfg:  cfg,
		hash: newHasher(),
		pool: newPool(cfg),
		open: make(map[uint64]*set),
	}
	sealed, err := simplelru.NewLRU(cfg.MaxSealedPhases, c.evicted)
	if err != nil { // unreachable after Validate; kept so a change there cannot panic here
		return nil, fmt.Errorf("dedupe: new cache: %w", err)
	}
	c.sealed = sealed
	return c, nil
}

// Add records id as seen in phase and reports whether it was seen there
// before: a proven duplicate, to be dropped and counted.
//
// A phase the cache does not hold becomes open. A phase in the sealed LRU is
// checked and recorded there (a late record or a late retry) and becomes its
// most recently used entry. A phase sealed and since evicted is unknown
// again, so Add re-opens it: the caller must Seal it again after a late
// record, or it stays open (never evicted) for the Cache's life.
//
// When the new identity takes the count over MaxIdentities, the least
// recently used sealed phases are evicted until the count fits. If it still
// does not fit (only open phases, and the sealed phase being added to, are
// left) the identity stays recorded, so a retry of it is still proven, and
// Add returns ErrFull: the caller must pause its input ahead of the global
// watermark until Full reports false again. A duplicate never returns ErrFull, since it adds nothing.
//
// id aliases caller memory and is not retained: only its 128-bit hash is
// stored. Add does not allocate once the cache has reached a steady state.
func (c *Cache) Add(phase uint64, id []byte) (dup bool, err error) {
	k := c.hash.key(id)
	s, ok := c.open[phase]
	if !ok {
		if s, ok = c.sealed.Get(phase); !ok {
			s = c.pool.get()
			c.open[phase] = s
		}
	}
	if s.add(k) {
		return true, nil
	}
	c.ids++
	if c.ids > c.cfg.MaxIdentities {
		return false, c.shrink(phase, true)
	}
	return false, nil
}

// Seal moves phase from the open phases to the LRU of recently sealed phases
// (bounded by MaxSealedPhases, evicting the least recently used), where a
// late retry of an already published record is still recognised.
//
// Sealing a phase that holds nothing yet records it as sealed and empty, so a
// later Add goes to the sealed LRU instead of re-opening the phase. Sealing a
// phase already sealed changes nothing. If the identity count is above the
// bound (after ErrFull), Seal evicts sealed phases until it fits, which may
// include phase itself.
func (c *Cache) Seal(phase uint64) {
	if s, ok := c.open[phase]; ok {
		delete(c.open, phase)
		s.seal(&c.pool)
		c.sealed.Add(phase, s)
	} else if !c.sealed.Contains(phase) {
		c.sealed.Add(phase, &set{})
	}
	if c.ids > c.cfg.MaxIdentities {
		_ = c.shrink(0, false) // ErrFull here only means Full() stays true
	}
}

// Full reports whether the identities held exceed MaxIdentities, which only
// open phases can cause. A caller that paused its input on ErrFull resumes
// when Full reports false.
func (c *Cache) Full() bool { return c.ids > c.cfg.MaxIdentities }

// Stats returns counts of phases and identities held, and evictions so far.
func (c *Cache) Stats() Stats {
	return Stats{
		OpenPhases:        len(c.open),
		SealedPhases:      c.sealed.Len(),
		Identities:        c.ids,
		Evictions:         c.evictions,
		EvictedIdentities: c.evictedIDs,
	}
}

// shrink evicts the least recently used sealed phases while the identity
// count exceeds the bound. When pinned, the phase keep (the one Add just
// wrote to) is not evicted: that would forget the identity it just recorded.
func (c *Cache) shrink(keep uint64, pinned bool) error {
	for c.ids > c.cfg.MaxIdentities {
		phase, _, ok := c.sealed.GetOldest()
		if !ok || (pinned && phase == keep) {
			return ErrFull
		}
		c.sealed.RemoveOldest()
	}
	return nil
}

// evicted is the sealed LRU's callback for every removal: capacity eviction in
// Seal and RemoveOldest in shrink. Nothing else removes a sealed phase, so
// every call is an eviction.
func (c *Cache) evicted(_ uint64, s *set) {
	n := s.len()
	c.ids -= n
	c.evictions++
	c.evictedIDs += uint64(n)
	c.pool.put(s.m, s.peak)
}

// holds reports whether phase is held, open or sealed, without touching the
// LRU order. Tests use it to check the reference model.
func (c *Cache) holds(phase uint64) bool {
	_, ok := c.open[phase]
	return ok || c.sealed.Contains(phase)
}
