//go:build unix

package main

import (
	"bytes"
	"context"
	"image/png"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/internal/inproc"
	"github.com/phasegate/phasegate/internal/kafkatest"
	"github.com/phasegate/phasegate/internal/statustest"
	"github.com/phasegate/phasegate/proxy"
	"github.com/phasegate/phasegate/watermarks"
)

// The branch of payments/1 delivers each record this long after its
// timestamp, so that partition holds the global watermark back.
const liveSlowDelay = 800 * time.Millisecond

// A user opens the live view of a running sidecar whose payments/1 lags:
// that partition is marked slowest, and sealed phases appear with the cause
// the pipeline recorded. The screenshot is kept as an artifact
// (PHASEGATE_ARTIFACTS, else bin/artifacts); with PHASEGATE_UPDATE_DOCS=1 it
// also replaces docs/live-view.png.
func TestLiveViewOfRunningSidecar(t *testing.T) {
	bin := chromium(t)
	pipe, url, lastSealed := startSlowSidecar(t)
	const slow = liveSlow

	dom := dumpDOM(t, bin, url, 4*time.Second)
	rows := partitionRows(t, dom)
	if got := slices.Sorted(maps.Keys(rows)); !slices.Equal(got, []string{"orders/0", "orders/1", "payments/0", "payments/1"}) {
		t.Fatalf("partition rows %v, want every partition of both forks", got)
	}
	for k, r := range rows {
		wantSlow := k == slow+"/1"
		if (r.attrs["data-slowest"] == "true") != wantSlow || strings.Contains(r.text, "slowest") != wantSlow {
			t.Errorf("%s: data-slowest=%q, row %q; want slowest marked on %s/1 only", k, r.attrs["data-slowest"], r.text, slow)
		}
	}
	sealed := sealedRows(dom)
	if len(sealed) == 0 {
		t.Fatal("the page shows no sealed phase")
	}
	newest, err := strconv.ParseUint(sealed[0].attrs["data-phase"], 10, 64)
	if err != nil || newest < lastSealed {
		t.Errorf("newest sealed phase on the page is %q, the pipeline had sealed %d before the page loaded", sealed[0].attrs["data-phase"], lastSealed)
	}
	checkSealedRows(t, sealed, pipe.Status().Sealed)
	// Nothing is idle and no phase waits for the timeout: the watermark seals.
	if by := sealed[0].attrs["data-sealed-by"]; by != "watermark" {
		t.Errorf("newest sealed phase: sealed by %q, row %q; want watermark", by, sealed[0].text)
	}

	shot := filepath.Join(artifactDir(t), "live-view.png")
	screenshot(t, bin, url, shot, 8*time.Second)
	checkPNG(t, shot, 1280, 900)
	t.Logf("screenshot of the live view: %s", shot)
	if os.Getenv("PHASEGATE_UPDATE_DOCS") == "1" {
		doc := filepath.Join(moduleRoot(t), "docs", "live-view.png")
		b, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(doc, b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", doc)
	}
}

// `sidecar status -all` against a running sidecar prints the lagging
// partition as the one holding the watermark back, in the summary and in
// the full table, and the phases it sealed.
func TestStatusOfRunningSidecar(t *testing.T) {
	_, url, lastSealed := startSlowSidecar(t)
	var stdout, stderr bytes.Buffer
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
	if code := run([]string{"status", "-addr", addr, "-all"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("status exited %d: %s", code, stderr.String())
	}
	ls := statustest.Lines(stdout.String())
	section := map[string][]string{} // heading (up to " (") -> its lines
	var heading string
	for _, l := range ls {
		if h, _, ok := strings.Cut(l, " ("); ok && h == strings.ToUpper(h) && h != "" {
			heading = h
			continue
		}
		section[heading] = append(section[heading], l)
	}
	if !slices.ContainsFunc(ls, func(l string) bool { return strings.HasPrefix(l, "PARTITIONS (4): ") }) {
		t.Errorf("no summary line for 4 partitions:\n%s", stdout.String())
	}
	if h := section["HOLDING THE GLOBAL WATERMARK BACK"]; len(h) < 2 || !strings.HasPrefix(h[1], liveSlow+" 1 ") {
		t.Errorf("holders %q: want %s 1 alone", h, liveSlow)
	}
	parts := 0
	for _, l := range section["ALL PARTITIONS"] {
		f := strings.Fields(l)
		if len(f) > 1 && (f[0] == liveFast || f[0] == liveSlow) {
			parts++
			wantSlow := f[0] == liveSlow && f[1] == "1"
			if strings.HasSuffix(l, "<- slowest: holds the global watermark back") != wantSlow {
				t.Errorf("partition line %q: want only %s 1 marked slowest", l, liveSlow)
			}
		}
	}
	if parts != 4 {
		t.Errorf("%d partition lines in ALL PARTITIONS, want 4:\n%s", parts, stdout.String())
	}
	sealed := section["LAST SEALED PHASES"]
	if len(sealed) < 2 || !strings.HasPrefix(sealed[0], "PHASE SEALED BY") {
		t.Fatalf("no sealed phase printed:\n%s", stdout.String())
	}
	f := strings.Fields(sealed[1])
	if newest, err := strconv.ParseUint(f[0], 10, 64); err != nil || newest < lastSealed || len(f) < 2 || f[1] != "watermark" {
		t.Errorf("newest sealed phase line %q: want phase >= %d sealed by watermark", sealed[1], lastSealed)
	}
}

// The running sidecar's forks: payments/1 lags liveSlowDelay behind.
const liveFast, liveSlow = "orders", "payments"

// startSlowSidecar runs a pipeline on kfake fed by feed, waits until it has
// sealed phases with payments/1 holding the watermark back, and serves the
// sidecar's routes. It returns the pipeline, the base URL ending in "/", and
// the last sealed phase seen before returning.
func startSlowSidecar(t *testing.T) (*proxy.Pipeline, string, uint64) {
	t.Helper()
	const fast, slow, out = liveFast, liveSlow, "aligned"
	cluster, err := kafkatest.Kfake(map[string]int32{fast: 2, slow: 2, out: 2, out + ".quarantine": 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	cfg := proxy.Config{
		InputTopics: []string{fast, slow}, OutputTopic: out, QuarantineTopic: out + ".quarantine", WatermarkTopic: out + ".watermarks",
		GroupID: "phasegate-ui", TransactionalID: "phasegate-ui-0",
		Watermarks: watermarks.Config{
			PhaseLength: 500 * time.Millisecond, MaxOutOfOrderness: 50 * time.Millisecond, IdleTimeout: 10 * time.Second,
			MaxBufferBytes: 64 << 20, SealTimeoutMin: 5 * time.Second, SealTimeoutMax: time.Minute,
			SealPolicy: watermarks.PolicyWait, Now: time.Now,
		},
		Dedupe: dedupe.Config{MaxSealedPhases: 64, MaxIdentities: 1 << 20},
		Tick:   10 * time.Millisecond, LagInterval: 200 * time.Millisecond, QuarantineDelay: 500 * time.Millisecond,
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	sc, err := inproc.StartSidecar(inproc.KafkaFor(brokers), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sc.Stop(); err != nil {
			t.Errorf("pipeline: %v", err)
		}
	})
	feed(t, brokers, fast, slow)

	pipe := sc.Pipeline
	var lastSealed uint64
	pollUntil(t, 60*time.Second, "no phase sealed with payments/1 holding the watermark back", func() bool {
		st := pipe.Status()
		if st == nil || st.LastSealed == nil || len(st.Sealed) < 2 {
			return false
		}
		lastSealed = *st.LastSealed
		var slowest []string
		for _, p := range st.Partitions {
			if p.HoldsWatermark {
				slowest = append(slowest, partKey(p))
			}
		}
		return slices.Equal(slowest, []string{slow + "/1"})
	})

	// The sidecar's own routes, so / is what sidecar.go serves. Chromium's
	// virtual time fires the page's 1 s refresh timer at once; holding each
	// /phases answer until the pipeline has published a newer state gives
	// every refresh a new state, as a second of real time would.
	routes := app.Routes(pipe, app.Options{Registry: sc.Registry})
	var mu sync.Mutex // serialises /phases answers and guards served
	var served time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/phases" {
			mu.Lock()
			defer mu.Unlock()
			waitNewer(r.Context(), pipe, served)
			served = pipe.Status().Updated
		}
		routes.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return pipe, srv.URL + "/", lastSealed
}

// feed writes a record to every partition of both forks every 10 ms until
// the test ends; payments/1's records arrive liveSlowDelay after their
// timestamps.
func feed(t *testing.T, brokers []string, fast, slow string) {
	t.Helper()
	prod, err := kafkatest.NewProducer(brokers)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		prod.Close()
	})
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var late []*kgo.Record
		for ctx.Err() == nil {
			now := time.Now()
			recs := []*kgo.Record{
				{Topic: fast, Partition: 0, Timestamp: now, Value: []byte("order")},
				{Topic: fast, Partition: 1, Timestamp: now, Value: []byte("order")},
				{Topic: slow, Partition: 0, Timestamp: now, Value: []byte("payment")},
			}
			late = append(late, &kgo.Record{Topic: slow, Partition: 1, Timestamp: now, Value: []byte("payment")})
			for len(late) > 0 && now.Sub(late[0].Timestamp) >= liveSlowDelay {
				recs, late = append(recs, late[0]), late[1:]
			}
			if err := prod.Produce(ctx, recs...); err != nil && ctx.Err() == nil {
				t.Errorf("feed: %v", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})
}

// waitNewer returns once the pipeline has published a status newer than
// since, after 2 s, or when ctx ends.
func waitNewer(ctx context.Context, pipe *proxy.Pipeline, since time.Time) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Second)
	for {
		if st := pipe.Status(); st != nil && st.Updated.After(since) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-tick.C:
		}
	}
}

// checkPNG fails unless file is a PNG of w x h pixels.
func checkPNG(t *testing.T, file string, w, h int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", file, err)
	}
	if cfg.Width != w || cfg.Height != h {
		t.Errorf("screenshot is %dx%d, want %dx%d", cfg.Width, cfg.Height, w, h)
	}
}
