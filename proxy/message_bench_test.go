package proxy

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
)

// BenchmarkDataMessage is the per-record part of a transaction: an input
// record as the producer publishes it, with phasegate's headers added
// (MARKERS.md 2), on a partition with one writer and with several.
func BenchmarkDataMessage(b *testing.B) {
	p := &Pipeline{cfg: Config{OutputTopic: "out"}}
	msg := &sarama.ConsumerMessage{Topic: "orders", Partition: 7, Offset: 123456789, Timestamp: time.Unix(1733140800, 0),
		Key: []byte("customer-42"), Value: make([]byte, 200), Headers: []*sarama.RecordHeader{
			{Key: []byte("traceparent"), Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
			{Key: []byte("phasegate.phase"), Value: []byte("17331408")},
		}}
	w := align.Write[*sarama.ConsumerMessage]{Msg: msg, Kind: align.Data, Partition: 3}
	for _, c := range []struct {
		name string
		task []byte
	}{{"one writer", nil}, {"several writers", []byte("3")}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if m := p.dataMessage(w, c.task); len(m.Headers) == 0 {
					b.Fatal("no headers")
				}
			}
		})
	}
}
