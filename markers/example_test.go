package markers_test

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/phasegate/phasegate/markers"
)

// A record's phase and identity, as phasegate computes them per record.
func ExampleInspect() {
	hs := []markers.Header{
		{Key: []byte("traceparent"), Value: []byte("00-abc")},
		{Key: []byte(markers.HeaderPhase), Value: []byte("1733140800")},
	}
	meta, err := markers.Inspect(hs)
	if err != nil {
		fmt.Println("quarantine:", markers.ReasonMalformed, err)
		return
	}
	phase := meta.Phase
	if !meta.HasPhase {
		phase, _ = markers.PhaseOf(1733140800123, time.Second)
	}
	id := markers.AppendIdentity(nil, meta.ID, "orders", 3, 17)
	fmt.Println(phase, string(id))
	// Output: 1733140800 orders/3/17
}

// A join consumer reads one output partition with read_committed and
// gets whole phases.
func ExampleReader() {
	out := func(phase uint64, id string) markers.Record {
		return markers.Record{Value: []byte("payload"), Headers: []markers.Header{
			{Key: []byte(markers.HeaderPhase), Value: markers.AppendPhase(nil, phase)},
			{Key: []byte(markers.HeaderID), Value: []byte(id)},
			{Key: []byte(markers.HeaderSource), Value: []byte("orders/0/" + id)},
		}}
	}
	marker := func(phase uint64, count int64) markers.Record {
		m := markers.Marker{Phase: phase, Partition: 0, Count: count, HasCount: true,
			Sources: map[string]int64{"orders": count}, WatermarkMs: 1733140800000,
			SealedBy: markers.SealedByWatermark, Emitter: "phasegate-0"}
		return markers.Record{Value: m.AppendOutput(nil), Headers: markers.AppendMarkerHeaders[markers.Header](nil, markers.AppendPhase(nil, phase))}
	}
	partition := []markers.Record{out(42, "1"), out(42, "2"), marker(42, 2), marker(43, 0), out(44, "3"), marker(44, 2)}

	r := markers.NewReader(0)
	for off, rec := range partition {
		rec.Offset = int64(off)
		p, err := r.Feed(rec)
		var v *markers.Violation
		if errors.As(err, &v) {
			fmt.Println("violation:", v.Kind, "phase", v.Phase, "want", v.Want, "got", v.Got)
		}
		if p != nil {
			fmt.Println("phase", p.ID, "records", len(p.Records), "sealed by", p.Marker.SealedBy)
		}
	}
	if err := r.End(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// phase 42 records 2 sealed by watermark
	// phase 43 records 0 sealed by watermark
	// violation: count-mismatch phase 44 want 2 got 1
	// phase 44 records 1 sealed by watermark
}

// A partition written by two tasks (MARKERS.md section 3.3): task 0's
// phase 43 data arrives before task 1's marker for phase 42, and task 1
// skips the empty phase 43: its marker for 42 completes phase 42, its
// marker for 44 completes 43. Feed returns the first phase a record
// completes; Next returns the others.
func ExampleReader_severalWriters() {
	out := func(phase uint64, id string, task int) markers.Record {
		return markers.Record{Value: []byte("payload"), Headers: []markers.Header{
			{Key: []byte(markers.HeaderPhase), Value: markers.AppendPhase(nil, phase)},
			{Key: []byte(markers.HeaderID), Value: []byte(id)},
			{Key: []byte(markers.HeaderSource), Value: []byte("orders/0/" + id)},
			{Key: []byte(markers.HeaderTask), Value: []byte(strconv.Itoa(task))},
		}}
	}
	marker := func(phase uint64, count int64, task int32) markers.Record {
		m := markers.Marker{Phase: phase, Partition: 0, Count: count, HasCount: true,
			Sources: map[string]int64{"orders": count}, WatermarkMs: 1733140800000,
			SealedBy: markers.SealedByWatermark, Emitter: "phasegate-" + strconv.Itoa(int(task)),
			Task: task, Writers: 2}
		return markers.Record{Value: m.AppendOutput(nil), Headers: markers.AppendMarkerHeaders[markers.Header](nil, markers.AppendPhase(nil, phase))}
	}
	partition := []markers.Record{
		out(42, "1", 0), marker(42, 1, 0), out(43, "2", 0), out(42, "3", 1),
		marker(43, 1, 0), marker(42, 1, 1), marker(44, 0, 1), marker(44, 0, 0),
	}
	r := markers.NewReader(0)
	for off, rec := range partition {
		rec.Offset = int64(off)
		p, err := r.Feed(rec)
		if err != nil {
			fmt.Println(err)
		}
		for ; p != nil; p = r.Next() {
			fmt.Println("phase", p.ID, "records", len(p.Records), "count", p.Marker.Count, "writers' markers", len(p.Markers))
		}
	}
	if err := r.End(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// phase 42 records 2 count 2 writers' markers 2
	// phase 43 records 1 count 1 writers' markers 1
	// phase 44 records 0 count 0 writers' markers 2
}
