package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// outWatch reads an output topic whole with read_committed while a
// stableWatch polls its last stable offsets, and keeps what the lanes and
// recovery steps analyse: every marker (partition, lane, phase, seal time)
// and every data record (partition, lane, phase, timestamp, and the
// slot:seq the paced producer wrote at the start of its value). A record's
// visibility is the first LSO poll past its offset (stable.go), its receive
// time when no poll saw it.
type outWatch struct {
	stable *stableWatch
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex // mu guards marks, data and err
	marks []markEv
	data  []dataEv
	err   error
}

// markEv is one output marker as read.
type markEv struct {
	part    int32
	lane    int32 // the marker's task on a partition with several writers, else 0
	writers int32 // 1 on a one-writer partition
	phase   uint64
	off     int64
	sealed  time.Time // the record timestamp: when its writer sealed the phase
	wmMs    int64
	recv    time.Time
}

// dataEv is one output data record as read.
type dataEv struct {
	part      int32
	lane      int32 // phasegate.task, 0 when absent
	phase     uint64
	hasPhase  bool
	off       int64
	stamp     time.Time // the record timestamp (the producer's for paced input)
	recv      time.Time
	slot, seq int64 // from the value's "slot:seq:" prefix; -1 when absent
}

// watchOutput starts reading topic from its start; stop ends it.
func watchOutput(ctx context.Context, brokers []string, topic string) (*outWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := watchStable(ctx, brokers, topic)
	if err != nil {
		cancel()
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		cancel()
		st.wait()
		return nil, err
	}
	w := &outWatch{stable: st, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cl.Close()
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			at := time.Now()
			for _, e := range fs.Errors() {
				w.mu.Lock()
				if w.err == nil {
					w.err = fmt.Errorf("output reader: %w", e.Err)
				}
				w.mu.Unlock()
			}
			fs.EachRecord(func(r *kgo.Record) { w.add(r, at) })
		}
	}()
	return w, nil
}

// stop ends the reader and the LSO poller and waits for both.
func (w *outWatch) stop() {
	w.cancel()
	<-w.done
	w.stable.wait()
}

func (w *outWatch) add(r *kgo.Record, at time.Time) {
	var isMarker bool
	var phaseH, taskH []byte
	for _, h := range r.Headers {
		switch h.Key {
		case markers.HeaderMarker:
			isMarker = string(h.Value) == "1"
		case markers.HeaderPhase:
			phaseH = h.Value
		case markers.HeaderTask:
			taskH = h.Value
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if isMarker {
		m, err := markers.DecodeOutputMarker(r.Value)
		if err != nil {
			if w.err == nil {
				w.err = fmt.Errorf("output %d/%d: %w", r.Partition, r.Offset, err)
			}
			return
		}
		ev := markEv{part: r.Partition, writers: 1, phase: m.Phase, off: r.Offset, sealed: r.Timestamp, wmMs: m.WatermarkMs, recv: at}
		if m.Writers >= 2 {
			ev.lane, ev.writers = m.Task, m.Writers
		}
		w.marks = append(w.marks, ev)
		return
	}
	ev := dataEv{part: r.Partition, off: r.Offset, stamp: r.Timestamp, recv: at, slot: -1, seq: -1}
	if p, err := strconv.ParseUint(string(phaseH), 10, 64); err == nil && phaseH != nil {
		ev.phase, ev.hasPhase = p, true
	}
	if taskH != nil {
		if t, err := markers.ParseTask(taskH); err == nil {
			ev.lane = t
		}
	}
	ev.slot, ev.seq = parseSeq(r.Value)
	w.data = append(w.data, ev)
}

// snapshot returns copies of what was read so far and the reader's first
// error.
func (w *outWatch) snapshot() ([]markEv, []dataEv, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]markEv(nil), w.marks...), append([]dataEv(nil), w.data...), w.err
}

// visible is when the record at part/off became visible to read_committed.
func (w *outWatch) visible(part int32, off int64, recv time.Time) time.Time {
	if t, ok := w.stable.visibleAt(part, off); ok && t.Before(recv) {
		return t
	}
	return recv
}

// appendSeq writes the paced producer's value prefix "slot:seq:".
func appendSeq(dst []byte, slot int, seq int64) []byte {
	dst = strconv.AppendInt(dst, int64(slot), 10)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, seq, 10)
	return append(dst, ':')
}

// parseSeq reads appendSeq's prefix; -1, -1 when the value has none.
func parseSeq(v []byte) (slot, seq int64) {
	i := bytes.IndexByte(v, ':')
	if i <= 0 {
		return -1, -1
	}
	j := bytes.IndexByte(v[i+1:], ':')
	if j <= 0 {
		return -1, -1
	}
	a, err1 := strconv.ParseInt(string(v[:i]), 10, 64)
	b, err2 := strconv.ParseInt(string(v[i+1:i+1+j]), 10, 64)
	if err1 != nil || err2 != nil {
		return -1, -1
	}
	return a, b
}
