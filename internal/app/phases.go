package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/phasegate/phasegate/proxy"
)

// ParsePhasesQuery reads ?top= (default proxy.DefaultTop), ?partitions=
// (whose rows to send: one of proxy.RowStates), ?offset= and ?limit= (a
// window of those rows, for paging). A bad value is an error naming the
// parameter, the value and what is allowed.
func ParsePhasesQuery(q url.Values) (proxy.Query, error) {
	pq := proxy.Query{Top: proxy.DefaultTop, Rows: q.Get("partitions")}
	if pq.Rows != "" {
		if _, ok := proxy.InState(&proxy.PartitionStatus{}, pq.Rows); !ok {
			return pq, fmt.Errorf("partitions=%q: want one of %s (partitions=all for every partition's row), or leave it out for the summary",
				pq.Rows, proxy.RowStates)
		}
	}
	for _, f := range []struct {
		name string
		to   *int
		min  int
		want string
	}{
		{"top", &pq.Top, 0, fmt.Sprintf("a whole number of partitions to list, 0 or more (default %d)", proxy.DefaultTop)},
		{"offset", &pq.Offset, 0, "how many rows to skip, 0 or more"},
		{"limit", &pq.Limit, 1, "how many rows to send, 1 or more (default: every one)"},
	} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < f.min {
			return pq, fmt.Errorf("%s=%q: want %s", f.name, v, f.want)
		}
		*f.to = n
	}
	if (pq.Offset > 0 || pq.Limit > 0) && pq.Rows == "" {
		return pq, fmt.Errorf("offset and limit page the rows of ?partitions=: add partitions=all (or one of %s)", proxy.RowStates)
	}
	return pq, nil
}

// ServePhases answers a GET /phases from st: the summary, and the rows
// asked for. A bad query is answered 400 with one line. st is read,
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
	_ = enc.Encode(proxy.NewPhases(st, pq))
}
