package deploy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Series is what a registry exports: each series name a query may use
// (histograms as _bucket, _sum and _count) with its label names.
type Series map[string]map[string]bool

// SeriesOf lists the series of gathered metric families.
func SeriesOf(families []*dto.MetricFamily) Series {
	s := Series{}
	for _, f := range families {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		names := []string{f.GetName()}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names = []string{f.GetName() + "_bucket", f.GetName() + "_sum", f.GetName() + "_count"}
			labels = mergeLabels(labels, "le")
		case dto.MetricType_SUMMARY:
			names = append(names, f.GetName()+"_sum", f.GetName()+"_count")
			labels = mergeLabels(labels, "quantile")
		}
		for _, n := range names {
			s[n] = labels
		}
	}
	return s
}

func mergeLabels(m map[string]bool, l string) map[string]bool {
	m[l] = true
	return m
}

// metricName finds the metric names of a PromQL expression: the
// identifiers of phasegate's, Go's and the process collector's namespaces.
var metricName = regexp.MustCompile(`\b(?:phasegate|go|process)_[a-zA-Z0-9_:]*`)

// grouping finds the labels of by (...) and without (...) clauses.
var grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)

// matcher finds the label names of selectors: name{label="..."}.
var matcher = regexp.MustCompile(`\{([^}]*)\}`)

// CheckExpr returns why expr queries something s does not export: no
// metric name at all, a metric name s lacks, or a label none of the
// expression's metrics carry.
func CheckExpr(expr string, s Series) error {
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		return fmt.Errorf("%q names no phasegate_, go_ or process_ metric", expr)
	}
	labels := map[string]bool{}
	for _, n := range names {
		ls, ok := s[n]
		if !ok {
			return fmt.Errorf("%q: %s is not exported by the sidecar", expr, n)
		}
		for l := range ls {
			labels[l] = true
		}
	}
	var used []string
	for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
		used = append(used, strings.Split(m[1], ",")...)
	}
	for _, m := range matcher.FindAllStringSubmatch(expr, -1) {
		for _, kv := range strings.Split(m[1], ",") {
			name, _, _ := strings.Cut(kv, "=")
			used = append(used, strings.TrimRight(name, "!~"))
		}
	}
	for _, l := range used {
		if l = strings.TrimSpace(l); l != "" && !labels[l] {
			return fmt.Errorf("%q: label %q is on none of %v", expr, l, slices.Compact(slices.Sorted(slices.Values(names))))
		}
	}
	return nil
}

// Dashboard is the part of a Grafana dashboard the check reads.
type Dashboard struct {
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is a Grafana panel; rows nest panels.
type Panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []Panel `json:"panels"`
}

// Exprs returns every query of a dashboard, with its panel's title.
func Exprs(data []byte) (map[string]string, error) {
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out[t.Expr] = p.Title
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out, nil
}
