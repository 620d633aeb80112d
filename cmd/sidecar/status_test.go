package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/proxy"
)

// fixedStatus is a pipeline caught mid-run: orders is ahead (one partition
// paused by backpressure), payments/0 holds the global watermark back,
// payments/1 is idle and further behind (which must not make it slowest).
func fixedStatus() *proxy.Status {
	updated := time.Date(2025, 12, 2, 11, 0, 10, 0, time.UTC)
	last := uint64(101)
	return &proxy.Status{
		Updated: updated, Joined: true, Ready: true,
		GlobalWatermark: 102, GlobalMs: updated.Add(-time.Second).UnixMilli(),
		LastSealed: &last, SealTimeout: "5s",
		BufferedBytes: 3 << 10, MaxBufferBytes: 64 << 20, PeakBufferedBytes: 5 << 20,
		Partitions: []proxy.PartitionStatus{
			{Topic: "orders", Partition: 0, Watermark: 103, WatermarkMs: updated.Add(-600 * time.Millisecond).UnixMilli(),
				LagKnown: true, BufferedRecords: 40, BufferedBytes: 2 << 10},
			{Topic: "orders", Partition: 1, Watermark: 104, WatermarkMs: updated.Add(-100 * time.Millisecond).UnixMilli(),
				Lag: 12, LagKnown: true, Paused: true, PauseReasons: []string{"buffer"}, BufferedRecords: 9, BufferedBytes: 1 << 10},
			{Topic: "payments", Partition: 0, Watermark: 102, WatermarkMs: updated.Add(-time.Second).UnixMilli(), LagKnown: true, HoldsWatermark: true},
			{Topic: "payments", Partition: 1, Watermark: 90, WatermarkMs: updated.Add(-time.Minute).UnixMilli(), LagKnown: true, Idle: true},
		},
		OpenPhases: []proxy.OpenPhaseStatus{{Phase: 102, Records: 49, Bytes: 3 << 10, Opened: updated.Add(-1500 * time.Millisecond)}},
		Sealed: []proxy.SealStatus{
			{Phase: 99, SealedBy: "idle", Records: 5, PerTopic: map[string]int{"orders": 5}, Duration: 2, Straggler: "payments/1",
				Sealed: updated.Add(-3 * time.Second)},
			{Phase: 100, SealedBy: "watermark", Records: 12, PerTopic: map[string]int{"payments": 4, "orders": 8}, Duration: 0.5, CV: 0.7,
				Straggler: "payments/0", Sealed: updated.Add(-2 * time.Second)},
			{Phase: 101, SealedBy: "markers", Records: 7, PerTopic: map[string]int{"orders": 7}, Duration: 0.25, Straggler: "orders/1",
				Sealed: updated.Add(-time.Second)},
		},
	}
}

// lines is out split in lines with runs of blanks collapsed, so the
// assertions do not depend on the column widths.
func lines(out string) []string {
	var ls []string
	for l := range strings.SplitSeq(out, "\n") {
		ls = append(ls, strings.Join(strings.Fields(l), " "))
	}
	return ls
}

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

func serveJSON(v any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}

func TestRunStatus(t *testing.T) {
	good := phasesServer(t, serveJSON(fixedStatus()))
	down := httptest.NewServer(http.NotFoundHandler())
	downAddr := strings.TrimPrefix(down.URL, "http://")
	down.Close()

	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		addr       string // server to use instead of good
		wantCode   int
		wantLines  []string // whole lines of stdout, blanks collapsed
		noLines    []string
		wantStderr string
	}{
		{
			name: "every section from -addr", args: []string{"-addr", good}, wantCode: 0,
			wantLines: []string{
				"phasegate at http://" + good + ", as of 2025-12-02T11:00:10.000Z",
				"in group: yes, ready: yes",
				"global watermark: phase 102 (event time 2025-12-02T11:00:09.000Z)",
				"last sealed: phase 101",
				"buffered: 3.0 KiB of 64.0 MiB (peak 5.0 MiB)",
				"seal timeout: 5s",
				"PARTITIONS (4)",
				"TOPIC PARTITION WATERMARK AHEAD LAG IDLE PAUSED BUFFERED",
				"orders 0 103 +400ms 0 no no 40 rec, 2.0 KiB",
				"orders 1 104 +900ms 12 no yes: buffer 9 rec, 1.0 KiB",
				"payments 0 102 0s 0 no no 0 rec, 0 B <- slowest: holds the global watermark back",
				"payments 1 90 -59s 0 yes no 0 rec, 0 B",
				"OPEN PHASES (1)",
				"102 49 3.0 KiB 1.5s",
				"LAST SEALED PHASES (3 of 3 kept, newest first)",
				"PHASE SEALED BY RECORDS PER TOPIC TOOK CV SLOWEST PARTITION SEALED AT",
				"101 markers 7 orders=7 250ms 0.00 orders/1 2025-12-02T11:00:09.000Z",
				"100 watermark 12 orders=8 payments=4 500ms 0.70 payments/0 2025-12-02T11:00:08.000Z",
				"99 idle 5 orders=5 2s 0.00 payments/1 2025-12-02T11:00:07.000Z",
			},
		},
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
			name: "JSON of something else", addr: phasesServer(t, serveJSON(map[string]string{"status": "UP"})),
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
		{name: "-help", args: []string{"-help"}, wantCode: 0, wantLines: []string{"usage: sidecar status [-addr host:port] [-sealed n] [-timeout d]"}},
		{name: "--help", args: []string{"--help"}, wantCode: 0, wantLines: []string{"Prints the phase view of a running sidecar (its /phases) as tables."}},
		{name: "bad address", args: []string{"-addr", "nonsense"}, wantCode: 2, wantStderr: `-addr="nonsense": want host:port`},
		{name: "stray argument", args: []string{"-addr", good, "extra"}, wantCode: 2, wantStderr: `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.addr != "" {
				args = append([]string{"-addr", tt.addr}, args...)
			}
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"status"}, args...), tt.env, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			got := lines(stdout.String())
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
