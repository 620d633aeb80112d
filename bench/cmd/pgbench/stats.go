package main

import (
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
