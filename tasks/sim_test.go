package tasks

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/fleet"
	"github.com/phasegate/phasegate/markers"
)

// TestFleetSimulation puts the three pieces of issue 11's groundwork
// together without Kafka: tasks of a Layout read their input partitions,
// report to a shared watermark log (fleet.Report), each reads it through
// its own lagging fleet.View, seals phase N only below min(view global,
// its own low) (docs/FLEET.md F6), marks every phase known to hold data
// (F7) with the marker fields Layout.MarkerFields gives, and the writers'
// records interleave at random on each output partition. A markers.Reader
// per partition must then find no violation, return every input record
// exactly once in its phase on its partition, and return every phase that
// holds data anywhere on every partition. Tasks also move to a new owner
// that resumes from their committed offsets. A failure names the seed.
// Without F6 (sealing below the view's global only) 6 of the 120 runs
// report late data; without F7 (no DataPhases) 118 lose phases.
func TestFleetSimulation(t *testing.T) {
	moves, ran := 0, 0
	for _, r := range []align.Routing{align.RoutePartition, align.RouteKey} {
		for seed := uint64(1); seed <= 60; seed++ {
			t.Run(fmt.Sprintf("%v/seed=%d", r, seed), func(t *testing.T) {
				moves += simulate(t, seed, r)
				ran++
			})
		}
	}
	if ran == 120 && !t.Failed() && moves == 0 {
		t.Fatal("no run moved a task")
	}
	t.Logf("%d task moves", moves)
}

type simRec struct {
	topic string
	part  int32
	off   int
	phase uint64
	key   string
}

type simTask struct {
	id     ID
	lows   map[Partition]uint64 // per input partition: the lowest phase it has not passed
	open   map[uint64][]simRec  // buffered data by phase
	marked uint64               // every phase below has been handled
	view   *fleet.View
	seen   int // reports of the log applied to view
	outbox map[int32][]markers.Record
	// committed is, per input partition, the offset a new owner resumes
	// from: the first record still buffered, as the pipeline commits.
	committed map[Partition]int
}

func (s *simTask) low() uint64 {
	first := true
	var low uint64
	for _, l := range s.lows {
		if first || l < low {
			low, first = l, false
		}
	}
	return low
}

func simulate(t *testing.T, seed uint64, routing align.Routing) (moves int) {
	rng := rand.New(rand.NewPCG(seed, 11))
	topo := Topology{Inputs: []Input{{"a", 4}, {"b", 2}, {"c", 1}}, OutputPartitions: 3, Routing: routing}
	l := mustLayout(t, topo)
	route := func(rec simRec) int32 {
		if routing == align.RouteKey {
			h := fnv.New32a()
			h.Write([]byte(rec.key))
			return int32(h.Sum32() % uint32(topo.OutputPartitions))
		}
		return rec.part % topo.OutputPartitions
	}

	// Inputs: non-decreasing phases per partition, some partitions empty.
	input := map[Partition][]simRec{}
	var maxPhase uint64
	for _, in := range topo.Inputs {
		for p := range in.Partitions {
			ph := uint64(1 + rng.IntN(3))
			for off := range rng.IntN(12) {
				ph += uint64(rng.IntN(3)) / 2
				maxPhase = max(maxPhase, ph)
				input[Partition{in.Topic, p}] = append(input[Partition{in.Topic, p}],
					simRec{topic: in.Topic, part: p, off: off, phase: ph, key: "k" + strconv.Itoa(rng.IntN(9))})
			}
		}
	}
	end := maxPhase + 1 // every partition passes everything at the end (an input marker)

	ts := make([]*simTask, l.Len())
	for i := range ts {
		s := &simTask{id: ID(i), lows: map[Partition]uint64{}, open: map[uint64][]simRec{},
			view: fleet.NewView(l.Len(), l.Fingerprint()), outbox: map[int32][]markers.Record{}, committed: map[Partition]int{}}
		s.view.SetGeneration(1)
		for _, p := range l.Partitions(ID(i)) {
			s.lows[p] = 0
		}
		ts[i] = s
	}
	var log []fleet.Report
	gen := int32(1)
	pos := map[Partition]int{}
	logs := make([][]markers.Record, topo.OutputPartitions)

	deliver := func(p Partition) {
		rec := input[p][pos[p]]
		pos[p]++
		s := ts[rec.part%int32(l.Len())]
		s.open[rec.phase] = append(s.open[rec.phase], rec)
		s.lows[p] = rec.phase // it passed every phase below
		if pos[p] == len(input[p]) {
			s.lows[p] = end
		}
	}
	report := func(s *simTask) {
		log = append(log, fleet.Report{Task: int32(s.id), Layout: l.Fingerprint(), Low: s.low(), High: s.low(),
			Open: slices.Sorted(maps.Keys(s.open)), Owner: "i" + strconv.Itoa(int(s.id)), Generation: gen})
	}
	catchUp := func(s *simTask, upto int) {
		for ; s.seen < upto; s.seen++ {
			s.view.Apply(log[s.seen])
		}
	}
	seal := func(s *simTask) {
		global, _, held := s.view.Advance()
		if held >= 0 {
			return
		}
		bound := min(global, s.low())
		if bound <= s.marked {
			return
		}
		phases := s.view.DataPhases(s.marked, bound)
		for ph := range s.open {
			if ph < bound && !slices.Contains(phases, ph) {
				phases = append(phases, ph)
			}
		}
		slices.Sort(phases)
		for _, ph := range phases {
			if ph < s.marked {
				t.Fatalf("task %d: data of phase %d below its marked %d: late", s.id, ph, s.marked)
			}
			for _, o := range l.Outputs(s.id) {
				task, writers, _ := l.MarkerFields(s.id, o)
				var n int64
				for _, rec := range s.open[ph] {
					if route(rec) != o {
						continue
					}
					var taskHdr []byte
					if writers > 0 {
						taskHdr = strconv.AppendInt(nil, int64(task), 10)
					}
					hs := markers.AppendDataHeaders[markers.Header](nil, markers.DataHeaders{}, markers.AppendPhase(nil, ph),
						markers.AppendSource(nil, rec.topic, rec.part, int64(rec.off)), taskHdr)
					s.outbox[o] = append(s.outbox[o], markers.Record{Key: []byte(rec.key), Value: []byte("v"), Headers: hs})
					n++
				}
				m := markers.Marker{Phase: ph, Partition: o, Count: n, HasCount: true, Sources: map[string]int64{},
					SealedBy: markers.SealedByWatermark, Emitter: "i" + strconv.Itoa(int(s.id)), Task: task, Writers: writers}
				for _, rec := range s.open[ph] {
					if route(rec) == o {
						m.Sources[rec.topic]++
					}
				}
				if err := m.ValidateOutput(); err != nil {
					t.Fatal(err)
				}
				s.outbox[o] = append(s.outbox[o], markers.Record{Value: m.AppendOutput(nil),
					Headers: markers.AppendMarkerHeaders[markers.Header](nil, markers.AppendPhase(nil, ph))})
			}
			delete(s.open, ph)
		}
		s.marked = bound
		for p := range s.lows { // commit: offsets up to the first record still buffered
			s.committed[p] = pos[p]
			for _, recs := range s.open {
				for _, rec := range recs {
					if rec.topic == p.Topic && rec.part == p.Partition && rec.off < s.committed[p] {
						s.committed[p] = rec.off
					}
				}
			}
		}
	}
	// move hands task s to a new owner (in the same long-lived instance
	// view, which already holds the former owner's reports): it resumes
	// from the committed offsets and last sealed phase, in a new group
	// generation, and reports before sealing anything (F3).
	move := func(s *simTask) {
		moves++
		s.open = map[uint64][]simRec{}
		for p := range s.lows {
			pos[p] = s.committed[p]
			s.lows[p] = s.marked // what the new owner knows before it reads
		}
		gen++
		for _, x := range ts {
			x.view.SetGeneration(gen)
		}
		report(s)
	}
	flush := func(s *simTask, o int32) {
		if len(s.outbox[o]) > 0 {
			logs[o] = append(logs[o], s.outbox[o][0])
			s.outbox[o] = s.outbox[o][1:]
		}
	}

	// Run: random interleaving of every action, then drain.
	var parts []Partition // every input partition, empty ones too
	for id := range ID(l.Len()) {
		parts = append(parts, l.Partitions(id)...)
	}
	remaining := func() bool {
		for _, p := range parts {
			if pos[p] < len(input[p]) {
				return true
			}
		}
		return false
	}
	for remaining() {
		s := ts[rng.IntN(len(ts))]
		switch rng.IntN(6) {
		case 0, 1:
			if p := parts[rng.IntN(len(parts))]; pos[p] < len(input[p]) {
				deliver(p)
			}
		case 2:
			report(s)
		case 3:
			catchUp(s, s.seen+rng.IntN(len(log)-s.seen+1))
		case 4:
			seal(s)
			flush(s, int32(rng.IntN(int(topo.OutputPartitions))))
		case 5:
			if rng.IntN(20) == 0 {
				move(s)
			}
		}
	}
	for _, p := range parts { // partitions without records pass everything too
		ts[ID(p.Partition%int32(l.Len()))].lows[p] = end
	}
	for round := 0; round < 3; round++ {
		for _, s := range ts {
			report(s)
		}
		for _, s := range ts {
			catchUp(s, len(log))
			seal(s)
		}
	}
	for busy := true; busy; {
		busy = false
		for _, s := range ts {
			for o := range topo.OutputPartitions {
				if len(s.outbox[o]) > 0 && rng.IntN(2) == 0 {
					flush(s, o)
				}
				busy = busy || len(s.outbox[o]) > 0
			}
		}
	}

	checkSimOutput(t, l, logs, input, route)
	return moves
}

// checkSimOutput reads every output partition as a join would.
func checkSimOutput(t *testing.T, l *Layout, logs [][]markers.Record, input map[Partition][]simRec, route func(simRec) int32) {
	t.Helper()
	dataPhases := map[uint64]bool{}
	want := map[string]simRec{}
	for _, recs := range input {
		for _, rec := range recs {
			dataPhases[rec.phase] = true
			want[string(markers.AppendSource(nil, rec.topic, rec.part, int64(rec.off)))] = rec
		}
	}
	got := map[string]bool{}
	for o, recs := range logs {
		r := markers.NewReader(int32(o))
		returned := map[uint64]bool{}
		take := func(p *markers.Phase, err error) {
			if err != nil {
				t.Fatalf("partition %d: %v", o, err)
			}
			for ; p != nil; p = r.Next() {
				returned[p.ID] = true
				if ws := len(l.Writers(int32(o))); ws > 1 && len(p.Markers) != ws {
					t.Fatalf("partition %d phase %d: %d writers' markers, want %d (F7)", o, p.ID, len(p.Markers), ws)
				}
				for _, rec := range p.Records {
					meta, _ := markers.Inspect(rec.Headers)
					src := string(meta.Source)
					in, ok := want[src]
					switch {
					case !ok || got[src]:
						t.Fatalf("partition %d: record %s unknown or returned twice", o, src)
					case in.phase != p.ID || route(in) != int32(o):
						t.Fatalf("record %s of phase %d routed to %d returned in phase %d on %d", src, in.phase, route(in), p.ID, o)
					}
					got[src] = true
				}
			}
		}
		for i, rec := range recs {
			rec.Offset = int64(i)
			take(r.Feed(rec))
		}
		take(nil, r.End())
		for ph := range dataPhases {
			if !returned[ph] {
				t.Fatalf("partition %d: phase %d holds data somewhere but was never returned here (F7)", o, ph)
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d of %d input records reached the output", len(got), len(want))
	}
}
