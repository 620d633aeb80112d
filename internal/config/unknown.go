package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// knownVariables lists every variable Config reads, with the prefix.
func knownVariables() []string {
	var names []string
	eachVariable(func(name string, _ reflect.StructField) { names = append(names, Prefix+name) })
	return names
}

// unknownVariables finds PHASEGATE_* variables that phasegate does not
// read, most often misspellings that would otherwise be silently ignored.
// It returns one warning per variable, or, under strict, one configError
// naming them all.
func unknownVariables(environ map[string]string, strict bool) ([]string, error) {
	known := knownVariables()
	var unknown []string
	for k := range environ {
		if strings.HasPrefix(k, Prefix) && !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil, nil
	}
	slices.Sort(unknown)
	var msgs []string
	for _, k := range unknown {
		msg := k + " is not a phasegate variable"
		if near := nearest(k, known); near != "" {
			msg += " (did you mean " + near + "?)"
		}
		msgs = append(msgs, msg)
	}
	if strict {
		return nil, &Error{fmt.Sprintf("%s; %sSTRICT_CONFIG=true refuses unknown variables (see sidecar --help for the known ones)",
			strings.Join(msgs, "; "), Prefix)}
	}
	for i := range msgs {
		msgs[i] += ": it is ignored (" + Prefix + "STRICT_CONFIG=true makes this an error)"
	}
	return msgs, nil
}

// nearest is the known name closest to name by edit distance, when close
// enough to be a misspelling of it: at most a third of the length after
// the prefix.
func nearest(name string, known []string) string {
	best, bestDist := "", len(strings.TrimPrefix(name, Prefix))/3+1
	for _, k := range known {
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is Levenshtein's distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
