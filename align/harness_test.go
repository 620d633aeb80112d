package align

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/phasegate/phasegate/dedupe"
	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/watermarks"
)

// The harness drives a Session[string] with a fake clock and no broker: the
// message type is a label "topic/partition@offset", so a Batch reads as
// what it writes.

// base is a phase boundary: phase(base) = baseMs / 100.
const (
	baseMs   = 1_700_000_000_000
	phaseLen = 100 * time.Millisecond
	basePh   = uint64(baseMs / 100)
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

func label(k TP, off int64) string   { return fmt.Sprintf("%s/%d@%d", k.Topic, k.Partition, off) }
func phaseAt(ms int64) uint64        { return uint64((baseMs + ms) / 100) }
func tp(topic string, part int32) TP { return TP{Topic: topic, Partition: part} }

func sortedTPs(m map[TP]int64) []TP {
	return slices.SortedFunc(maps.Keys(m), func(a, b TP) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}

// harness is one session under test and the logs around it: the input
// positions, the committed offsets, and every output partition as written.
type harness struct {
	t         *testing.T
	clk       *clock
	cfg       Config
	s         *Session[string]
	log       map[TP][]in        // input partitions: the records appended so far
	next      map[TP]int64       // read position per input partition
	committed map[TP]Offset      // last committed offset and metadata
	out       [][]markers.Record // output partitions, as written by committed Batches
	pending   []Write[string]    // streamed into the open transaction, not committed
	quar      []string           // quarantine writes: "reason label"
}

// newHarness starts a session over topics (name -> partitions) with an
// output of outParts partitions; opts adjust the configuration.
func newHarness(t *testing.T, topics map[string]int32, outParts int32, opts ...func(*Config)) *harness {
	t.Helper()
	clk := &clock{t: time.UnixMilli(baseMs)}
	h := &harness{t: t, clk: clk, log: map[TP][]in{}, next: map[TP]int64{}, committed: map[TP]Offset{}, out: make([][]markers.Record, outParts)}
	var names []string
	for name, n := range topics {
		names = append(names, name)
		for p := range n {
			h.next[tp(name, p)] = 0
		}
	}
	slices.Sort(names)
	h.cfg = Config{
		InputTopics: names, OutputPartitions: outParts, QuarantinePartitions: outParts, Emitter: "test",
		Watermarks: watermarks.Config{
			PhaseLength: phaseLen, IdleTimeout: time.Second, MaxBufferBytes: 1 << 30,
			SealTimeoutMin: 10 * time.Second, SealTimeoutMax: time.Minute, Now: clk.now,
		},
		Dedupe:          dedupe.Config{MaxSealedPhases: 64, MaxIdentities: 1 << 20},
		QuarantineDelay: 200 * time.Millisecond,
	}
	for _, o := range opts {
		o(&h.cfg)
	}
	h.restart()
	return h
}

// restart builds a new session from the committed offsets, as a rewind or
// a restart does, and rewinds the read positions to them; read reads the
// records appended since.
func (h *harness) restart() {
	h.t.Helper()
	var starts []Start
	for _, k := range sortedTPs(h.next) {
		st := Start{TP: k}
		if c, ok := h.committed[k]; ok {
			st.Offset, st.Metadata = c.Offset, c.Metadata
		}
		h.next[k] = st.Offset
		starts = append(starts, st)
	}
	s, err := New[string](h.cfg, starts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.s = s
	h.pending = nil // the open transaction is aborted (by the next InitProducerId)
}

// in is one input record to feed.
type in struct {
	topic  string
	part   int32
	ms     int64  // timestamp: base + ms
	phase  string // phasegate.phase header, "" for none
	id     string // phasegate.id, "" for none
	key    string
	marker *markers.Marker // an input marker when set
	size   int
}

// record builds the Record for r at offset off, reading its headers as
// proxy does.
func (h *harness) record(r in, off int64) Record[string] {
	k := tp(r.topic, r.part)
	rec := Record[string]{Topic: r.topic, Partition: r.part, Offset: off, TimestampMs: baseMs + r.ms,
		Size: r.size, Msg: label(k, off)}
	if r.key != "" {
		rec.Key = []byte(r.key)
	}
	var hs []markers.Header
	if r.phase != "" {
		hs = append(hs, markers.Header{Key: []byte(markers.HeaderPhase), Value: []byte(r.phase)})
	}
	if r.id != "" {
		hs = append(hs, markers.Header{Key: []byte(markers.HeaderID), Value: []byte(r.id)})
	}
	if r.marker != nil {
		rec.Value = r.marker.AppendInput(nil)
		hs = markers.AppendMarkerHeaders(hs, markers.AppendPhase(nil, r.marker.Phase))
	}
	for _, hd := range hs {
		if rec.MetaErr == nil {
			rec.MetaErr = rec.Meta.Observe(hd.Key, hd.Value)
		}
	}
	if rec.MetaErr == nil {
		rec.MetaErr = rec.Meta.Check()
	}
	return rec
}

// feed appends r to its partition and reads the partition to its end; it
// returns the outcome of r.
func (h *harness) feed(r in) Outcome {
	k := tp(r.topic, r.part)
	h.log[k] = append(h.log[k], r)
	return h.read(k)
}

// read hands the records of k from its read position to the session and
// returns the last outcome.
func (h *harness) read(k TP) Outcome {
	var out Outcome
	for ; h.next[k] < int64(len(h.log[k])); h.next[k]++ {
		out = h.s.Handle(ptr(h.record(h.log[k][h.next[k]], h.next[k])))
	}
	return out
}

// readAll reads every partition to its end.
func (h *harness) readAll() {
	for _, k := range sortedTPs(h.next) {
		h.read(k)
	}
}

// caughtUp reports every partition's last stable offset: the end of its
// log (lag 0 once it is read).
func (h *harness) caughtUp() {
	lso := map[TP]int64{}
	for _, k := range h.s.Partitions() {
		lso[k] = int64(len(h.log[k]))
	}
	h.s.Lag(lso, nil)
}

// step runs Step and commits its Batch, if any.
func (h *harness) step() Step[string] {
	h.t.Helper()
	st := h.s.Step()
	if st.Batch != nil {
		h.commit(st.Batch)
	}
	return st
}

// commit carries b out as the transactional producer would and tells the
// session: a StreamBatch's writes wait in the open transaction, an
// AbortBatch drops them, and a CommitBatch writes them and its own to the
// harness's output and quarantine logs.
func (h *harness) commit(b *Batch[string]) {
	h.t.Helper()
	switch b.Kind {
	case StreamBatch:
		h.pending = append(h.pending, b.Writes...)
		h.s.Committed(b)
		return
	case AbortBatch:
		h.pending = nil
		h.s.Committed(b)
		return
	}
	all := append(h.pending, b.Writes...)
	h.pending = nil
	for _, w := range all {
		switch w.Kind {
		case Data:
			part := h.out[w.Partition]
			// As proxy writes it, from an input record whose phasegate.id is
			// its label.
			hs := []markers.Header{{Key: []byte(markers.HeaderID), Value: []byte(w.Msg)}}
			var kept markers.DataHeaders
			kept.Keep(hs[0].Key)
			hs = markers.AppendDataHeaders(hs, kept, w.Phase(), []byte(sourceOf(w.Msg)), b.Task(w))
			h.out[w.Partition] = append(part, markers.Record{Key: []byte("k"), Value: []byte(w.Msg), Offset: int64(len(part)), Headers: hs})
		case MarkerWrite:
			part := h.out[w.Partition]
			part = append(part, markers.Record{Value: w.Value(), Offset: int64(len(part)), Headers: markers.AppendMarkerHeaders[markers.Header](nil, w.Phase())})
			h.out[w.Partition] = part
		case Quarantine:
			h.quar = append(h.quar, string(w.Reason)+" "+w.Msg)
		}
	}
	for _, o := range b.Offsets {
		h.committed[o.TP] = o
	}
	h.s.Committed(b)
}

// sourceOf turns a label "t/p@o" into a phasegate.source "t/p/o".
func sourceOf(l string) string {
	var t string
	var p int32
	var o int64
	for i := len(l) - 1; i >= 0; i-- {
		if l[i] == '@' {
			fmt.Sscanf(l[i+1:], "%d", &o)
			j := i - 1
			for l[j] != '/' {
				j--
			}
			fmt.Sscanf(l[j+1:i], "%d", &p)
			t = l[:j]
			break
		}
	}
	return string(markers.AppendSource(nil, t, p, o))
}

// writes summarises a Batch: "data <label> ->q", "marker <phase> ->q
// count=N", "quarantine <reason> <label>".
func writes(b *Batch[string]) []string {
	var out []string
	for _, w := range b.Writes {
		switch w.Kind {
		case Data:
			out = append(out, fmt.Sprintf("data %s ->%d", w.Msg, w.Partition))
		case MarkerWrite:
			m, err := markers.DecodeOutputMarker(w.Value())
			if err != nil {
				out = append(out, "bad marker: "+err.Error())
				continue
			}
			out = append(out, fmt.Sprintf("marker +%d ->%d count=%d %s", m.Phase-basePh, w.Partition, m.Count, m.SealedBy))
		case Quarantine:
			out = append(out, fmt.Sprintf("quarantine %s %s ->%d", w.Reason, w.Msg, w.Partition))
		}
	}
	return out
}

// phases reads every output partition with markers.Reader and returns the
// phases (relative to basePh) with their data labels, failing the test on
// any violation of MARKERS.md 3.2.
func (h *harness) phases() map[uint64][]string {
	h.t.Helper()
	got := map[uint64][]string{}
	for q, recs := range h.out {
		r := markers.NewReader(int32(q))
		for _, rec := range recs {
			ph, err := r.Feed(rec)
			if err != nil {
				h.t.Fatalf("output partition %d offset %d: %v", q, rec.Offset, err)
			}
			for ; ph != nil; ph = r.Next() { // one record can complete several phases
				got[ph.ID-basePh] = append(got[ph.ID-basePh], recLabels(ph.Records)...)
			}
		}
		if err := r.End(); err != nil {
			h.t.Fatalf("output partition %d: %v", q, err)
		}
	}
	for _, v := range got {
		slices.Sort(v)
	}
	return got
}

func recLabels(rs []markers.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
