package markers

import (
	"testing"
)

// clientHeader stands for a Kafka client's header type laid out as Header
// (sarama.RecordHeader), which markers must not import.
type clientHeader struct{ Key, Value []byte }

// hdrs is headers from "key: value" pairs, for the wanted side.
func hdrs(kv ...string) []clientHeader {
	out := make([]clientHeader, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		out = append(out, clientHeader{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return out
}

// The bytes phasegate writes on its output, pinned against MARKERS.md:
// the headers of a data record (section 2, and 3.3 with several writers),
// of a marker record with its JSON value (section 3, the examples of
// sections 3 and 3.3 verbatim), and of a quarantined record (section 5).
// A change here is a change of the wire format.
func TestOutputRecordsPinned(t *testing.T) {
	source := AppendSource(nil, "orders", 0, 7)
	phase := AppendPhase(nil, 42)
	data := func(in []clientHeader, task []byte) []clientHeader {
		out := make([]clientHeader, 0, len(in)+MaxAddedHeaders)
		var kept DataHeaders
		for _, h := range in {
			if kept.Keep(h.Key) {
				out = append(out, h)
			}
		}
		return AppendDataHeaders(out, kept, phase, source, task)
	}
	cases := []struct {
		name  string
		got   []clientHeader
		want  []clientHeader
		value []byte // the marker's JSON value, for marker records
		wantV string
	}{
		{name: "v1 data record: input without phasegate headers",
			got: data(hdrs("traceparent", "00-ab-cd-01"), nil),
			want: hdrs("traceparent", "00-ab-cd-01",
				"phasegate.phase", "42", "phasegate.id", "orders/0/7", "phasegate.source", "orders/0/7")},
		{name: "v1 data record: the input's phase and id kept, an upstream phasegate's source and task replaced",
			got: data(hdrs("phasegate.id", "order-1", "phasegate.source", "up/1/2", "x", "y", "phasegate.task", "5", "phasegate.phase", "41"), nil),
			want: hdrs("phasegate.id", "order-1", "x", "y", "phasegate.phase", "41",
				"phasegate.source", "orders/0/7")},
		{name: "v2 data record of writer 3: phasegate.task last",
			got: data(hdrs("phasegate.task", "5"), []byte("3")),
			want: hdrs("phasegate.phase", "42", "phasegate.id", "orders/0/7", "phasegate.source", "orders/0/7",
				"phasegate.task", "3")},
		{name: "v2 data record of writer 0, with an id",
			got: data(hdrs("phasegate.id", "order-1"), []byte("0")),
			want: hdrs("phasegate.id", "order-1",
				"phasegate.phase", "42", "phasegate.source", "orders/0/7", "phasegate.task", "0")},
		{name: "v1 marker record (MARKERS.md 3)",
			got:  AppendMarkerHeaders[clientHeader](nil, phase),
			want: hdrs("phasegate.marker", "1", "phasegate.phase", "42"),
			value: Marker{Phase: 42, Partition: 3, Count: 17, HasCount: true, Sources: map[string]int64{"payments": 5, "orders": 12},
				WatermarkMs: 1733140800000, SealedBy: SealedByWatermark, Emitter: "phasegate-0"}.AppendOutput(nil),
			wantV: `{"v":1,"phase":42,"partition":3,"count":17,"sources":{"orders":12,"payments":5},"watermark_ms":1733140800000,"sealed_by":"watermark","emitter":"phasegate-0"}`},
		{name: "v2 marker record of writer 3 of 8 (MARKERS.md 3.3)",
			got:  AppendMarkerHeaders[clientHeader](nil, phase),
			want: hdrs("phasegate.marker", "1", "phasegate.phase", "42"),
			value: Marker{Phase: 42, Partition: 5, Count: 4, HasCount: true, Sources: map[string]int64{"orders": 4},
				WatermarkMs: 1733140800000, SealedBy: SealedByWatermark, Emitter: "phasegate-1", Task: 3, Writers: 8}.AppendOutput(nil),
			wantV: `{"v":2,"phase":42,"partition":5,"task":3,"writers":8,"count":4,"sources":{"orders":4},"watermark_ms":1733140800000,"sealed_by":"watermark","emitter":"phasegate-1"}`},
		{name: "v2 marker record of writer 0 of 2, idle",
			got:  AppendMarkerHeaders[clientHeader](nil, AppendPhase(nil, 18446744073709551615)),
			want: hdrs("phasegate.marker", "1", "phasegate.phase", "18446744073709551615"),
			value: Marker{Phase: 18446744073709551615, Partition: 0, Count: 2, HasCount: true, Sources: map[string]int64{"b": 1, "a": 1},
				WatermarkMs: 0, SealedBy: SealedByIdle, Emitter: "pg", Task: 0, Writers: 2}.AppendOutput(nil),
			wantV: `{"v":2,"phase":18446744073709551615,"partition":0,"task":0,"writers":2,"count":2,"sources":{"a":1,"b":1},"watermark_ms":0,"sealed_by":"idle","emitter":"pg"}`},
		{name: "quarantined record: its own headers, then reason and source (MARKERS.md 5)",
			got:  AppendQuarantineHeaders(hdrs("phasegate.phase", "+5"), ReasonMalformed, source),
			want: hdrs("phasegate.phase", "+5", "phasegate.reason", "malformed", "phasegate.source", "orders/0/7")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.got) != len(c.want) {
				t.Fatalf("headers\n got %q\nwant %q", c.got, c.want)
			}
			for i := range c.want {
				if string(c.got[i].Key) != string(c.want[i].Key) || string(c.got[i].Value) != string(c.want[i].Value) {
					t.Fatalf("header %d: got %s: %q, want %s: %q", i, c.got[i].Key, c.got[i].Value, c.want[i].Key, c.want[i].Value)
				}
			}
			if string(c.value) != c.wantV {
				t.Fatalf("marker value\n got %s\nwant %s", c.value, c.wantV)
			}
		})
	}
}

// A data record's headers, as phasegate writes them, are what a reader of
// the output accepts (Inspect), with the source as the identity.
func TestDataHeadersReadBack(t *testing.T) {
	var kept DataHeaders
	hs := AppendDataHeaders[Header](nil, kept, AppendPhase(nil, 42), AppendSource(nil, "orders", 0, 7), []byte("3"))
	m, err := Inspect(hs)
	if err != nil || !m.HasPhase || m.Phase != 42 || string(m.ID) != "orders/0/7" || string(m.Source) != "orders/0/7" || string(m.Task) != "3" {
		t.Fatalf("Inspect = %+v, %v", m, err)
	}
	if _, _, _, err := ParseSource(m.Source); err != nil {
		t.Fatalf("ParseSource: %v", err)
	}
	if task, err := ParseTask(m.Task); err != nil || task != 3 {
		t.Fatalf("ParseTask = %d, %v", task, err)
	}
}

// Keep runs per input header of every output record: it must not allocate.
func TestDataHeadersKeepDoesNotAllocate(t *testing.T) {
	keys := [][]byte{[]byte("traceparent"), []byte(HeaderPhase), []byte(HeaderID), []byte(HeaderSource), []byte(HeaderTask)}
	if n := testing.AllocsPerRun(100, func() {
		var kept DataHeaders
		for _, k := range keys {
			kept.Keep(k)
		}
	}); n != 0 {
		t.Fatalf("Keep allocates %v times per record", n)
	}
}
