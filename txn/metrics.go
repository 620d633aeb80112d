package txn

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Transaction results, the values of the "result" label.
const (
	resultCommitted = "committed"
	resultAborted   = "aborted"
	resultFailed    = "failed"
	resultFenced    = "fenced"
)

// Metrics are the producer's Prometheus metrics.
type Metrics struct {
	transactions *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	recreations  prometheus.Counter
}

// NewMetrics registers the producer's metrics on reg, every result label
// starting at zero.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		transactions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "phasegate_transactions_total",
			Help: "Transactions ended, by result (committed, aborted, failed, fenced).",
		}, []string{"result"}),
		latency: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "phasegate_transaction_duration_seconds",
			Help: "Time from BeginTxn to the end of the transaction, by result.",
			// A transaction writes one or more phases: milliseconds on a
			// healthy broker, up to the transaction timeout on a sick one.
			Buckets: []float64{.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"result"}),
		recreations: f.NewCounter(prometheus.CounterOpts{
			Name: "phasegate_producer_recreations_total",
			Help: "Transactional producers closed and created anew after a fatal or indefinite error.",
		}),
	}
	for _, r := range []string{resultCommitted, resultAborted, resultFailed, resultFenced} {
		m.transactions.WithLabelValues(r)
		m.latency.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) observe(result string, d time.Duration) {
	m.transactions.WithLabelValues(result).Inc()
	m.latency.WithLabelValues(result).Observe(d.Seconds())
}
