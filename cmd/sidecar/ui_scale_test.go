//go:build unix

package main

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/internal/statustest"
	"github.com/phasegate/phasegate/proxy"
)

// movingPhases answers /phases from st as the sidecar does, one second
// later on every request, with every consumer lag one record higher (so
// each answer differs and the order of the lists stays), and records each
// request's query. reached is closed at the want-th request.
type movingPhases struct {
	base    *proxy.Status
	want    int
	reached chan struct{}
	mu      sync.Mutex // guards n and qs
	n       int
	qs      []string
}

func (m *movingPhases) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.n++
	n := m.n
	m.qs = append(m.qs, r.URL.RawQuery)
	if n == m.want {
		close(m.reached)
	}
	m.mu.Unlock()
	st := *m.base
	st.Updated = st.Updated.Add(time.Duration(n) * time.Second)
	st.Partitions = slices.Clone(st.Partitions)
	for i := range st.Partitions {
		if st.Partitions[i].Lag > 0 {
			st.Partitions[i].Lag += int64(n)
		}
	}
	app.ServePhases(w, r, &st)
}

func (m *movingPhases) queries() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.qs)
}

// renderStats are what the page records of its own rendering (on <body>).
type renderStats struct {
	renders, rowsCreated int
	first, last, max     string // ms
	parse                string // ms
}

func pageStats(t *testing.T, dom string) renderStats {
	t.Helper()
	es := elements(dom, "body")
	if len(es) != 1 {
		t.Fatalf("%d <body> elements", len(es))
	}
	a := es[0].attrs
	atoi := func(k string) int {
		n, err := strconv.Atoi(a[k])
		if err != nil {
			t.Fatalf("<body %s=%q>: %v", k, a[k], err)
		}
		return n
	}
	return renderStats{renders: atoi("data-renders"), rowsCreated: atoi("data-rows-created"),
		first: a["data-first-render-ms"], last: a["data-last-render-ms"], max: a["data-max-update-ms"],
		parse: a["data-last-parse-ms"]}
}

// answers is how many /phases answers the page renders in each case of
// TestLiveViewAt2048Partitions (one a second, in real time).
const answers = 4

// heldPageServer serves the live view and /phases like the sidecar, but
// holds the page's response open until the page has asked /phases one time
// more than m.want-1 (so it rendered m.want-1 answers), or 30 s. The page's
// script runs as soon as it is parsed; Chromium, run in real time (where
// the page's clocks measure real work, unlike under virtual time), dumps
// the DOM at the load event, which waits for the end of the page.
func heldPageServer(t *testing.T, m *movingPhases) string {
	t.Helper()
	page := app.LiveView()
	mux := http.NewServeMux()
	mux.Handle("GET /phases", m)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		page.ServeHTTP(w, r)
		http.NewResponseController(w).Flush()
		select {
		case <-m.reached:
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
			t.Errorf("the page asked /phases %d times in 30 s, want %d", len(m.queries()), m.want)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// At 2,048 partitions the page shows the summary (the counts /phases
// gives), the 10 partitions holding the watermark back and the 10 most
// lagging, and leaves the full table closed; opened (by a link to #all/…),
// it asks the sidecar for one page of 100 rows of the state asked for. Rows are made once
// and updated in place: over several answers the page makes no more rows
// than it shows. The render times the page measured (in real time) are
// logged, not asserted.
func TestLiveViewAt2048Partitions(t *testing.T) {
	bin := chromium(t)
	st := statustest.Many(2048)
	sum := proxy.Summarize(st, proxy.DefaultTop)

	tests := []struct {
		name      string
		hash      string
		wantAll   []string // keys of the full table's rows, in order; nil: closed
		wantRange string
		wantQuery string // of every request to /phases
		shot      string // screenshot kept as an artifact
	}{
		{name: "summary only", hash: "", wantQuery: "", shot: "live-view-2048.png"},
		{name: "the last page of every partition", hash: "#all/all/21", wantAll: keysOf(st.Partitions[2000:]),
			wantRange: "rows 2,001–2,048 of 2,048 · page 21 of 21", wantQuery: "partitions=all&offset=2000&limit=100", shot: "live-view-2048-all.png"},
		{name: "the first page of the paused", hash: "#all/paused", wantAll: keysOf(filterParts(st.Partitions, func(p proxy.PartitionStatus) bool {
			return p.Paused && !p.Idle
		})[:100]), wantRange: "rows 1–100 of 395 · page 1 of 4", wantQuery: "partitions=paused&offset=0&limit=100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &movingPhases{base: st, want: answers + 1, reached: make(chan struct{})}
			url := heldPageServer(t, m) + tt.hash
			dom := dumpDOM(t, bin, url, 0)

			for id, want := range map[string]string{"c-live": "1,579", "c-paused": "395 buffer 395", "c-idle": "74",
				"c-holding": "11", "c-at": "11"} {
				if got := byID(t, dom, "dd", id).text; got != want {
					t.Errorf("count %s says %q, want %q", id, got, want)
				}
			}
			if got := byID(t, dom, "dd", "part-count").text; got != "2,048 1,579 live · 395 paused · 74 idle" {
				t.Errorf("partitions card says %q", got)
			}
			for list, want := range map[string][]proxy.PartitionStatus{"holders": sum.Holders, "lagging": sum.MostLagging} {
				rows := listRows(t, dom, list)
				if got, w := slices.Sorted(maps.Keys(rows)), slices.Sorted(slices.Values(keysOf(want))); !slices.Equal(got, w) {
					t.Errorf("%s rows %v, want %v", list, got, w)
				}
			}
			if r, ok := listRows(t, dom, "holders")["fork-a/7"]; ok && r.attrs["data-slowest"] != "true" {
				t.Errorf("holder fork-a/7 not marked slowest: %v", r.attrs)
			}
			all := byAttr(elements(dom, "tr"), "data-list", "all")
			var got []string
			for _, r := range all {
				got = append(got, r.attrs["data-key"])
			}
			if !slices.Equal(got, tt.wantAll) {
				t.Errorf("full table rows %d (%v...), want %d", len(got), got[:min(3, len(got))], len(tt.wantAll))
			}
			if tt.wantAll != nil {
				if r := byID(t, dom, "span", "all-range").text; r != tt.wantRange {
					t.Errorf("pager says %q, want %q", r, tt.wantRange)
				}
			}
			asked := m.queries()
			for _, q := range asked {
				if q != tt.wantQuery {
					t.Errorf("page asked /phases?%s, want ?%s", q, tt.wantQuery)
				}
			}

			ps := pageStats(t, dom)
			shown := len(sum.Holders) + len(sum.MostLagging) + len(tt.wantAll)
			if ps.renders < answers {
				t.Fatalf("%d renders (%d requests), want %d", ps.renders, len(asked), answers)
			}
			if ps.rowsCreated != shown {
				t.Errorf("the page made %d rows over %d renders for %d rows shown: rows are rebuilt per answer", ps.rowsCreated, ps.renders, shown)
			}
			t.Logf("2,048 partitions, %s: %d answers rendered; first render %s ms, last update %s ms, slowest update %s ms; JSON parse of the last answer %s ms",
				tt.name, ps.renders, ps.first, ps.last, ps.max, ps.parse)
			if tt.shot != "" {
				shot := filepath.Join(artifactDir(t), tt.shot)
				screenshot(t, bin, url, shot, 3*time.Second)
				checkPNG(t, shot, 1280, 900)
				t.Logf("screenshot: %s", shot)
			}
		})
	}
}

func keysOf(ps []proxy.PartitionStatus) []string {
	var out []string
	for _, p := range ps {
		out = append(out, partKey(p))
	}
	return out
}

func filterParts(ps []proxy.PartitionStatus, keep func(proxy.PartitionStatus) bool) []proxy.PartitionStatus {
	var out []proxy.PartitionStatus
	for _, p := range ps {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}
