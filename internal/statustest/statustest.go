package statustest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/proxy"
)

// Fixed is a pipeline caught mid-run: orders is ahead (one partition
// paused by backpressure), payments/0 holds the global watermark back,
// payments/1 is idle and further behind (which must not make it slowest).
func Fixed() *proxy.Status {
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

// Many is a mid-run pipeline with n partitions over fork-a and
// fork-b (n/2 each; partition i of the n is fork-a/i or fork-b/i-n/2). The
// rules, in order: i mod 200 = 7 holds the global watermark (phase 1001)
// with lag 5000+i; i mod 28 = 0 is idle (phase 990, no lag); i mod 5 = 0 is
// paused by the buffer; every other is live. All but the holders are at
// phase 1002 with lag i mod 700. At 2,048: 11 holding, 74 idle, 395 paused,
// 1,579 live (the 11 holders among them).
func Many(n int) *proxy.Status {
	updated := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	last := uint64(1000)
	st := &proxy.Status{Updated: updated, Joined: true, Ready: true, GlobalWatermark: 1001, GlobalMs: updated.Add(-2 * time.Second).UnixMilli(),
		LastSealed: &last, SealTimeout: "5s", BufferedBytes: 136 << 20, MaxBufferBytes: 256 << 20, PeakBufferedBytes: 140 << 20}
	for i := range n {
		p := proxy.PartitionStatus{Topic: "fork-a", Partition: int32(i), Watermark: 1002, WatermarkMs: updated.Add(-time.Second).UnixMilli(),
			Lag: int64(i % 700), LagKnown: true, BufferedRecords: 100, BufferedBytes: 100 * 128, Position: int64(5000 + i)}
		if i >= n/2 {
			p.Topic, p.Partition = "fork-b", int32(i-n/2)
		}
		switch {
		case i%200 == 7:
			p.Watermark, p.WatermarkMs, p.HoldsWatermark, p.Lag = 1001, st.GlobalMs, true, int64(5000+i)
		case i%28 == 0:
			p.Idle, p.Watermark, p.WatermarkMs, p.Lag, p.BufferedRecords, p.BufferedBytes = true, 990, updated.Add(-time.Minute).UnixMilli(), 0, 0, 0
		case i%5 == 0:
			p.Paused, p.PauseReasons = true, []string{"buffer"}
		}
		st.Partitions = append(st.Partitions, p)
	}
	st.OpenPhases = []proxy.OpenPhaseStatus{{Phase: 1001, Records: 5000, Bytes: 640000, Opened: updated.Add(-1500 * time.Millisecond)}}
	st.Sealed = []proxy.SealStatus{{Phase: 1000, SealedBy: "watermark", Records: 20000, PerTopic: map[string]int{"fork-a": 10000, "fork-b": 10000},
		Duration: 1.1, CV: 0.3, Straggler: "fork-a/7", Sealed: updated.Add(-time.Second)}}
	return st
}

// Serve answers /phases from st as the sidecar does (app.ServePhases)
// and records each request's query in queries (when not nil).
func Serve(st *proxy.Status, queries *[]string) http.HandlerFunc {
	var mu sync.Mutex
	return func(w http.ResponseWriter, r *http.Request) {
		if queries != nil {
			mu.Lock()
			*queries = append(*queries, r.URL.RawQuery)
			mu.Unlock()
		}
		app.ServePhases(w, r, st)
	}
}

// Lines is out split in lines with runs of blanks collapsed, so the
// assertions do not depend on the column widths.
func Lines(out string) []string {
	var ls []string
	for l := range strings.SplitSeq(out, "\n") {
		ls = append(ls, strings.Join(strings.Fields(l), " "))
	}
	return ls
}

// ServeJSON answers every request with v as JSON, as a sidecar from before
// the summary (or any JSON service) would.
func ServeJSON(v any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}
