package markers

import (
	"testing"
	"time"
)

// benchHeaders are the headers typical of an input data record: a phase, an
// identity and one application header.
var benchHeaders = []Header{
	h("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
	h(HeaderPhase, "1733140800"),
	h(HeaderID, "order-000000017-retry-0"),
}

func BenchmarkParsePhase(b *testing.B) {
	v := []byte("1733140800")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePhase(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePhaseMax(b *testing.B) {
	v := []byte("18446744073709551615")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePhase(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPhaseOf(b *testing.B) {
	b.ReportAllocs()
	ts, length := int64(1733140800123), []time.Duration{time.Second, 1500 * time.Microsecond}
	for b.Loop() {
		ts += 7 // defeat constant folding
		if _, err := PhaseOf(ts, length[ts&1]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInspect(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		m, err := Inspect(benchHeaders)
		if err != nil || !m.HasPhase {
			b.Fatal(m, err)
		}
	}
}

func BenchmarkAppendIdentity(b *testing.B) {
	buf := make([]byte, 0, 64)
	id := []byte("order-000000017-retry-0")
	b.Run("id", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendIdentity(buf[:0], id, "orders", 11, 123456789)
		}
	})
	b.Run("derived", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendIdentity(buf[:0], nil, "orders", 11, 123456789)
		}
	})
}

func BenchmarkDecodeOutputMarker(b *testing.B) {
	v := []byte(specExample)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeOutputMarker(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendOutput(b *testing.B) {
	m := specMarker()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = m.AppendOutput(buf[:0])
	}
}

// BenchmarkReaderFeed feeds phases of 100 data records and a marker.
func BenchmarkReaderFeed(b *testing.B) {
	const perPhase = 100
	recs := make([]Record, perPhase)
	for i := range recs {
		recs[i] = d(1, "id-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	r := NewReader(testPartition)
	b.ReportAllocs()
	ph := uint64(0)
	for b.Loop() {
		ph++
		phase := AppendPhase(nil, ph)
		for i := range recs {
			recs[i].Headers[0].Value = phase
			if _, err := r.Feed(recs[i]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := r.Feed(mk(ph, perPhase)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(perPhase+1)), "ns/record")
}

// BenchmarkReaderFeedSeveral is BenchmarkReaderFeed on a partition with
// four writers (MARKERS.md section 3.3): per phase, each writer's 25 data
// records and its marker, the writers' records interleaved one by one.
func BenchmarkReaderFeedSeveral(b *testing.B) {
	const writers, perWriter = 4, 25
	recs := make([]Record, writers*perWriter)
	for i := range recs {
		recs[i] = dt(1, "id-"+string(rune('a'+i%26))+string(rune('a'+i/26)), int32(i%writers))
	}
	r := NewReader(testPartition)
	b.ReportAllocs()
	ph := uint64(0)
	for b.Loop() {
		ph++
		phase := AppendPhase(nil, ph)
		for i := range recs {
			recs[i].Headers[0].Value = phase
			if _, err := r.Feed(recs[i]); err != nil {
				b.Fatal(err)
			}
		}
		for w := range int32(writers) {
			p, err := r.Feed(mt(ph, perWriter, w, writers))
			if err != nil || (w == writers-1) != (p != nil) {
				b.Fatal(p, err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(writers*perWriter+writers)), "ns/record")
}
