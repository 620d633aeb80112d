package align

import (
	"fmt"
	"time"

	"github.com/phasegate/phasegate/markers"
	"github.com/phasegate/phasegate/watermarks"
)

// Streaming the oldest open phase (Config.StreamFor, docs/DESIGN.md, "Latency").
//
// The phase streamed is the global watermark's phase, Global: no partition
// can still write a record of a lower phase (it would be late), and no
// lower phase can seal after it, so what is streamed comes after every
// marker of the phases before it and before its own (MARKERS.md 3.2). A
// phase is streamed only while nothing sealed waits: the sealed phases'
// CommitBatch comes first. Records of later phases buffer as before. The
// phase's records stay buffered (and count against the memory bound)
// until its CommitBatch commits: a fallback writes them again, and a
// failed transaction rebuilds them from the committed offsets.
//
// While a phase streams, queued quarantine records wait for its seal (a
// quarantine-only commit would make half the phase visible), at most
// StreamFor longer than without streaming.
//
// A session that shares an output partition with another instance's
// writers (key routing over several instances, MARKERS.md 3.3) streams
// phase P only once every writer has committed its markers of every phase
// below P (FleetMarked): its open transaction holds that partition's last
// stable offset back, and with it any marker another writer commits
// after the transaction's first record. Of phase P, whose marker a reader
// waits for from every writer anyway, that costs nothing; of a phase
// below P it would hide a whole phase for as long as P streams.

// streamState is where the oldest open phase stands.
type streamState uint8

const (
	streamIdle streamState = iota // no phase streams
	streamOn                      // phase streams into the open transaction
	streamFell                    // phase fell back: it waits for its seal
)

// stream is the phase streaming into the open transaction.
type stream struct {
	state streamState
	phase uint64
	// written counts the phase's buffered records a StreamBatch took.
	written int
	since   time.Time // the first StreamBatch
	// seal carries the phase's phasegate.phase header for the streamed
	// writes until the phase's own Sealed exists.
	seal *Sealed
}

// sealing ends the stream when phase, the first phase of a CommitBatch,
// seals, and returns how many of its records were streamed. A stream of
// another phase is a broken invariant: its records would precede a lower
// phase's markers.
func (st *stream) sealing(phase uint64) int {
	n := 0
	switch {
	case st.state == streamOn && st.phase != phase:
		panic(fmt.Sprintf("align: phase %d streams but phase %d seals first", st.phase, phase))
	case st.state == streamOn:
		n = st.written
	case st.state == streamFell && st.phase != phase:
		return 0 // the fallen-back phase is not in this Batch
	}
	*st = stream{}
	return n
}

// Fallback is a phase that stopped streaming: it had not sealed StreamFor
// after its first StreamBatch. Its records wait for its seal like those of
// later phases, and the open transaction is aborted (the Step's
// AbortBatch).
type Fallback struct {
	Phase uint64
	// Streamed is how many records the aborted transaction held.
	Streamed int
	Open     time.Duration
	// Holders are the partitions then holding the watermark back.
	Holders []TP
}

// next is the Batch of a Step with none in flight: the sealed phases (or
// due quarantine records, when no phase streams), else a fallback's
// AbortBatch, else a StreamBatch; nil when none is due.
func (s *Session[M]) next() (*Batch[M], *Fallback) {
	on := s.stream.state == streamOn
	switch {
	case len(s.sealed) > 0 || !on && s.quarantineDue():
		return s.build(), nil
	case on && s.now().Sub(s.stream.since) >= s.cfg.StreamFor:
		f := &Fallback{Phase: s.stream.phase, Streamed: s.stream.written, Open: s.now().Sub(s.stream.since)}
		for _, ps := range s.byP {
			if ps.holds {
				f.Holders = append(f.Holders, ps.TP)
			}
		}
		s.stream.state, s.stream.written = streamFell, 0
		return &Batch[M]{Kind: AbortBatch, lanes: &s.lanes}, f
	}
	return s.streamBatch(), nil
}

// streamBatch takes the records of the oldest open phase not yet streamed
// into a StreamBatch; nil when there are none or the phase may not stream.
func (s *Session[M]) streamBatch() *Batch[M] {
	g := s.tracker.Global()
	if s.cfg.StreamFor <= 0 || s.lanes.shared && g > s.fleetMarked {
		return nil
	}
	ph := s.phases[g]
	if ph == nil || s.stream.state != streamIdle && (s.stream.phase != g || s.stream.state == streamFell) {
		return nil
	}
	if s.stream.state == streamIdle {
		s.stream = stream{state: streamOn, phase: g, since: s.now(),
			seal: &Sealed{Seal: watermarks.Seal{Phase: g}, header: markers.AppendPhase(nil, g)}}
	}
	if len(ph.items) == s.stream.written {
		return nil
	}
	b := &Batch[M]{Kind: StreamBatch, lanes: &s.lanes, Writes: make([]Write[M], 0, len(ph.items)-s.stream.written)}
	for _, it := range ph.items[s.stream.written:] {
		b.Writes = append(b.Writes, s.dataWrite(it, s.lanes.of(s.byP[it.p], it.out), s.stream.seal))
	}
	s.stream.written = len(ph.items)
	return b
}
