package proxy_test

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The pipeline's metrics follow Prometheus conventions: phasegate_ prefix,
// counters end in _total, units in the name, every known label combination
// present from the start.
func TestMetricsNamesTypesAndUnits(t *testing.T) {
	forks := map[string]int32{"a": 2, "b": 1}
	e := newEnv(t, forks, 2)
	grid(e, phaseBase(), 0, 3, forks, 2)
	e.start()
	e.settle(10 * time.Second)

	want := map[string]dto.MetricType{
		"phasegate_records_in_total":             dto.MetricType_COUNTER,
		"phasegate_records_out_total":            dto.MetricType_COUNTER,
		"phasegate_markers_out_total":            dto.MetricType_COUNTER,
		"phasegate_duplicates_dropped_total":     dto.MetricType_COUNTER,
		"phasegate_quarantined_total":            dto.MetricType_COUNTER,
		"phasegate_phases_sealed_total":          dto.MetricType_COUNTER,
		"phasegate_seal_timeouts_total":          dto.MetricType_COUNTER,
		"phasegate_phase_duration_seconds":       dto.MetricType_HISTOGRAM,
		"phasegate_seal_to_commit_seconds":       dto.MetricType_HISTOGRAM,
		"phasegate_buffered_bytes":               dto.MetricType_GAUGE,
		"phasegate_buffered_records":             dto.MetricType_GAUGE,
		"phasegate_watermark_lag_seconds":        dto.MetricType_GAUGE,
		"phasegate_consumer_lag_records":         dto.MetricType_GAUGE,
		"phasegate_partition_idle":               dto.MetricType_GAUGE,
		"phasegate_partition_paused":             dto.MetricType_GAUGE,
		"phasegate_paused_seconds_total":         dto.MetricType_COUNTER,
		"phasegate_global_watermark_phase":       dto.MetricType_GAUGE,
		"phasegate_straggler_cv":                 dto.MetricType_GAUGE,
		"phasegate_rebalances_total":             dto.MetricType_COUNTER,
		"phasegate_rewinds_total":                dto.MetricType_COUNTER,
		"phasegate_dedupe_full_total":            dto.MetricType_COUNTER,
		"phasegate_transactions_total":           dto.MetricType_COUNTER,
		"phasegate_transaction_duration_seconds": dto.MetricType_HISTOGRAM,
		"phasegate_producer_recreations_total":   dto.MetricType_COUNTER,
	}
	mfs, err := e.sidecar.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf
		name := mf.GetName()
		if !strings.HasPrefix(name, "phasegate_") {
			t.Errorf("%s: not under the phasegate_ prefix", name)
		}
		if (mf.GetType() == dto.MetricType_COUNTER) != strings.HasSuffix(name, "_total") {
			t.Errorf("%s: counters and only counters end in _total", name)
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s: no help text", name)
		}
	}
	for name, typ := range want {
		mf := got[name]
		if mf == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		if mf.GetType() != typ {
			t.Errorf("%s: type %s, want %s", name, mf.GetType(), typ)
		}
	}
	// Every known label value exists from the start (here: after one run).
	labels := func(name, label string) map[string]bool {
		m := map[string]bool{}
		for _, metric := range got[name].GetMetric() {
			for _, lp := range metric.GetLabel() {
				if lp.GetName() == label {
					m[lp.GetValue()] = true
				}
			}
		}
		return m
	}
	for name, set := range map[string][]string{
		"phasegate_phases_sealed_total|cause":      {"markers", "watermark", "idle", "timeout"},
		"phasegate_quarantined_total|reason":       {"late", "malformed", "stale-marker", "count-mismatch"},
		"phasegate_duplicates_dropped_total|kind":  {"record", "marker"},
		"phasegate_transactions_total|result":      {"committed", "aborted", "failed", "fenced"},
		"phasegate_records_in_total|topic":         {"a", "b"},
		"phasegate_consumer_lag_records|partition": {"0", "1"},
	} {
		n, l, _ := strings.Cut(name, "|")
		have := labels(n, l)
		for _, v := range set {
			if !have[v] {
				t.Errorf("%s{%s=%q} not initialised", n, l, v)
			}
		}
	}
	if v := counter(t, e, "phasegate_records_out_total"); v != 6*3 {
		t.Errorf("records_out = %v, want 18", v)
	}
}
