package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/phasegate/phasegate/proxy"
)

// PhasesQuery is what a GET /phases asks for: the N most lagging rows
// (?top=N, default proxy.DefaultTop) and every partition's row
// (?partitions=all) on top of the summary.
type PhasesQuery struct {
	Top int
	All bool
}

// ParsePhasesQuery reads ?top= and ?partitions=. A bad value is an error
// naming the parameter, the value and what is allowed.
func ParsePhasesQuery(q url.Values) (PhasesQuery, error) {
	pq := PhasesQuery{Top: proxy.DefaultTop}
	switch v := q.Get("partitions"); v {
	case "":
	case "all":
		pq.All = true
	default:
		return pq, fmt.Errorf("partitions=%q: want partitions=all for every partition's row, or leave it out for the summary", v)
	}
	if v := q.Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return pq, fmt.Errorf("top=%q: want a whole number of partitions to list, 0 or more (default %d)", v, proxy.DefaultTop)
		}
		pq.Top = n
	}
	return pq, nil
}

// ServePhases answers a GET /phases from st: the summary, and the full
// list when asked. A bad query is answered 400 with one line. st is read,
// never changed.
func ServePhases(w http.ResponseWriter, r *http.Request, st *proxy.Status) {
	pq, err := ParsePhasesQuery(r.URL.Query())
	if err != nil {
		http.Error(w, "bad /phases query: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(proxy.NewPhases(st, pq.Top, pq.All))
}
