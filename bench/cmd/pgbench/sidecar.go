package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sidecar is a running phasegate binary and its HTTP address.
type sidecar struct {
	p    *proc
	base string // http://127.0.0.1:port
	http *http.Client
}

// sidecarEnv is the configuration of one sidecar run.
type sidecarEnv struct {
	Brokers     []string
	Inputs      []string
	Output      string
	Quarantine  string
	Group       string
	TxnID       string // PHASEGATE_TRANSACTIONAL_ID (and so the static instance ID); "" = Group
	PhaseLength time.Duration
	MaxBuffer   int64 // 0: the default
	Routing     string
	Pprof       bool
	Extra       []string // more variables, e.g. GOMEMLIMIT=128MiB (BENCH_SIDECAR_ENV)
	Bin         string   // the binary when not BENCH_SIDECAR (BENCH_COMPARE)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// defaultOutOfOrderness is the sidecar's PHASEGATE_MAX_OUT_OF_ORDERNESS.
const defaultOutOfOrderness = 200 * time.Millisecond

// outOfOrderness is the bound the bench sets for a phase length: none (the
// default, 200 ms) for phases above it, half the phase otherwise, since the
// sidecar refuses a bound of a phase or more.
func outOfOrderness(phase time.Duration) time.Duration {
	if phase > defaultOutOfOrderness {
		return 0
	}
	return phase / 2
}

// startSidecar execs bin with the configuration in the environment; its
// log goes to logDir/<transactional ID>.log (appended to, so a restart with
// the same ID keeps the log of the run before it).
func startSidecar(bin, logDir string, e sidecarEnv) (*sidecar, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	txnID := e.TxnID
	if txnID == "" {
		txnID = e.Group
	}
	env := []string{
		"PHASEGATE_BROKERS=" + strings.Join(e.Brokers, ","),
		"PHASEGATE_INPUT_TOPICS=" + strings.Join(e.Inputs, ","),
		"PHASEGATE_OUTPUT_TOPIC=" + e.Output,
		"PHASEGATE_QUARANTINE_TOPIC=" + e.Quarantine,
		"PHASEGATE_GROUP_ID=" + e.Group,
		"PHASEGATE_TRANSACTIONAL_ID=" + txnID,
		"PHASEGATE_PHASE_LENGTH=" + e.PhaseLength.String(),
		"PHASEGATE_HTTP_ADDR=" + addr,
		"PHASEGATE_PPROF=" + strconv.FormatBool(e.Pprof),
		"PHASEGATE_ALLOW_SPLIT_KEYS=true", // forks of 3 and 2 partitions; the bench joins nothing by key
	}
	if e.MaxBuffer > 0 {
		env = append(env, "PHASEGATE_MAX_BUFFER_BYTES="+strconv.FormatInt(e.MaxBuffer, 10))
	}
	if ooo := outOfOrderness(e.PhaseLength); ooo > 0 {
		env = append(env, "PHASEGATE_MAX_OUT_OF_ORDERNESS="+ooo.String())
	}
	env = append(env, e.Extra...) // later entries win (BENCH_SIDECAR_ENV may set the bound)
	if e.Routing != "" {
		env = append(env, "PHASEGATE_ROUTING="+e.Routing)
	}
	p, err := startProc(bin, nil, env, filepath.Join(logDir, txnID+".log"), nil)
	if err != nil {
		return nil, err
	}
	return &sidecar{p: p, base: "http://" + addr, http: &http.Client{Timeout: 5 * time.Second}}, nil
}

// get fetches path from the sidecar's HTTP server.
func (s *sidecar) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "identity") // spare the sidecar the gzip
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return b, nil
}

// metrics scrapes /metrics and sums each metric over its labels; with
// names, only those metrics (promhttp's name[] filter: the sidecar skips
// encoding the rest, such as thousands of per-partition series).
func (s *sidecar) metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	path := "/metrics"
	if len(names) > 0 {
		path += "?" + url.Values{"name[]": names}.Encode()
	}
	b, err := s.get(ctx, path)
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(b)), nil
}

// sample is one line of a Prometheus text exposition: the metric name,
// its labels as written (without the braces) and its value.
type sample struct {
	name, labels string
	value        float64
}

// samples parses a Prometheus text exposition; comments and unparsable
// lines are skipped.
func samples(text string) []sample {
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		var sm sample
		rest := ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			sm.name, sm.labels, rest = line[:i], line[i+1:j], line[j+1:]
		} else if i := strings.IndexAny(line, " \t"); i >= 0 {
			sm.name, rest = line[:i], line[i:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sm.value = v
		out = append(out, sm)
	}
	return out
}

// parseMetrics sums the samples of each metric name of a Prometheus text
// exposition over all label sets.
func parseMetrics(text string) map[string]float64 {
	out := map[string]float64{}
	for _, sm := range samples(text) {
		out[sm.name] += sm.value
	}
	return out
}

// bucketQuantile reads histogram name's cumulative buckets from a
// Prometheus text exposition, summed over its label sets, and returns the
// upper bound of the first bucket holding at least q of the observations:
// the quantile rounded up to a bucket bound (the histogram keeps nothing
// finer). It returns +Inf when only the +Inf bucket reaches q, and NaN
// when the histogram has no observation.
func bucketQuantile(text, name string, q float64) float64 {
	byLe := map[float64]float64{}
	for _, sm := range samples(text) {
		i := strings.Index(sm.labels, `le="`)
		if sm.name != name+"_bucket" || i < 0 {
			continue
		}
		le, err := strconv.ParseFloat(strings.SplitN(sm.labels[i+4:], `"`, 2)[0], 64)
		if err == nil {
			byLe[le] += sm.value
		}
	}
	les := slices.Sorted(maps.Keys(byLe))
	if len(les) == 0 || byLe[les[len(les)-1]] == 0 {
		return math.NaN()
	}
	total := byLe[les[len(les)-1]]
	for _, le := range les {
		if byLe[le] >= q*total {
			return le
		}
	}
	return math.Inf(1)
}

// phaseStatus is the part of /phases the benchmark reads.
type phaseStatus struct {
	Joined            bool  `json:"joined"`
	PeakBufferedBytes int64 `json:"peak_buffered_bytes"`
	MaxBufferBytes    int64 `json:"max_buffer_bytes"`
}

func (s *sidecar) phases(ctx context.Context) (phaseStatus, error) {
	var st phaseStatus
	b, err := s.get(ctx, "/phases")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// waitJoined polls /phases until the sidecar is in its group.
func (s *sidecar) waitJoined(ctx context.Context) error {
	for {
		if st, err := s.phases(ctx); err == nil && st.Joined {
			return nil
		}
		if s.p.exited() {
			return fmt.Errorf("sidecar exited before joining: %v (log %s)", s.p.err, s.p.log.Name())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sidecar did not join its group: %w (log %s)", ctx.Err(), s.p.log.Name())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// profile saves the sidecar's profile path (e.g. /debug/pprof/allocs) to file.
func (s *sidecar) profile(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return err
	}
	c := http.Client{} // a CPU profile takes as long as it asks
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
