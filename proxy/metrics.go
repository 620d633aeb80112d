package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"strconv"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/watermarks"
)

// Metrics are the pipeline's Prometheus metrics. Label values are bounded:
// topics and partitions of the configuration, causes and reasons of the wire
// format; never keys or phase IDs.
type Metrics struct {
	recordsIn     *prometheus.CounterVec
	inByTopic     map[string]prometheus.Counter // recordsIn's children, looked up once
	recordsOut    prometheus.Counter
	markersOut    prometheus.Counter
	duplicates    *prometheus.CounterVec
	quarantined   *prometheus.CounterVec
	phasesSealed  *prometheus.CounterVec
	sealTimeouts  prometheus.Counter
	phaseDuration *prometheus.HistogramVec
	sealToCommit  prometheus.Histogram
	bufferedBytes *prometheus.GaugeVec
	bufferedRecs  *prometheus.GaugeVec
	watermarkLag  *prometheus.GaugeVec
	consumerLag   *prometheus.GaugeVec
	idle          *prometheus.GaugeVec
	paused        *prometheus.GaugeVec
	pausedSeconds *prometheus.CounterVec
	globalPhase   prometheus.Gauge
	stragglerCV   prometheus.Gauge
	rebalances    prometheus.Counter
	tasksOwned    prometheus.Gauge
	taskPhase     *prometheus.GaugeVec
	rewinds       prometheus.Counter
	// streamed counts records written into an open transaction ahead of
	// their phase's seal; streamFallbacks, phases that stopped streaming
	// (align.Fallback).
	streamed        prometheus.Counter
	streamFallbacks prometheus.Counter
	dedupeFull      prometheus.Counter
}

// phaseBuckets cover phases from 10 ms to 10 minutes: a phase lasts at least
// its length (1 s by default) and a straggler makes it much longer.
var phaseBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 1.5, 2, 3, 5, 10, 30, 60, 120, 300, 600}

// NewMetrics registers the pipeline's metrics on reg and initialises every
// known label combination of topics to zero.
func NewMetrics(reg prometheus.Registerer, topics []string) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		recordsIn: f.NewCounterVec(prometheus.CounterOpts{
			Name: "phasegate_records_in_total", Help: "Records read from the fork topics, markers included, by topic.",
		}, []string{"topic"}),
		recordsOut: f.NewCounter(prometheus.CounterOpts{
			Name: "phasegate_records_out_total", Help: "Data records committed to the output topic.",
		}),
		markersOut: f.NewCounter(prometheus.CounterOpts{
			Name: "phasegate_markers_out_total", Help: "Marker records committed to the output topic.",
		}),
		duplicates: f.NewCounterVec(prometheus.CounterOpts{
			Name: "phasegate_duplicates_dropped_total", Help: "Proven duplicates dropped: retried records (same phasegate.id in the same phase) and repeated input markers.",
		}, []string{"kind"}),
		quarantined: f.NewCounterVec(prometheus.CounterOpts{
			Name: "phasegate_quarantined_total", Help: "Records committed to the quarantine topic, by reason.",
		}, []string{"reason"}),
		phasesSealed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "phasegate_phases_sealed_total", Help: "Phases with data sealed and committed, by cause.",
		}, []string{"cause"}),
		sealTimeouts: f.NewCounter(prometheus.CounterOpts{
			Name: "phasegate_seal_timeouts_total", Help: "Phases that stayed open longer than the adaptive seal timeout.",
		}),
		phaseDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "phasegate_phase_duration_seconds", Help: "Time from a phase's first record to the moment each input topic passed it.", Buckets: phaseBuckets,
		}, []string{"topic"}),
		sealToCommit: f.NewHistogram(prometheus.HistogramOpts{
			Name: "phasegate_seal_to_commit_seconds", Help: "Time from a phase being sealed to its transaction being committed.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		bufferedBytes: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "phasegate_buffered_bytes", Help: "Bytes of records held in open phases, by input topic.",
		}, []string{"topic"}),
		bufferedRecs: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "phasegate_buffered_records", Help: "Records held in open phases, by input topic.",
		}, []string{"topic"}),
		watermarkLag: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "phasegate_watermark_lag_seconds", Help: "How far the global watermark (held back by the slowest live partition) lags behind this partition's time watermark; the slowest partition shows 0.",
		}, []string{"topic", "partition"}),
		consumerLag: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "phasegate_consumer_lag_records", Help: "Records between the consumed position and the last stable offset.",
		}, []string{"topic", "partition"}),
		idle: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "phasegate_partition_idle", Help: "1 when the partition is idle (no record for the idle timeout and no lag).",
		}, []string{"topic", "partition"}),
		paused: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "phasegate_partition_paused", Help: "1 when the partition is paused, by reason (buffer: it runs ahead while the buffer is over half its bound; dedupe: the dedupe cache is over its identity bound).",
		}, []string{"topic", "partition", "reason"}),
		pausedSeconds: f.NewCounterVec(prometheus.CounterOpts{
			Name: "phasegate_paused_seconds_total", Help: "Time a partition spent paused, added when each pause ends (phasegate_partition_paused shows a pause in progress).",
		}, []string{"topic", "partition"}),
		globalPhase: f.NewGauge(prometheus.GaugeOpts{
			Name: "phasegate_global_watermark_phase", Help: "The first phase not sealed yet.",
		}),
		stragglerCV: f.NewGauge(prometheus.GaugeOpts{
			Name: "phasegate_straggler_cv", Help: "Coefficient of variation of the last sealed phase's duration across input topics; above 0.6 one branch straggles.",
		}),
		tasksOwned: f.NewGauge(prometheus.GaugeOpts{
			Name: "phasegate_tasks_owned", Help: "Tasks (groups of input partitions, docs/FLEET.md) this instance owns in the current consumer group session.",
		}),
		taskPhase: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "phasegate_task_watermark_phase", Help: "Each task's low watermark phase as last reported on the watermark topic (by whichever instance owns it); the lowest holds the global watermark.",
		}, []string{"task"}),
		rebalances: f.NewCounter(prometheus.CounterOpts{
			Name: "phasegate_rebalances_total", Help: "Consumer group sessions started (joins and rebalances).",
		}),
		streamed: f.NewCounter(prometheus.CounterOpts{
			Name: "phasegate_streamed_records_total",
			Help: "Data records written into an open transaction before their phase sealed (the oldest open phase streams; its seal adds the markers and the offsets and commits). They count in phasegate_records_out_total once committed.",
		}),
		streamFallbacks: f.NewCounter(prometheus.CounterOpts{
			Name: "phasegate_stream_fallbacks_total",
			Help: "Phases that streamed into an open transaction for a quarter of the transaction timeout without sealing: the transaction was aborted and the phase written whole at its seal.",
		}),
		rewinds: f.NewCounter(prometheus.CounterOpts{
			Name: "phasegate_rewinds_total", Help: "Rewinds to the committed offsets after a failed transaction.",
		}),
		dedupeFull: f.NewCounter(prometheus.CounterOpts{
			Name: "phasegate_dedupe_full_total", Help: "Identities recorded while the dedupe cache held only open phases over its bound.",
		}),
	}
	m.inByTopic = make(map[string]prometheus.Counter, len(topics))
	for _, t := range topics {
		m.inByTopic[t] = m.recordsIn.WithLabelValues(t)
		m.bufferedBytes.WithLabelValues(t)
		m.bufferedRecs.WithLabelValues(t)
		m.phaseDuration.WithLabelValues(t)
	}
	for _, k := range []string{"record", "marker"} {
		m.duplicates.WithLabelValues(k)
	}
	for _, r := range []markers.Reason{markers.ReasonLate, markers.ReasonMalformed, markers.ReasonStaleMarker, markers.ReasonCountMismatch} {
		m.quarantined.WithLabelValues(string(r))
	}
	for _, c := range []watermarks.Cause{watermarks.CauseMarkers, watermarks.CauseWatermark, watermarks.CauseIdle, watermarks.CauseTimeout} {
		m.phasesSealed.WithLabelValues(c.String())
	}
	return m
}

// recordIn counts one record read from topic (the per-record path: no
// label lookup).
func (m *Metrics) recordIn(topic string) {
	if c := m.inByTopic[topic]; c != nil {
		c.Inc()
	}
}

// initPartition sets a claimed partition's series to zero.
func (m *Metrics) initPartition(k align.TP) {
	part := partLabel(k.Partition)
	m.watermarkLag.WithLabelValues(k.Topic, part)
	m.consumerLag.WithLabelValues(k.Topic, part)
	m.idle.WithLabelValues(k.Topic, part)
	m.pausedSeconds.WithLabelValues(k.Topic, part)
	m.initPaused(k)
}

// initPaused sets a partition's pause series, one per reason, to zero:
// when the partition is set up and when it resumes. (On a resume it had
// deleted them by a partial match, which scans every series: at 2,048
// partitions 9 % of the CPU, hundreds of partitions resuming at once.)
func (m *Metrics) initPaused(k align.TP) {
	for _, r := range []string{watermarks.ReasonBuffer, align.ReasonDedupe} {
		m.paused.WithLabelValues(k.Topic, partLabel(k.Partition), r).Set(0)
	}
}

// observe sets the level gauges from a published status.
func (m *Metrics) observe(st *Status, topics []string) {
	bytes, recs := map[string]int64{}, map[string]int{}
	for _, ps := range st.Partitions {
		bytes[ps.Topic] += ps.BufferedBytes
		recs[ps.Topic] += ps.BufferedRecords
		lag := 0.0
		if ps.WatermarkMs > st.GlobalMs && st.GlobalMs > 0 {
			lag = float64(ps.WatermarkMs-st.GlobalMs) / 1000
		}
		m.watermarkLag.WithLabelValues(ps.Topic, partLabel(ps.Partition)).Set(lag)
	}
	for _, t := range topics {
		m.bufferedBytes.WithLabelValues(t).Set(float64(bytes[t]))
		m.bufferedRecs.WithLabelValues(t).Set(float64(recs[t]))
	}
	m.globalPhase.Set(float64(st.GlobalWatermark))
	for _, ts := range st.Tasks {
		if ts.Reported {
			m.taskPhase.WithLabelValues(strconv.Itoa(int(ts.Task))).Set(float64(ts.Low))
		}
	}
}
