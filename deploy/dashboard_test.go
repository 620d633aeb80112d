package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/phasegate/phasegate/proxy"
	"github.com/phasegate/phasegate/txn"
)

// exported registers what the sidecar registers (cmd/sidecar: the Go and
// process collectors, proxy.NewMetrics, and txn.NewMetrics, which
// proxy.Dial adds) on a fresh registry and lists its series: the gathered
// families, and the descriptions of every registered collector, because a
// vector labelled by partition has no series until partitions are assigned.
func exported(t *testing.T) Series {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recorder{Registerer: reg, s: Series{}}
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	proxy.NewMetrics(rec, []string{"orders", "payments"})
	txn.NewMetrics(rec)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for n, ls := range SeriesOf(fams) {
		rec.s[n] = ls
	}
	if rec.described == 0 {
		t.Fatal("no collector described a phasegate_ metric")
	}
	return rec.s
}

// recorder passes registrations on and notes each collector's metric names
// and label names from its descriptions.
type recorder struct {
	prometheus.Registerer
	s         Series
	described int
}

// descName and descLabels read a prometheus.Desc's String().
var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		name := descName.FindStringSubmatch(d.String())
		if name == nil || !strings.HasPrefix(name[1], "phasegate_") {
			continue
		}
		labels := map[string]bool{}
		if m := descLabels.FindStringSubmatch(d.String()); m != nil && m[1] != "" {
			for _, l := range strings.Split(m[1], ",") {
				labels[l] = true
			}
		}
		names := []string{name[1]}
		switch c.(type) {
		case *prometheus.HistogramVec, prometheus.Histogram:
			labels["le"] = true
			names = []string{name[1] + "_bucket", name[1] + "_sum", name[1] + "_count"}
		}
		for _, n := range names {
			r.s[n] = labels
		}
		r.described++
	}
	return r.Registerer.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Every query of the Grafana dashboard names metrics, and labels, the
// sidecar exports.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	s := exported(t)
	data, err := os.ReadFile("grafana/phasegate.json")
	if err != nil {
		t.Fatal(err)
	}
	exprs, err := Exprs(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) < 10 {
		t.Fatalf("the dashboard has %d queries", len(exprs))
	}
	phasegate := 0
	for expr, panel := range exprs {
		if err := CheckExpr(expr, s); err != nil {
			t.Errorf("panel %q: %v", panel, err)
		}
		if strings.Contains(expr, "phasegate_") {
			phasegate++
		}
	}
	t.Logf("grafana/phasegate.json: %d queries, %d on phasegate_* metrics, all exported (%d series on a fresh registry)", len(exprs), phasegate, len(s))
}

// The check rejects a query of anything the sidecar does not export.
func TestCheckExprRejects(t *testing.T) {
	s := exported(t)
	cases := []struct{ name, expr, want string }{
		{"accepted", `sum by (topic) (rate(phasegate_records_in_total[5m]))`, ""},
		{"accepted histogram", `histogram_quantile(0.99, sum by (le, topic) (rate(phasegate_phase_duration_seconds_bucket[5m])))`, ""},
		{"unknown metric", `sum(rate(phasegate_records_dropped_total[5m]))`, "not exported"},
		{"histogram without suffix", `rate(phasegate_phase_duration_seconds[5m])`, "not exported"},
		{"unknown label in by", `sum by (key) (rate(phasegate_records_in_total[5m]))`, `label "key"`},
		{"unknown label in a selector", `phasegate_consumer_lag_records{group="x"}`, `label "group"`},
		{"no metric", `vector(1)`, "names no"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckExpr(c.expr, s)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
