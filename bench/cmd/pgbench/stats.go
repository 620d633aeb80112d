package main

import (
	"cmp"
	"math"
	"slices"
)

// percentile is the nearest-rank q-th percentile (0 < q <= 100) of xs, NaN
// for no samples. It sorts a copy.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(q / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// medianIndex is the index of the median of xs (the lower one of the middle
// two for an even count); -1 for none.
func medianIndex(xs []float64) int {
	if len(xs) == 0 {
		return -1
	}
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	return idx[(len(xs)-1)/2]
}
