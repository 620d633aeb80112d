package tasks

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Property tests of Assign: random sequences of rebalances over 0-12 tasks
// in which members join, leave, restart (with a new member ID, or with the
// same one under static membership, holding nothing) or miss a rebalance
// and report a stale assignment. After every rebalance: (a) every task is
// assigned exactly once and every member has an entry; (b) shares are
// floor(n/M) or ceil(n/M), with exactly n mod M of the larger; (c) members
// keep as many of their valid claims as any balanced assignment allows,
// and a member claiming no more than the smaller share keeps all of them;
// (d) the result does not depend on the order of members. A failure names
// the seed; `go test -run 'TestAssignProperties/seed=N$'` replays it.

const (
	assignSeeds = 300
	assignSteps = 40
)

type assignFn func(n int, members []Member) map[string][]ID

// assignViolation is one broken property.
type assignViolation struct {
	prop string
	step int
	msg  string
	log  []string
}

func (v *assignViolation) Error() string {
	return fmt.Sprintf("property (%s) at step %d: %s\nlast events: %v", v.prop, v.step, v.msg, v.log)
}

func checkAssign(seed uint64, assign assignFn) (*assignViolation, map[string]int) {
	rng := rand.New(rand.NewPCG(seed, 0x7a5c))
	n := rng.IntN(13)
	type state struct {
		prev []ID
		gen  int32
	}
	members := map[string]*state{}
	next, gen := 0, int32(0)
	seen := map[string]int{}
	var log []string
	join := func() string {
		id := fmt.Sprintf("m%02d", next)
		next++
		members[id] = &state{gen: -1}
		return id
	}
	for range 1 + rng.IntN(4) {
		join()
	}
	for step := 1; step <= assignSteps; step++ {
		ids := slices.Sorted(maps.Keys(members))
		pick := func() string { return ids[rng.IntN(len(ids))] }
		missed := ""
		switch ev := rng.IntN(10); {
		case ev < 2 || len(ids) == 0:
			log = append(log, "join "+join())
			seen["join"]++
		case ev < 4 && len(ids) > 1:
			id := pick()
			delete(members, id)
			log = append(log, "leave "+id)
			seen["leave"]++
		case ev < 5:
			id := pick()
			delete(members, id)
			log = append(log, "restart "+id+" as "+join())
			seen["restart"]++
		case ev < 6:
			id := pick()
			members[id] = &state{gen: -1}
			log = append(log, "static restart "+id)
			seen["static restart"]++
		case ev < 8: // a member misses this rebalance while a newcomer takes some of its tasks
			missed = pick()
			log = append(log, "stale "+missed+", join "+join())
		default:
			log = append(log, "rebalance")
		}
		if len(log) > 8 {
			log = log[len(log)-8:]
		}
		gen++
		ms := make([]Member, 0, len(members))
		for _, id := range slices.Sorted(maps.Keys(members)) {
			ms = append(ms, Member{ID: id, Previous: members[id].prev, Generation: members[id].gen})
		}
		got := assign(n, ms)
		if v := assignProperties(n, ms, got, assign, seen); v != "" {
			return &assignViolation{prop: v[:1], step: step, msg: v[2:], log: log}, seen
		}
		for id, ts := range got {
			if id != missed {
				members[id].prev, members[id].gen = ts, gen
			} else if len(members[id].prev) > 0 && !slices.Equal(ts, members[id].prev) {
				seen["stale claim"]++
			}
		}
	}
	return nil, seen
}

// assignProperties returns "p message" for the first broken property, or "".
func assignProperties(n int, ms []Member, got map[string][]ID, assign assignFn, seen map[string]int) string {
	// (a)
	owner := map[ID]string{}
	for _, m := range ms {
		ts, ok := got[m.ID]
		if !ok {
			return "a member " + m.ID + " has no entry"
		}
		for _, t := range ts {
			if t < 0 || int(t) >= n {
				return fmt.Sprintf("a task %d does not exist", t)
			}
			if prev, dup := owner[t]; dup {
				return fmt.Sprintf("a task %d given to %s and %s", t, prev, m.ID)
			}
			owner[t] = m.ID
		}
	}
	if len(owner) != n || len(got) != len(ms) {
		return fmt.Sprintf("a %d of %d tasks assigned, %d entries for %d members", len(owner), n, len(got), len(ms))
	}
	if len(ms) == 0 {
		return ""
	}
	// (b)
	base, extra := n/len(ms), n%len(ms)
	larger := 0
	for id, ts := range got {
		switch len(ts) {
		case base:
		case base + 1:
			larger++
		default:
			return fmt.Sprintf("b %s got %d tasks, shares are %d or %d", id, len(ts), base, base+1)
		}
	}
	if larger != extra {
		return fmt.Sprintf("b %d members got %d tasks, want %d", larger, base+1, extra)
	}
	// (c) valid claims, restated: the newest generation, then the smallest ID.
	winner := map[ID]Member{}
	for _, m := range ms {
		for _, t := range m.Previous {
			if int(t) >= n || t < 0 {
				continue
			}
			w, ok := winner[t]
			if !ok || m.Generation > w.Generation || m.Generation == w.Generation && m.ID < w.ID {
				winner[t] = m
			}
		}
	}
	valid := map[string]int{}
	kept := 0
	for t, w := range winner {
		valid[w.ID]++
		if owner[t] == w.ID {
			kept++
		}
		if len(slices.Compact(slices.Clone(w.Previous))) > 0 {
			seen["claims"]++
		}
	}
	keptMax, above := 0, 0
	for _, m := range ms {
		keptMax += min(valid[m.ID], base)
		if valid[m.ID] > base {
			above++
		}
		if valid[m.ID] <= base {
			for t, w := range winner {
				if w.ID == m.ID && owner[t] != m.ID {
					return fmt.Sprintf("c %s claimed %d <= %d tasks but lost task %d", m.ID, valid[m.ID], base, t)
				}
			}
		}
	}
	keptMax += min(extra, above)
	if kept != keptMax {
		return fmt.Sprintf("c members kept %d claimed tasks, a balanced assignment keeps %d", kept, keptMax)
	}
	if kept < len(winner) {
		seen["moves"]++
	}
	// (d)
	rev := slices.Clone(ms)
	slices.Reverse(rev)
	if again := assign(n, rev); !reflect.DeepEqual(again, got) {
		return fmt.Sprintf("d reversed members give %v, not %v", again, got)
	}
	return ""
}

func TestAssignProperties(t *testing.T) {
	seen, ran := map[string]int{}, 0
	for seed := uint64(1); seed <= assignSeeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ran++
			v, s := checkAssign(seed, Assign)
			if v != nil {
				t.Fatal(v)
			}
			for k, c := range s {
				seen[k] += c
			}
		})
	}
	if ran < assignSeeds || t.Failed() {
		return
	}
	for _, k := range []string{"join", "leave", "restart", "static restart", "stale claim", "claims", "moves"} {
		if seen[k] == 0 {
			t.Errorf("no run exercised %q (saw %v)", k, seen)
		}
	}
	t.Logf("exercised: %v", seen)
}

// TestAssignPropertiesCatchFaults runs the checker against broken
// assignments: each must be reported as the property it breaks.
func TestAssignPropertiesCatchFaults(t *testing.T) {
	tests := []struct {
		name   string
		assign assignFn
		prop   string
	}{
		{"forgets claims", func(n int, ms []Member) map[string][]ID {
			fresh := make([]Member, len(ms))
			for i, m := range ms {
				fresh[i] = Member{ID: m.ID, Generation: -1}
			}
			return Assign(n, fresh)
		}, "c"},
		{"gives everything to one member", func(n int, ms []Member) map[string][]ID {
			out := Assign(n, ms)
			for id := range out {
				out[id] = nil
			}
			for t := range n {
				out[ms[0].ID] = append(out[ms[0].ID], ID(t))
			}
			return out
		}, "b"},
		{"gives a task twice", func(n int, ms []Member) map[string][]ID {
			out := Assign(n, ms)
			if n > 0 && len(ms) > 1 {
				out[ms[len(ms)-1].ID] = append(out[ms[len(ms)-1].ID], 0)
			}
			return out
		}, "a"},
		{"stale claims win", func(n int, ms []Member) map[string][]ID {
			flipped := slices.Clone(ms)
			for i := range flipped {
				flipped[i].Generation = -flipped[i].Generation
			}
			return Assign(n, flipped)
		}, "c"},
		{"depends on member order", func(n int, ms []Member) map[string][]ID {
			out := Assign(n, ms)
			if len(ms) > 1 && ms[0].ID > ms[1].ID {
				out[ms[0].ID], out[ms[1].ID] = out[ms[1].ID], out[ms[0].ID]
			}
			return out
		}, "d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := uint64(1); seed <= assignSeeds; seed++ {
				v, _ := checkAssign(seed, tt.assign)
				if v == nil {
					continue
				}
				if v.prop != tt.prop {
					t.Fatalf("reported as (%s), want (%s): %v", v.prop, tt.prop, v)
				}
				t.Logf("caught by seed %d at step %d: %s", seed, v.step, v.msg)
				return
			}
			t.Fatalf("no seed in 1..%d caught the fault", assignSeeds)
		})
	}
}
