package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/markers"
)

// TestDataMessage checks an output data record as dataMessage builds it
// (MARKERS.md 2): key and value unchanged, null apart from empty; the
// input's headers in order but for an upstream phasegate.source and
// phasegate.task; then phasegate.phase and phasegate.id unless the input
// had them, phasegate.source, and phasegate.task on a several-writer
// partition. The rows cover the record's own storage and both ways out of
// it (more headers than outRecord holds, a topic name longer than its
// source bytes), and every record is checked only after all were built,
// so records that shared storage would show each other's bytes.
func TestDataMessage(t *testing.T) {
	long := strings.Repeat("t", 200)
	hdrs := func(kv ...string) []*sarama.RecordHeader {
		var hs []*sarama.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, &sarama.RecordHeader{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
		}
		return hs
	}
	added := func(source string, task string) []string {
		out := []string{markers.HeaderPhase, "", markers.HeaderID, source, markers.HeaderSource, source}
		if task != "" {
			out = append(out, markers.HeaderTask, task)
		}
		return out
	}
	cases := []struct {
		name       string
		topic      string
		key, value []byte
		headers    []*sarama.RecordHeader
		task       []byte
		want       []string // header keys and values, in order
	}{
		{name: "no input headers", topic: "orders", key: []byte("k1"), value: []byte("v1"),
			want: added("orders/3/41", "")},
		{name: "two input headers, one of them a phase: fits the record", topic: "orders", key: []byte("k2"), value: []byte("v2"),
			headers: hdrs("traceparent", "00-ab", markers.HeaderPhase, "17"),
			want:    []string{"traceparent", "00-ab", markers.HeaderPhase, "17", markers.HeaderID, "orders/3/41", markers.HeaderSource, "orders/3/41"}},
		{name: "an upstream source and task replaced, several writers", topic: "orders", key: []byte("k3"), value: []byte("v3"),
			headers: hdrs(markers.HeaderSource, "up/1/2", "x", "y", markers.HeaderTask, "5"), task: []byte("2"),
			want: append([]string{"x", "y"}, added("orders/3/41", "2")...)},
		{name: "five input headers: more than the record holds", topic: "orders", key: []byte("k4"), value: []byte("v4"),
			headers: hdrs("a", "1", "b", "2", "c", "3", "d", "4", "e", "5"),
			want:    append([]string{"a", "1", "b", "2", "c", "3", "d", "4", "e", "5"}, added("orders/3/41", "")...)},
		{name: "a 200-byte topic name: longer than the record's source bytes", topic: long, key: []byte("k5"), value: []byte("v5"),
			want: added(long+"/3/41", "")},
		{name: "null key, empty value", topic: "orders", key: nil, value: []byte{},
			want: added("orders/3/41", "")},
	}
	p := &Pipeline{cfg: Config{OutputTopic: "out"}}
	ts := time.Unix(1733140800, 0)
	built := make([]*sarama.ProducerMessage, len(cases))
	for i, c := range cases {
		msg := &sarama.ConsumerMessage{Topic: c.topic, Partition: 3, Offset: 41, Timestamp: ts, Key: c.key, Value: c.value, Headers: c.headers}
		built[i] = p.dataMessage(align.Write[*sarama.ConsumerMessage]{Msg: msg, Kind: align.Data, Partition: 1}, c.task)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := built[i]
			if m.Topic != "out" || m.Partition != 1 || !m.Timestamp.Equal(ts) {
				t.Errorf("topic %q partition %d timestamp %v, want out, 1, %v", m.Topic, m.Partition, m.Timestamp, ts)
			}
			checkEncoded(t, "key", m.Key, c.key)
			checkEncoded(t, "value", m.Value, c.value)
			var got []string
			for _, h := range m.Headers {
				got = append(got, string(h.Key), string(h.Value))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("headers\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// checkEncoded fails t unless e encodes want, a nil want as a nil Encoder
// (Kafka's null) and an empty one as an empty, non-null value.
func checkEncoded(t *testing.T, what string, e sarama.Encoder, want []byte) {
	t.Helper()
	if want == nil {
		if e != nil {
			t.Errorf("%s: %#v, want null", what, e)
		}
		return
	}
	if e == nil {
		t.Fatalf("%s: null, want %q", what, want)
	}
	got, err := e.Encode()
	if err != nil || !bytes.Equal(got, want) || e.Length() != len(want) {
		t.Errorf("%s: %q (length %d, err %v), want %q", what, got, e.Length(), err, want)
	}
}
