package dedupe

import (
	"runtime"
	"strconv"
	"testing"
)

// streams builds identities the way the pipeline does when a record has no
// phasegate.id: "<topic>/<partition>/<offset>", one stream per partition,
// interleaved round-robin, into one reused buffer.
type streams struct {
	prefix [][]byte
	offset []uint64
	buf    []byte
	next   int
}

func newStreams(partitions int) *streams {
	s := &streams{prefix: make([][]byte, partitions), offset: make([]uint64, partitions), buf: make([]byte, 0, 64)}
	for p := range s.prefix {
		s.prefix[p] = []byte("orders/" + strconv.Itoa(p) + "/")
	}
	return s
}

// id returns the next identity; it is valid until the next call.
func (s *streams) id() []byte {
	p := s.next
	s.next++
	if s.next == len(s.prefix) {
		s.next = 0
	}
	s.buf = strconv.AppendUint(append(s.buf[:0], s.prefix[p]...), s.offset[p], 10)
	s.offset[p]++
	return s.buf
}

// rewind makes the streams yield the same identities again from offset 0.
func (s *streams) rewind() {
	clear(s.offset)
	s.next = 0
}

var benchPartitions = []int{1, 64, 1024}

// benchPhaseLen is records per phase in BenchmarkAdd: with the default
// config, 64 sealed phases of this size fill the identity bound exactly, so
// both bounds evict in the steady state.
const benchPhaseLen = DefaultMaxIdentities / DefaultMaxSealedPhases

// BenchmarkAdd measures Add of new identities in the steady state: phases
// fill, seal and rotate through the sealed LRU, whose evicted sets are reused.
// Seal's cost is included (one call per benchPhaseLen adds).
func BenchmarkAdd(b *testing.B) {
	for _, n := range benchPartitions {
		b.Run("partitions="+strconv.Itoa(n), func(b *testing.B) {
			c, err := New(DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			s := newStreams(n)
			var phase uint64
			var inPhase int
			step := func() {
				if inPhase == benchPhaseLen {
					c.Seal(phase)
					phase++
					inPhase = 0
				}
				if dup, err := c.Add(phase, s.id()); dup || err != nil {
					b.Fatalf("Add(%d) = %v, %v", phase, dup, err)
				}
				inPhase++
			}
			// Warm up past the point where both bounds start evicting.
			for range benchPhaseLen * (DefaultMaxSealedPhases + 4) {
				step()
			}
			b.ReportAllocs()
			for b.Loop() {
				step()
			}
			st := c.Stats()
			if st.Evictions == 0 {
				b.Fatalf("not in steady state: %+v", st)
			}
		})
	}
}

// BenchmarkAddDuplicate measures Add of identities already held in an open
// phase: 256 per partition, so 256 to 262144 keys in the phase's set.
func BenchmarkAddDuplicate(b *testing.B) {
	const perPartition = 256
	for _, n := range benchPartitions {
		b.Run("partitions="+strconv.Itoa(n), func(b *testing.B) {
			c, err := New(DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			s := newStreams(n)
			total := n * perPartition
			for range total {
				if _, err := c.Add(1, s.id()); err != nil {
					b.Fatal(err)
				}
			}
			s.rewind()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if i == total {
					s.rewind()
					i = 0
				}
				if dup, _ := c.Add(1, s.id()); !dup {
					b.Fatal("missed a duplicate")
				}
				i++
			}
		})
	}
}

// BenchmarkSeal measures Seal of one phase of n identities (the keys'
// sort), and reports the heap each identity takes while its phase is open
// (a map) and once it is sealed (a sorted slice).
func BenchmarkSeal(b *testing.B) {
	for _, n := range []int{1 << 14, 1 << 18} {
		b.Run("identities="+strconv.Itoa(n), func(b *testing.B) {
			s := newStreams(64)
			ids := make([][]byte, n)
			for i := range ids {
				ids[i] = append([]byte(nil), s.id()...)
			}
			var open, sealed float64
			for b.Loop() {
				b.StopTimer()
				base := heapInUse()
				c, err := New(Config{MaxSealedPhases: 1, MaxIdentities: n})
				if err != nil {
					b.Fatal(err)
				}
				for _, id := range ids {
					_, _ = c.Add(1, id)
				}
				open = float64(heapInUse()-base) / float64(n)
				b.StartTimer()
				c.Seal(1)
				b.StopTimer()
				c.pool.free = nil // the map kept for the next phase
				sealed = float64(heapInUse()-base) / float64(n)
				if c.Stats().Identities != n {
					b.Fatalf("%d identities held, want %d", c.Stats().Identities, n)
				}
				b.StartTimer()
			}
			b.ReportMetric(open, "openB/identity")
			b.ReportMetric(sealed, "sealedB/identity")
		})
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
