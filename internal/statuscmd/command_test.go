package statuscmd

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/internal/statustest"
)

// phasesServer serves /phases with handler and returns its host:port.
func phasesServer(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /phases", handler)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// htmlServer answers every path with an HTML page and code, as a web
// server that is not a sidecar would.
func htmlServer(t *testing.T, code int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(code)
		_, _ = w.Write([]byte("<!DOCTYPE html><html><body><h1>Whitelabel Error Page</h1></body></html>"))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestRunStatus(t *testing.T) {
	var queries []string
	good := phasesServer(t, statustest.Serve(statustest.Fixed(), &queries))
	many := phasesServer(t, statustest.Serve(statustest.Many(2048), nil))
	legacy := phasesServer(t, statustest.ServeJSON(statustest.Fixed())) // a sidecar from before the summary
	down := httptest.NewServer(http.NotFoundHandler())
	downAddr := strings.TrimPrefix(down.URL, "http://")
	down.Close()

	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		addr       string // server to use instead of good
		wantCode   int
		wantQuery  string   // of the request to /phases, when set
		wantLines  []string // whole lines of stdout, blanks collapsed
		noLines    []string
		wantStderr string
	}{
		{
			name: "every section from -addr: the partitions summarised", args: []string{"-addr", good}, wantCode: 0, wantQuery: "top=10",
			wantLines: []string{
				"phasegate at http://" + good + ", as of 2025-12-02T11:00:10.000Z",
				"in group: yes, ready: yes",
				"global watermark: phase 102 (event time 2025-12-02T11:00:09.000Z)",
				"last sealed: phase 101",
				"buffered: 3.0 KiB of 64.0 MiB (peak 5.0 MiB)",
				"seal timeout: 5s",
				"PARTITIONS (4): 2 live, 1 paused (buffer 1), 1 idle",
				"at the global watermark: 1 (1 holding it back)",
				"consumer lag: 12 records on 1 partition",
				"TOPIC PARTITIONS LIVE PAUSED IDLE LAG",
				"orders 2 1 1 0 12",
				"payments 2 1 0 1 0",
				"HOLDING THE GLOBAL WATERMARK BACK (1 of 1)",
				"TOPIC PARTITION WATERMARK AHEAD LAG IDLE PAUSED BUFFERED",
				"payments 0 102 0s 0 no no 0 rec, 0 B",
				"MOST LAGGING (1 of 1 with lag)",
				"orders 1 104 +900ms 12 no yes: buffer 9 rec, 1.0 KiB",
				"every partition: sidecar status -all (GET /phases?partitions=all)",
				"OPEN PHASES (1)",
				"102 49 3.0 KiB 1.5s",
				"LAST SEALED PHASES (3 of 3 kept, newest first)",
				"PHASE SEALED BY RECORDS PER TOPIC TOOK CV SLOWEST PARTITION SEALED AT",
				"101 markers 7 orders=7 250ms 0.00 orders/1 2025-12-02T11:00:09.000Z",
				"100 watermark 12 orders=8 payments=4 500ms 0.70 payments/0 2025-12-02T11:00:08.000Z",
				"99 idle 5 orders=5 2s 0.00 payments/1 2025-12-02T11:00:07.000Z",
			},
			noLines: []string{"orders 0 103 +400ms 0 no no 40 rec, 2.0 KiB", "payments 1 90 -59s 0 yes no 0 rec, 0 B"},
		},
		{
			name: "-all adds every partition's row", args: []string{"-addr", good, "-all"}, wantCode: 0, wantQuery: "top=10&partitions=all",
			wantLines: []string{
				"PARTITIONS (4): 2 live, 1 paused (buffer 1), 1 idle",
				"ALL PARTITIONS (4)",
				"orders 0 103 +400ms 0 no no 40 rec, 2.0 KiB",
				"orders 1 104 +900ms 12 no yes: buffer 9 rec, 1.0 KiB",
				"payments 0 102 0s 0 no no 0 rec, 0 B <- slowest: holds the global watermark back",
				"payments 1 90 -59s 0 yes no 0 rec, 0 B",
			},
			noLines: []string{"every partition: sidecar status -all (GET /phases?partitions=all)"},
		},
		{
			name: "2,048 partitions: counts, the first 10 holders and the 10 most lagging", args: []string{"-addr", many}, wantCode: 0,
			wantLines: []string{
				"PARTITIONS (2048): 1579 live, 395 paused (buffer 395), 74 idle",
				"at the global watermark: 11 (11 holding it back)",
				"consumer lag: 737100 records on 1974 partitions",
				"fork-a 1024 790 197 37 318128",
				"fork-b 1024 789 198 37 418972",
				"HOLDING THE GLOBAL WATERMARK BACK (10 of 11; -top n lists more)",
				"fork-b 983 1001 0s 7007 no no 100 rec, 12.5 KiB",
				"MOST LAGGING (10 of 1974 with lag; -top n lists more)",
				"fork-b 983 1001 0s 7007 no no 100 rec, 12.5 KiB",
			},
			noLines: []string{"ALL PARTITIONS (2048)", "fork-a 7 1001 0s 5007 no no 100 rec, 12.5 KiB"},
		},
		{
			name: "-top 20 lists every holder", args: []string{"-addr", many, "-top", "20"}, wantCode: 0,
			wantLines: []string{"HOLDING THE GLOBAL WATERMARK BACK (11 of 11)", "fork-a 7 1001 0s 5007 no no 100 rec, 12.5 KiB",
				"MOST LAGGING (20 of 1974 with lag; -top n lists more)"},
		},
		{
			name: "a sidecar from before the summary: summarised here", args: []string{"-addr", legacy}, wantCode: 0,
			wantLines: []string{"PARTITIONS (4): 2 live, 1 paused (buffer 1), 1 idle", "HOLDING THE GLOBAL WATERMARK BACK (1 of 1)",
				"payments 0 102 0s 0 no no 0 rec, 0 B", "MOST LAGGING (1 of 1 with lag)"},
		},
		{name: "negative -top", args: []string{"-addr", good, "-top", "-1"}, wantCode: 2, wantStderr: "status: -top=-1: want 0 or more partitions to list\n"},
		{
			name: "address from the environment, wildcard host", env: map[string]string{"PHASEGATE_HTTP_ADDR": ":" + strings.Split(good, ":")[1]},
			wantCode: 0, wantLines: []string{"phasegate at http://127.0.0.1:" + strings.Split(good, ":")[1] + ", as of 2025-12-02T11:00:10.000Z"},
		},
		{
			name: "-addr wins over the environment", args: []string{"-addr", good}, env: map[string]string{"PHASEGATE_HTTP_ADDR": downAddr},
			wantCode: 0, wantLines: []string{"last sealed: phase 101"},
		},
		{
			name: "-sealed limits the history to the newest", args: []string{"-addr", good, "-sealed", "1"}, wantCode: 0,
			wantLines: []string{"LAST SEALED PHASES (1 of 3 kept, newest first)", "101 markers 7 orders=7 250ms 0.00 orders/1 2025-12-02T11:00:09.000Z"},
			noLines:   []string{"100 watermark 12 orders=8 payments=4 500ms 0.70 payments/0 2025-12-02T11:00:08.000Z"},
		},
		{
			name: "sidecar not running", args: []string{"-addr", downAddr}, wantCode: 1,
			wantStderr: "status: cannot reach the sidecar at http://" + downAddr + "/phases",
		},
		{
			name: "sidecar answers an error", addr: phasesServer(t, func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "boom", http.StatusInternalServerError)
			}), wantCode: 1, wantStderr: "500 Internal Server Error: boom",
		},
		{
			name: "not a status", addr: phasesServer(t, func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte("<html>a proxy's login page</html>"))
			}), wantCode: 1, wantStderr: " is not a phasegate sidecar: GET /phases answered 200 OK with text/html, not a phase status; check -addr or PHASEGATE_HTTP_ADDR\n",
		},
		{
			name: "JSON of something else", addr: phasesServer(t, statustest.ServeJSON(map[string]string{"status": "UP"})),
			wantCode: 1, wantStderr: " is not a phasegate sidecar: GET /phases answered 200 OK with application/json, not a phase status",
		},
		{
			name: "a web server's 404 page", addr: htmlServer(t, http.StatusNotFound),
			wantCode: 1, wantStderr: " is not a phasegate sidecar: GET /phases answered 404 Not Found (text/html); check -addr or PHASEGATE_HTTP_ADDR\n",
		},
		{
			name: "a sidecar still starting", addr: phasesServer(t, func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, app.StartingPrefix+"the cluster metadata from kafka:9092", http.StatusServiceUnavailable)
			}), wantCode: 1, wantStderr: " is starting, waiting for the cluster metadata from kafka:9092\n",
		},
		{name: "bad address", args: []string{"-addr", "nonsense"}, wantCode: 2, wantStderr: `-addr="nonsense": want host:port`},
		{name: "stray argument", args: []string{"-addr", good, "extra"}, wantCode: 2, wantStderr: `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.addr != "" {
				args = append([]string{"-addr", tt.addr}, args...)
			}
			queries = nil
			var stdout, stderr bytes.Buffer
			code := Run(args, tt.env, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			if tt.wantQuery != "" && !slices.Equal(queries, []string{tt.wantQuery}) {
				t.Errorf("asked /phases?%q, want ?%s", queries, tt.wantQuery)
			}
			got := statustest.Lines(stdout.String())
			for _, want := range tt.wantLines {
				if !slices.Contains(got, want) {
					t.Errorf("stdout lacks the line %q:\n%s", want, stdout.String())
				}
			}
			for _, bad := range tt.noLines {
				if slices.Contains(got, bad) {
					t.Errorf("stdout has the line %q:\n%s", bad, stdout.String())
				}
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
			if strings.Contains(stderr.String(), "<") {
				t.Errorf("stderr holds markup: %q", stderr.String())
			}
			if tt.wantCode != 0 && stdout.Len() != 0 {
				t.Errorf("a failed status printed to stdout: %q", stdout.String())
			}
		})
	}
}
