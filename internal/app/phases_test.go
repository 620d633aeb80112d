package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/proxy"
)

// A GET /phases as a user types it: the summary by default, more rows with
// ?top=, every row with ?partitions=all, one line naming the parameter on
// a bad value.
func TestServePhases(t *testing.T) {
	st := &proxy.Status{Updated: time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC), Joined: true, GlobalWatermark: 5}
	for i := range 30 { // lag i; every third paused
		st.Partitions = append(st.Partitions, proxy.PartitionStatus{Topic: "t", Partition: int32(i), Watermark: 6,
			Lag: int64(i), LagKnown: true, Paused: i%3 == 0})
	}
	tests := []struct {
		name       string
		query      string
		wantCode   int
		wantRows   int // len(partitions); -1: left out
		wantTop    int
		wantLagged int
		wantError  string
	}{
		{name: "summary by default", query: "", wantCode: 200, wantRows: -1, wantTop: 10, wantLagged: 10},
		{name: "top 3", query: "?top=3", wantCode: 200, wantRows: -1, wantTop: 3, wantLagged: 3},
		{name: "top 0: counts only", query: "?top=0", wantCode: 200, wantRows: -1, wantTop: 0, wantLagged: 0},
		{name: "more than there are", query: "?top=100", wantCode: 200, wantRows: -1, wantTop: 100, wantLagged: 29},
		{name: "every row", query: "?partitions=all", wantCode: 200, wantRows: 30, wantTop: 10, wantLagged: 10},
		{name: "every row and top", query: "?partitions=all&top=1", wantCode: 200, wantRows: 30, wantTop: 1, wantLagged: 1},
		{name: "a page of the paused", query: "?partitions=paused&offset=0&limit=5", wantCode: 200, wantRows: 5, wantTop: 10, wantLagged: 10},
		{name: "the lagging from the 20th", query: "?partitions=lagging&offset=20", wantCode: 200, wantRows: 9, wantTop: 10, wantLagged: 10},
		{name: "bad partitions", query: "?partitions=some", wantCode: 400,
			wantError: `bad /phases query: partitions="some": want one of all, live, paused, idle, holding, lagging (partitions=all for every partition's row), or leave it out for the summary`},
		{name: "limit 0", query: "?partitions=all&limit=0", wantCode: 400,
			wantError: `bad /phases query: limit="0": want how many rows to send, 1 or more (default: every one)`},
		{name: "negative offset", query: "?partitions=all&offset=-1", wantCode: 400, wantError: `bad /phases query: offset="-1": want how many rows to skip, 0 or more`},
		{name: "a page of no rows", query: "?limit=5", wantCode: 400,
			wantError: `bad /phases query: offset and limit page the rows of ?partitions=: add partitions=all (or one of all, live, paused, idle, holding, lagging)`},
		{name: "negative top", query: "?top=-2", wantCode: 400,
			wantError: `bad /phases query: top="-2": want a whole number of partitions to list, 0 or more (default 10)`},
		{name: "top not a number", query: "?top=ten", wantCode: 400, wantError: `bad /phases query: top="ten"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			ServePhases(rec, httptest.NewRequest(http.MethodGet, "/phases"+tt.query, nil), st)
			if rec.Code != tt.wantCode {
				t.Fatalf("%d, want %d: %s", rec.Code, tt.wantCode, rec.Body.String())
			}
			if tt.wantError != "" {
				if body := rec.Body.String(); !strings.HasPrefix(body, tt.wantError) || strings.Count(body, "\n") != 1 {
					t.Errorf("body %q, want one line starting %q", body, tt.wantError)
				}
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var got struct {
				Updated    time.Time                `json:"updated"`
				Partitions *[]proxy.PartitionStatus `json:"partitions"`
				Summary    proxy.Summary            `json:"summary"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			rows := -1
			if got.Partitions != nil {
				rows = len(*got.Partitions)
			}
			if rows != tt.wantRows || got.Summary.Top != tt.wantTop || len(got.Summary.MostLagging) != tt.wantLagged {
				t.Errorf("rows %d, top %d, most lagging %d; want %d, %d, %d", rows, got.Summary.Top, len(got.Summary.MostLagging),
					tt.wantRows, tt.wantTop, tt.wantLagged)
			}
			if (rows < 0) != (got.Summary.FullList == proxy.FullListPath) {
				t.Errorf("full_list %q with rows %d: a summary without rows names %s", got.Summary.FullList, rows, proxy.FullListPath)
			}
			if got.Summary.Partitions != 30 || !got.Updated.Equal(st.Updated) {
				t.Errorf("summary of %d partitions as of %v", got.Summary.Partitions, got.Updated)
			}
		})
	}
}
