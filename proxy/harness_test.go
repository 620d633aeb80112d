package proxy_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/internal/inproc"
	"github.com/phasegate/phasegate/internal/kafkatest"
	"github.com/phasegate/phasegate/internal/verify"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/proxy"
	"github.com/phasegate/phasegate/watermarks"
)

// env is one test's cluster, topics, input log and sidecar settings.
type env struct {
	t       *testing.T
	cluster *kfake.Cluster
	brokers []string
	cfg     proxy.Config
	prod    *kafkatest.Producer
	inputs  []verify.Input
	sidecar *inproc.Sidecar
}

const phaseLen = 100 * time.Millisecond

// newEnv starts kfake with the fork topics (name -> partitions) and an
// output of outParts partitions, and a config with short timeouts.
func newEnv(t *testing.T, forks map[string]int32, outParts int32) *env {
	t.Helper()
	topics := map[string]int32{"out": outParts, "out.quarantine": outParts}
	var inputs []string
	for name, n := range forks {
		topics[name] = n
		inputs = append(inputs, name)
	}
	c, err := kafkatest.Kfake(topics)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	prod, err := kafkatest.NewProducer(c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	e := &env{t: t, cluster: c, brokers: c.ListenAddrs(), prod: prod}
	e.cfg = proxy.Config{
		InputTopics: inputs, OutputTopic: "out", QuarantineTopic: "out.quarantine", WatermarkTopic: "phasegate.watermarks",
		GroupID: "phasegate", TransactionalID: "phasegate-test",
		Watermarks: watermarks.Config{
			PhaseLength: phaseLen, MaxOutOfOrderness: 0, IdleTimeout: 500 * time.Millisecond,
			MaxBufferBytes: 64 << 20, SealTimeoutMin: 10 * time.Second, SealTimeoutMax: time.Minute,
			SealPolicy: watermarks.PolicyWait, Now: time.Now,
		},
		Dedupe: dedupe.Config{MaxSealedPhases: 64, MaxIdentities: 1 << 20},
		Tick:   10 * time.Millisecond, LagInterval: 100 * time.Millisecond, QuarantineDelay: 200 * time.Millisecond,
	}
	return e
}

func (e *env) logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("PHASEGATE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// start runs a sidecar; stop with e.stop (also at cleanup).
func (e *env) start() {
	e.t.Helper()
	s, err := inproc.StartSidecar(inproc.KafkaFor(e.brokers), e.cfg, e.logger())
	if err != nil {
		e.t.Fatal(err)
	}
	e.sidecar = s
	e.t.Cleanup(func() {
		if e.sidecar == s {
			e.stop()
		}
	})
}

func (e *env) stop() {
	e.t.Helper()
	if err := e.sidecar.Stop(); err != nil {
		e.t.Errorf("sidecar stopped with: %v", err)
	}
	e.sidecar = nil
}

// rec is one input record to write.
type rec struct {
	topic     string
	partition int32
	ts        time.Time
	phaseHdr  string // phasegate.phase header value, "" for none
	id        string // phasegate.id, "" for none
	key       string
	marker    *markers.Marker // an input marker when set
	pad       int             // bytes added to the value
	task      string          // a phasegate.task header on the input, "" for none
}

// write produces recs in order and logs them as inputs for the verifier.
func (e *env) write(recs ...rec) {
	e.t.Helper()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: r.topic, Partition: r.partition, Timestamp: r.ts, Value: []byte(fmt.Sprintf("v-%s-%d-%d", r.topic, r.partition, i))}
		kr.Value = append(kr.Value, make([]byte, r.pad)...)
		if r.key != "" {
			kr.Key = []byte(r.key)
		}
		if r.phaseHdr != "" {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: markers.HeaderPhase, Value: []byte(r.phaseHdr)})
		}
		if r.id != "" {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: markers.HeaderID, Value: []byte(r.id)})
		}
		if r.task != "" {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: markers.HeaderTask, Value: []byte(r.task)})
		}
		if r.marker != nil {
			kr.Key = nil
			kr.Value = r.marker.AppendInput(nil)
			kr.Headers = append(kr.Headers, kafkatest.Headers(markers.AppendMarkerHeaders[markers.Header](nil, markers.AppendPhase(nil, r.marker.Phase)))...)
		}
		krs[i] = kr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.prod.Produce(ctx, krs...); err != nil {
		e.t.Fatal(err)
	}
	for i, kr := range krs {
		r := recs[i]
		in := verify.Input{Source: kafkatest.Source(kr), Marker: r.marker != nil}
		in.ID = r.id
		if in.ID == "" {
			in.ID = in.Source
		}
		if r.phaseHdr != "" {
			in.Phase, _ = strconv.ParseUint(r.phaseHdr, 10, 64)
		} else {
			in.Phase = phaseOf(r.ts)
		}
		e.inputs = append(e.inputs, in)
	}
}

// closeAll writes an input marker for phase on every partition of every
// fork: in strict mode only markers (or later records) seal the last phase.
func (e *env) closeAll(forks map[string]int32, phase uint64) {
	e.t.Helper()
	var recs []rec
	for topic, n := range forks {
		for p := range n {
			recs = append(recs, rec{topic: topic, partition: p, marker: &markers.Marker{Phase: phase, Partition: p}})
		}
	}
	e.write(recs...)
}

// phaseOf is the phase of a timestamp.
func phaseOf(ts time.Time) uint64 { return uint64(ts.UnixMilli() / phaseLen.Milliseconds()) }

// read reads the output and the quarantine with read_committed and checks
// them with the shared verifier.
func (e *env) read() (*verify.Output, []markers.Record) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := kafkatest.ReadTopic(ctx, e.brokers, "out", true, 300*time.Millisecond)
	if err != nil {
		e.t.Fatal(err)
	}
	q, err := kafkatest.ReadTopic(ctx, e.brokers, "out.quarantine", true, 300*time.Millisecond)
	if err != nil {
		e.t.Fatal(err)
	}
	var quar []markers.Record
	for _, p := range q {
		quar = append(quar, p...)
	}
	return verify.CheckOutput(out), quar
}

// settle waits until every input is accounted for (or timeout), then checks
// every guarantee and returns the accounting.
func (e *env) settle(timeout time.Duration) (*verify.Output, *verify.Accounting) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, quar := e.read()
		acc := verify.Account(e.inputs, out, quar)
		if acc.Err() == nil || time.Now().After(deadline) {
			if err := out.Err(); err != nil {
				e.t.Fatalf("output breaks MARKERS.md 3.2:\n%v", err)
			}
			if err := acc.Err(); err != nil {
				e.t.Fatalf("input accounting after %s:\n%v", timeout, err)
			}
			e.t.Logf("%s phases=%d", acc, len(out.Phases))
			return out, acc
		}
	}
}

// at returns a timestamp inside phase n (phase length phaseLen), offset ms in.
func at(base time.Time, n int, offsetMs int) time.Time {
	return base.Add(time.Duration(n)*phaseLen + time.Duration(offsetMs)*time.Millisecond)
}

// phaseBase is a phase-aligned time in the recent past.
func phaseBase() time.Time {
	return time.Now().Add(-time.Hour).Truncate(phaseLen)
}

// waitFor polls cond until it holds or timeout passes (internal_test.go).
var waitFor = proxy.WaitFor

// counter reads a counter of the running sidecar's registry.
func counter(t *testing.T, e *env, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := e.sidecar.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
				}
				if !found {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return 0
}

// readOutput reads the output topic with read_committed.
func readOutput(t *testing.T, e *env) [][]markers.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := kafkatest.ReadTopic(ctx, e.brokers, "out", true, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// startMember runs one more instance of the group, a static member named
// name with a transactional ID of its own; the caller stops it.
func (e *env) startMember(k proxy.Kafka, name string) *inproc.Sidecar {
	e.t.Helper()
	cfg := e.cfg
	cfg.TransactionalID, cfg.InstanceID = "phasegate-"+name, name
	s, err := inproc.StartSidecar(k, cfg, e.logger())
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// partitionsOwned is how many input partitions an instance's session holds.
func partitionsOwned(s *inproc.Sidecar) int { return len(s.Pipeline.Status().Partitions) }

// settleWhole settles the output and checks it holds want (phase -> records
// per topic) and every input record, input markers aside, across what (a
// hand-over, a rebalance).
func (e *env) settleWhole(want map[uint64]map[string]int64, what string) {
	e.t.Helper()
	out, acc := e.settle(20 * time.Second)
	checkAligned(e.t, out, want)
	if acc.Out+acc.Markers != len(e.inputs) {
		e.t.Fatalf("published %d of %d records (and %d input markers) across %s", acc.Out, len(e.inputs)-acc.Markers, acc.Markers, what)
	}
}
