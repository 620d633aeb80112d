//go:build unix

package main

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/internal/statustest"
	"github.com/phasegate/phasegate/proxy"
)

// liveViewServer serves the page and a /phases handler, like the sidecar.
func liveViewServer(t *testing.T, phases http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", app.LiveView())
	mux.Handle("GET /phases", phases)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// partitionRows are the rows of the full partition table, by
// "topic/partition".
func partitionRows(t *testing.T, dom string) map[string]element {
	return listRows(t, dom, "all")
}

// listRows are the partition rows of one table of the page (data-list:
// holders, lagging or all), by "topic/partition".
func listRows(t *testing.T, dom, list string) map[string]element {
	t.Helper()
	rows := map[string]element{}
	for _, e := range byAttr(elements(dom, "tr"), "data-list", list) {
		if k, ok := e.attrs["data-key"]; ok {
			if _, dup := rows[k]; dup {
				t.Errorf("partition %s shown twice", k)
			}
			rows[k] = e
		}
	}
	return rows
}

// sealedRows are the rows of the sealed phases table, in page order.
func sealedRows(dom string) []element {
	var out []element
	for _, e := range elements(dom, "tr") {
		if _, ok := e.attrs["data-sealed-by"]; ok {
			out = append(out, e)
		}
	}
	return out
}

// The page's reading of a fixed /phases: what is marked, what is said.
func TestLiveViewRendersPhases(t *testing.T) {
	bin := chromium(t)
	evil := statustest.Fixed()
	evil.Partitions[0].Topic = `<img src=x onerror=alert(1)>`
	empty := &proxy.Status{Updated: time.Date(2025, 12, 2, 11, 0, 0, 0, time.UTC)} // before joining: null slices

	tests := []struct {
		name   string
		phases http.Handler
		check  func(t *testing.T, dom string)
	}{
		{
			name: "slowest, idle and paused partitions are marked", phases: statustest.Serve(statustest.Fixed(), nil),
			check: func(t *testing.T, dom string) {
				rows := partitionRows(t, dom)
				if got := slices.Sorted(maps.Keys(rows)); !slices.Equal(got, []string{"orders/0", "orders/1", "payments/0", "payments/1"}) {
					t.Fatalf("partition rows %v", got)
				}
				want := map[string]struct{ slowest, idle, paused, reasons, text string }{
					"orders/0":   {"false", "false", "false", "", "live"},
					"orders/1":   {"false", "false", "true", "buffer", "paused: buffer"},
					"payments/0": {"true", "false", "false", "", "slowest"},
					"payments/1": {"false", "true", "false", "", "idle"}, // lowest, but idle
				}
				for k, w := range want {
					r := rows[k]
					got := [4]string{r.attrs["data-slowest"], r.attrs["data-idle"], r.attrs["data-paused"], r.attrs["data-pause-reasons"]}
					if got != [4]string{w.slowest, w.idle, w.paused, w.reasons} {
						t.Errorf("%s: slowest, idle, paused, reasons = %q, want %q", k, got, [4]string{w.slowest, w.idle, w.paused, w.reasons})
					}
					if !strings.Contains(r.text, w.text) {
						t.Errorf("%s: row says %q, want it to say %q", k, r.text, w.text)
					}
				}
				if r := rows["orders/1"]; !strings.Contains(r.text, "+900 ms") || !strings.Contains(r.text, "12") {
					t.Errorf("orders/1 should show its lead (+900 ms) and consumer lag (12): %q", r.text)
				}
				var got []string
				for _, s := range sealedRows(dom) {
					got = append(got, s.attrs["data-phase"]+" "+s.attrs["data-sealed-by"])
				}
				if want := []string{"101 markers", "100 watermark", "99 idle"}; !slices.Equal(got, want) {
					t.Errorf("sealed rows %q, want newest first %q", got, want)
				}
				if s := sealedRows(dom); len(s) > 1 && !strings.Contains(s[1].text, "orders 8 · payments 4") {
					t.Errorf("phase 100 should show its records per topic: %q", s[1].text)
				}
				for id, want := range map[string]string{"c-live": "2", "c-paused": "1 buffer 1", "c-idle": "1", "c-holding": "1", "c-at": "1",
					"c-lag": "12 on 1 partition"} {
					if got := byID(t, dom, "dd", id).text; got != want {
						t.Errorf("count %s says %q, want %q", id, got, want)
					}
				}
				for list, want := range map[string]string{"holders": "payments/0", "lagging": "orders/1"} {
					if got := slices.Collect(maps.Keys(listRows(t, dom, list))); !slices.Equal(got, []string{want}) {
						t.Errorf("%s rows %v, want %s", list, got, want)
					}
				}
				if g := byID(t, dom, "dd", "global").text; !strings.HasPrefix(g, "102") {
					t.Errorf("global watermark card says %q", g)
				}
				if c := byID(t, dom, "span", "conn"); c.attrs["data-state"] != "live" || c.text != "ready" {
					t.Errorf("connection badge %v %q, want live/ready", c.attrs, c.text)
				}
			},
		},
		{
			name: "a sidecar from before the summary: the page counts the rows", phases: statustest.ServeJSON(statustest.Fixed()),
			check: func(t *testing.T, dom string) {
				for id, want := range map[string]string{"c-live": "2", "c-paused": "1 buffer 1", "c-idle": "1", "c-holding": "1"} {
					if got := byID(t, dom, "dd", id).text; got != want {
						t.Errorf("count %s says %q, want %q", id, got, want)
					}
				}
				if rows := partitionRows(t, dom); len(rows) != 4 {
					t.Errorf("%d rows in the full table, want 4", len(rows))
				}
			},
		},
		{
			name: "topic names are shown as text, never run as markup", phases: statustest.Serve(evil, nil),
			check: func(t *testing.T, dom string) {
				if len(elements(dom, "img")) > 0 || strings.Contains(dom, "<img") {
					t.Error("a topic name became an <img> element")
				}
				if !strings.Contains(dom, "&lt;img src=x onerror=alert(1)&gt;") {
					t.Error("the topic name is not shown as text")
				}
			},
		},
		{
			name: "before joining the group", phases: statustest.Serve(empty, nil),
			check: func(t *testing.T, dom string) {
				for _, want := range []string{"Not in the consumer group yet.", "No open phase.", "No phase sealed yet."} {
					if !strings.Contains(dom, want) {
						t.Errorf("page does not say %q", want)
					}
				}
				if c := byID(t, dom, "span", "conn"); c.text != "not in the group" {
					t.Errorf("connection badge says %q", c.text)
				}
			},
		},
		{
			name: "sidecar answers an error", phases: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
			}),
			check: func(t *testing.T, dom string) {
				e := byID(t, dom, "div", "error")
				if e.attrs["class"] != "shown" || !strings.Contains(e.text, "Cannot read /phases from the sidecar: /phases answered 503") {
					t.Errorf("error banner %v %q", e.attrs, e.text)
				}
				if c := byID(t, dom, "span", "conn"); c.attrs["data-state"] != "unreachable" {
					t.Errorf("connection badge %v", c.attrs)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := liveViewServer(t, tt.phases)
			tt.check(t, dumpDOM(t, bin, url, 2*time.Second))
		})
	}
}

// checkSealedRows checks that each sealed phase's row shows the cause and
// the counts the pipeline recorded for that phase.
func checkSealedRows(t *testing.T, rows []element, history []proxy.SealStatus) {
	t.Helper()
	byPhase := map[string]proxy.SealStatus{}
	for _, s := range history {
		byPhase[strconv.FormatUint(s.Phase, 10)] = s
	}
	for _, r := range rows {
		ph := r.attrs["data-phase"]
		want, ok := byPhase[ph]
		if !ok {
			t.Errorf("page shows phase %s as sealed; the pipeline did not seal it", ph)
			continue
		}
		if r.attrs["data-sealed-by"] != want.SealedBy || !strings.Contains(r.text, " "+want.SealedBy+" ") {
			t.Errorf("phase %s: page says sealed by %q (%q), pipeline says %q", ph, r.attrs["data-sealed-by"], r.text, want.SealedBy)
		}
		var per []string
		for _, topic := range slices.Sorted(maps.Keys(want.PerTopic)) {
			per = append(per, topic+" "+thousands(want.PerTopic[topic]))
		}
		if counts := " " + thousands(want.Records) + " " + strings.Join(per, " · "); !strings.Contains(r.text, counts) {
			t.Errorf("phase %s: row %q lacks the pipeline's counts %q", ph, r.text, counts)
		}
	}
}

// thousands formats n as the page does (en-US grouping).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
