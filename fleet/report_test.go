package fleet

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// specValue is the example value of docs/FLEET.md, on one line.
const specValue = `{"v":1,"task":3,"layout":"9f1c0a2b4d6e8f01","low":41,"low_ms":1733140800000,"idle":false,"high":41,"marked":39,"open":[40,41],"owner":"phasegate-1","generation":7,"at_ms":1733140801234}`

func specReport() Report {
	return Report{Task: 3, Layout: 0x9f1c0a2b4d6e8f01, Low: 41, LowMs: 1733140800000, High: 41, Marked: 39, Open: []uint64{40, 41},
		Owner: "phasegate-1", Generation: 7, AtMs: 1733140801234}
}

func TestReportEncoding(t *testing.T) {
	r := specReport()
	if got := string(r.AppendValue(nil)); got != specValue {
		t.Fatalf("AppendValue = %s\nwant %s", got, specValue)
	}
	if got := string(r.AppendKey(nil)); got != "3" {
		t.Fatalf("AppendKey = %q", got)
	}
	idle := Report{Task: 0, Layout: 1, Low: 5, LowMs: -3, Idle: true, High: 9, Owner: "x", Generation: -1}
	tests := []struct {
		name string
		r    Report
	}{{"the spec example", r}, {"idle, small layout, negative numbers", idle}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := DecodeReport(tt.r.AppendKey(nil), tt.r.AppendValue(nil))
			if err != nil || !ok || !reflect.DeepEqual(got, tt.r) {
				t.Fatalf("DecodeReport(encoded %+v) = %+v, %v, %v", tt.r, got, ok, err)
			}
		})
	}
}

func TestDecodeReport(t *testing.T) {
	rep := func(old, new string) string { return strings.Replace(specValue, old, new, 1) }
	tests := []struct {
		name       string
		key, value string
		tombstone  bool
		ok         bool
	}{
		{"the spec example", "3", specValue, false, true},
		{"unknown fields are ignored", "3", rep(`"v":1,`, `"v":1,"later":[1,{"x":2}],`), false, true},
		{"field order does not matter", "3", rep(`"v":1,"task":3,`, `"task":3,"v":1,`), false, true},
		{"a tombstone withdraws the report", "3", "", true, true},
		{"key with a leading zero", "03", specValue, false, false},
		{"key with a sign", "+3", specValue, false, false},
		{"negative key", "-3", specValue, false, false},
		{"negative zero key", "-0", strings.Replace(specValue, `"task":3`, `"task":0`, 1), false, false},
		{"key with a space", " 3", specValue, false, false},
		{"empty key", "", specValue, false, false},
		{"key beyond int32", "2147483648", specValue, false, false},
		{"value names another task", "4", specValue, false, false},
		{"another version", "3", rep(`"v":1`, `"v":2`), false, false},
		{"a missing field", "3", rep(`"idle":false,`, ""), false, false},
		{"a null field", "3", rep(`"owner":"phasegate-1"`, `"owner":null`), false, false},
		{"layout in upper case", "3", rep("9f1c0a2b4d6e8f01", "9F1C0A2B4D6E8F01"), false, false},
		{"short layout", "3", rep("9f1c0a2b4d6e8f01", "9f1c"), false, false},
		{"high below low", "3", rep(`"high":41`, `"high":40`), false, false},
		{"a live task's high differs from its low", "3", rep(`"high":41`, `"high":42`), false, false},
		{"empty owner", "3", rep(`"phasegate-1"`, `""`), false, false},
		{"marked absent (a writer before rule F8)", "3", rep(`"marked":39,`, ""), false, true},
		{"negative marked", "3", rep(`"marked":39`, `"marked":-1`), false, false},
		{"marked not an integer", "3", rep(`"marked":39`, `"marked":"39"`), false, false},
		{"no open phases", "3", rep(`[40,41]`, `[]`), false, true},
		{"open phases null", "3", rep(`[40,41]`, `null`), false, false},
		{"open phases not ascending", "3", rep(`[40,41]`, `[41,40]`), false, false},
		{"open phase repeated", "3", rep(`[40,41]`, `[41,41]`), false, false},
		{"open phase not an integer", "3", rep(`[40,41]`, `[40.5]`), false, false},
		{"negative low", "3", rep(`"low":41`, `"low":-1`), false, false},
		{"generation beyond int32", "3", rep(`"generation":7`, `"generation":2147483648`), false, false},
		{"not an object", "3", `[]`, false, false},
		{"two objects", "3", specValue + specValue, false, false},
		{"not JSON", "3", `{"v":1,`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var value []byte
			if !tt.tombstone {
				value = []byte(tt.value)
			}
			r, ok, err := DecodeReport([]byte(tt.key), value)
			switch {
			case !tt.ok && !errors.Is(err, ErrReport):
				t.Fatalf("DecodeReport = %+v, %v, %v; want ErrReport", r, ok, err)
			case tt.ok && err != nil:
				t.Fatalf("DecodeReport: %v", err)
			case tt.ok && ok == tt.tombstone:
				t.Fatalf("DecodeReport ok = %v for a tombstone = %v", ok, tt.tombstone)
			case tt.tombstone && r.Task != 3:
				t.Fatalf("tombstone of task %d, want 3", r.Task)
			}
		})
	}
}

func FuzzDecodeReport(f *testing.F) {
	f.Add([]byte("3"), []byte(specValue))
	f.Add([]byte("0"), []byte(`{"v":1,"task":0,"layout":"0000000000000001","low":5,"low_ms":-3,"idle":true,"high":9,"open":[],"owner":"x","generation":-1,"at_ms":0}`))
	f.Add([]byte("1"), []byte(`{"v":1,"task":1,"layout":"0000000000000001","low":5,"low_ms":-3,"idle":true,"high":9,"open":[3,2],"owner":"x","generation":-1,"at_ms":0}`))
	f.Add([]byte("3"), []byte(strings.Replace(specValue, `"v":1`, `"V":1,"v":1`, 1)))
	f.Add([]byte("03"), []byte(specValue))
	f.Add([]byte("-0"), []byte(strings.Replace(specValue, `"task":3`, `"task":0`, 1)))
	f.Add([]byte("3"), []byte(`{}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, ok, err := DecodeReport(key, value)
		if err != nil {
			if !errors.Is(err, ErrReport) {
				t.Fatalf("error %v does not wrap ErrReport", err)
			}
			return
		}
		if !ok {
			return // a tombstone (nil value)
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded %+v fails Validate: %v", r, err)
		}
		if !bytes.Equal(r.AppendKey(nil), key) {
			t.Fatalf("key %q decodes to task %d, which encodes as %q", key, r.Task, r.AppendKey(nil))
		}
		enc := r.AppendValue(nil)
		back, ok, err := DecodeReport(key, enc)
		if err != nil || !ok || !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip of %+v through %s: %+v, %v, %v", r, enc, back, ok, err)
		}
		if again := back.AppendValue(nil); !bytes.Equal(again, enc) {
			t.Fatalf("AppendValue is not canonical:\n%s\n%s", enc, again)
		}
	})
}

// A report without "marked" (written before rule F8) decodes with Marked
// 0: its reader forgets no data phase because of it.
func TestDecodeReportWithoutMarked(t *testing.T) {
	r, ok, err := DecodeReport([]byte("3"), []byte(strings.Replace(specValue, `"marked":39,`, "", 1)))
	want := specReport()
	want.Marked = 0
	if err != nil || !ok || !reflect.DeepEqual(r, want) {
		t.Fatalf("DecodeReport = %+v, %v, %v; want %+v", r, ok, err, want)
	}
}
