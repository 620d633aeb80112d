package tasks

import (
	"cmp"
	"slices"
)

// Member is one consumer group member as the assignment sees it: its
// member ID and the tasks it reports holding, with the generation of the
// assignment that gave them (a member that holds nothing yet reports
// generation -1).
type Member struct {
	ID         string
	Previous   []ID
	Generation int32
}

// Assign distributes tasks 0..n-1 over members, whole, and returns each
// member's tasks, ascending; every member has an entry, possibly empty.
// It is pure and deterministic: the result depends only on n and on the
// members' IDs and claims, never on the order of members.
//
// Rules, in order:
//  1. Claims: a task reported by several members belongs to the claim of
//     the highest generation (a member that missed a rebalance reports an
//     older one), ties to the smallest member ID; claims of tasks >= n or
//     < 0 are ignored.
//  2. Balance: with M members, every member gets floor(n/M) or
//     ceil(n/M) tasks; the n mod M larger shares go to the members with
//     the most valid claims (ties: smallest ID), which maximises what
//     members keep. With M > n, M-n members get nothing: a task is never
//     split.
//  3. Stickiness: each member keeps its claimed tasks up to its share,
//     lowest IDs first. Tasks of departed members, unclaimed tasks and
//     claims beyond a share go to members below their share, smallest
//     member ID first, lowest task ID first. The number of tasks that
//     change owner is therefore the minimum any balanced assignment allows.
func Assign(n int, members []Member) map[string][]ID {
	out := make(map[string][]ID, len(members))
	if len(members) == 0 {
		return out
	}
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	ms = slices.CompactFunc(ms, func(a, b Member) bool { return a.ID == b.ID })

	// 1. Valid claims: owner[t] is the index in ms of the member keeping
	// claim of task t, or -1.
	owner := make([]int, n)
	gen := make([]int32, n)
	for t := range owner {
		owner[t] = -1
	}
	for i, m := range ms {
		for _, t := range m.Previous {
			if t < 0 || int(t) >= n {
				continue
			}
			if owner[t] < 0 || m.Generation > gen[t] { // ms is sorted: ties keep the smaller ID
				owner[t], gen[t] = i, m.Generation
			}
		}
	}
	claims := make([][]ID, len(ms))
	for t, i := range owner {
		if i >= 0 {
			claims[i] = append(claims[i], ID(t)) // ascending by construction
		}
	}

	// 2. Shares.
	base, extra := n/len(ms), n%len(ms)
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(claims[b]), len(claims[a])) })
	share := make([]int, len(ms))
	for rank, i := range order {
		share[i] = base
		if rank < extra {
			share[i]++
		}
	}

	// 3. Keep, then fill from the pool.
	var pool []ID
	taken := make([]bool, n)
	for i := range ms {
		keep := min(share[i], len(claims[i]))
		out[ms[i].ID] = append(make([]ID, 0, share[i]), claims[i][:keep]...)
		for _, t := range claims[i][:keep] {
			taken[t] = true
		}
	}
	for t := range n {
		if !taken[t] {
			pool = append(pool, ID(t))
		}
	}
	for i, m := range ms {
		need := share[i] - len(out[m.ID])
		out[m.ID] = append(out[m.ID], pool[:need]...)
		pool = pool[need:]
		slices.Sort(out[m.ID])
	}
	return out
}
