package markers

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// specExample is the marker value printed in MARKERS.md section 3.
const specExample = `{"v":1,"phase":42,"partition":3,"count":17,"sources":{"orders":12,"payments":5},"watermark_ms":1733140800000,"sealed_by":"watermark","emitter":"phasegate-0"}`

func specMarker() Marker {
	return Marker{Phase: 42, Partition: 3, Count: 17, HasCount: true,
		Sources:     map[string]int64{"orders": 12, "payments": 5},
		WatermarkMs: 1733140800000, SealedBy: SealedByWatermark, Emitter: "phasegate-0"}
}

func TestAppendOutput(t *testing.T) {
	tests := []struct {
		name string
		m    Marker
		want string
	}{
		{"3/output marker: the example of MARKERS.md", specMarker(), specExample},
		{"3/output marker: sources sorted by topic", Marker{Phase: 1, Count: 3, Sources: map[string]int64{"z": 1, "a": 1, "m": 1}, SealedBy: SealedByIdle, Emitter: "e"},
			`{"v":1,"phase":1,"partition":0,"count":3,"sources":{"a":1,"m":1,"z":1},"watermark_ms":0,"sealed_by":"idle","emitter":"e"}`},
		{"3.2/output marker with count 0 where the partition got no data", Marker{Phase: 9, Partition: 2, SealedBy: SealedByMarkers, Emitter: "e"},
			`{"v":1,"phase":9,"partition":2,"count":0,"sources":{},"watermark_ms":0,"sealed_by":"markers","emitter":"e"}`},
		{"3/output marker: count written even without HasCount", Marker{Phase: 1, Count: 0, HasCount: false, SealedBy: SealedByTimeout, Emitter: "e"},
			`{"v":1,"phase":1,"partition":0,"count":0,"sources":{},"watermark_ms":0,"sealed_by":"timeout","emitter":"e"}`},
		{"3/output marker: emitter escaped as JSON", Marker{Phase: math.MaxUint64, SealedBy: SealedByIdle, Emitter: "a\"b\\c\n\t\x01é\xff<&>", WatermarkMs: -1},
			`{"v":1,"phase":18446744073709551615,"partition":0,"count":0,"sources":{},"watermark_ms":-1,"sealed_by":"idle","emitter":"a\"b\\c\n\t\u0001é\ufffd<&>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.m.AppendOutput([]byte("x"))
			if string(got) != "x"+tt.want {
				t.Fatalf("AppendOutput =\n%s\nwant\n%s", got[1:], tt.want)
			}
			if !json.Valid(got[1:]) {
				t.Fatalf("AppendOutput wrote invalid JSON %s", got[1:])
			}
		})
	}
}

func TestAppendInput(t *testing.T) {
	tests := []struct {
		name string
		m    Marker
		want string
	}{
		{"3.1/input marker without count", Marker{Phase: 42, Partition: 3}, `{"v":1,"phase":42,"partition":3}`},
		{"3.1/input marker with count", Marker{Phase: 42, Partition: 3, Count: 17, HasCount: true}, `{"v":1,"phase":42,"partition":3,"count":17}`},
		{"3.1/input marker leaves output fields out", specMarker(), `{"v":1,"phase":42,"partition":3,"count":17}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.m.AppendInput(nil)
			if string(got) != tt.want {
				t.Fatalf("AppendInput = %s, want %s", got, tt.want)
			}
			back, err := DecodeMarker(got)
			if err != nil || back.Phase != tt.m.Phase || back.Partition != tt.m.Partition || back.HasCount != tt.m.HasCount || back.Count != tt.m.Count {
				t.Fatalf("DecodeMarker(AppendInput) = %+v, %v", back, err)
			}
		})
	}
}

// out builds an output marker value from the spec example with replace
// applied (old, new pairs).
func out(replace ...string) string {
	return strings.NewReplacer(replace...).Replace(specExample)
}

func TestDecodeMarker(t *testing.T) {
	spec := specMarker()
	in := Marker{Phase: 42, Partition: 3}
	inCount := Marker{Phase: 42, Partition: 3, Count: 17, HasCount: true}
	const ok = "-" // no error expected
	tests := []struct {
		name   string
		value  string
		output bool
		want   Marker
		field  string // MalformedError.Field, or ok
	}{
		// Accepted values.
		{"3/output: the example of MARKERS.md", specExample, true, spec, ok},
		{"3/input: the example of MARKERS.md is a valid input marker", specExample, false, spec, ok},
		{"3.1/input: count optional", `{"v":1,"phase":42,"partition":3}`, false, in, ok},
		{"3.1/input: count present", `{"v":1,"phase":42,"partition":3,"count":17}`, false, inCount, ok},
		{"3/any field order and whitespace", " {\n\t\"partition\" : 3 , \"phase\":42,\r\n\"v\": 1 } ", false, in, ok},
		{"3/unknown fields are ignored", `{"v":1,"x":{"a":[1,2,{"b":null}]},"phase":42,"y":"s","partition":3,"z":1.5e3,"x":true}`, false, in, ok},
		{"3/field names are case-sensitive: V and Phase are unknown", `{"v":1,"V":2,"Phase":"x","phase":42,"partition":3}`, false, in, ok},
		{"3/escaped field names are the same names", `{"\u0076":1,"ph\u0061se":42,"partition":3}`, false, in, ok},
		{"1/phase IDs are uint64: max", `{"v":1,"phase":18446744073709551615,"partition":0}`, false, Marker{Phase: math.MaxUint64}, ok},
		{"3/output: negative watermark is a number like any other", out(`1733140800000`, `-5`), true, func() Marker { m := spec; m.WatermarkMs = -5; return m }(), ok},
		{"3/output: sources may list a topic with 0", out(`"payments":5`, `"payments":5,"refunds":0`), true,
			func() Marker {
				m := spec
				m.Sources = map[string]int64{"orders": 12, "payments": 5, "refunds": 0}
				return m
			}(), ok},
		{"3.2/output: count 0 with empty sources", `{"v":1,"phase":1,"partition":0,"count":0,"sources":{},"watermark_ms":0,"sealed_by":"idle","emitter":"e"}`, true,
			Marker{Phase: 1, HasCount: true, Sources: map[string]int64{}, SealedBy: SealedByIdle, Emitter: "e"}, ok},
		{"3/output: emitter with escapes", out(`"phasegate-0"`, `"a\"\u00e9\n"`), true, func() Marker { m := spec; m.Emitter = "a\"é\n"; return m }(), ok},

		// Not a JSON object.
		{"3/not valid JSON: empty", ``, false, Marker{}, ""},
		{"3/not valid JSON: truncated", specExample[:40], true, Marker{}, ""},
		{"3/not valid JSON: trailing garbage", `{"v":1,"phase":42,"partition":3}x`, false, Marker{}, ""},
		{"3/not valid JSON: two objects", `{"v":1,"phase":42,"partition":3}{}`, false, Marker{}, ""},
		{"3/not valid JSON: trailing comma", `{"v":1,"phase":42,"partition":3,}`, false, Marker{}, ""},
		{"3/not valid JSON: single quotes", `{'v':1}`, false, Marker{}, ""},
		{"3/value is a JSON object: array", `[{"v":1,"phase":42,"partition":3}]`, false, Marker{}, ""},
		{"3/value is a JSON object: null", `null`, false, Marker{}, ""},
		{"3/value is a JSON object: string", `"{}"`, false, Marker{}, ""},
		{"3/value is a JSON object: number", `1`, false, Marker{}, ""},

		// v.
		{"3/v required", `{"phase":42,"partition":3}`, false, Marker{}, "v"},
		{"3/v is 1: 2 is another version", `{"v":2,"phase":42,"partition":3}`, false, Marker{}, "v"},
		{"3/v is 1: 0", `{"v":0,"phase":42,"partition":3}`, false, Marker{}, "v"},
		{"3/v is a number, not a string", `{"v":"1","phase":42,"partition":3}`, false, Marker{}, "v"},
		{"3/v is an integer, not 1.0", `{"v":1.0,"phase":42,"partition":3}`, false, Marker{}, "v"},
		{"3/v is not null", `{"v":null,"phase":42,"partition":3}`, false, Marker{}, "v"},
		{"3/v given twice", `{"v":1,"phase":42,"partition":3,"v":1}`, false, Marker{}, "v"},

		// phase.
		{"3/phase required", `{"v":1,"partition":3}`, false, Marker{}, "phase"},
		{"1/phase IDs are unsigned", `{"v":1,"phase":-1,"partition":3}`, false, Marker{}, "phase"},
		{"1/phase IDs are uint64: max+1", `{"v":1,"phase":18446744073709551616,"partition":3}`, false, Marker{}, "phase"},
		{"1/phase IDs are integers: fraction", `{"v":1,"phase":42.5,"partition":3}`, false, Marker{}, "phase"},
		{"1/phase IDs are integers: exponent", `{"v":1,"phase":4.2e1,"partition":3}`, false, Marker{}, "phase"},
		{"3/phase is a number, not a string", `{"v":1,"phase":"42","partition":3}`, false, Marker{}, "phase"},
		{"3/phase is not null", `{"v":1,"phase":null,"partition":3}`, false, Marker{}, "phase"},
		{"3/phase is not an object", `{"v":1,"phase":{},"partition":3}`, false, Marker{}, "phase"},
		{"3/phase given twice", `{"v":1,"phase":42,"partition":3,"phase":43}`, false, Marker{}, "phase"},

		// partition.
		{"3/partition required", `{"v":1,"phase":42}`, false, Marker{}, "partition"},
		{"3/partition is not negative", `{"v":1,"phase":42,"partition":-1}`, false, Marker{}, "partition"},
		{"3/partition fits int32", `{"v":1,"phase":42,"partition":2147483648}`, false, Marker{}, "partition"},
		{"3/partition is not a boolean", `{"v":1,"phase":42,"partition":true}`, false, Marker{}, "partition"},

		// count.
		{"3/output: count required", out(`"count":17,`, ``), true, Marker{}, "count"},
		{"3.1/input: count is not negative", `{"v":1,"phase":42,"partition":3,"count":-1}`, false, Marker{}, "count"},
		{"3/count is an integer", `{"v":1,"phase":42,"partition":3,"count":1.5}`, false, Marker{}, "count"},
		{"3/count fits int64", `{"v":1,"phase":42,"partition":3,"count":9223372036854775808}`, false, Marker{}, "count"},
		{"3/count is not null", `{"v":1,"phase":42,"partition":3,"count":null}`, false, Marker{}, "count"},

		// sources.
		{"3/output: sources required", out(`"sources":{"orders":12,"payments":5},`, ``), true, Marker{}, "sources"},
		{"3/sources is an object", out(`{"orders":12,"payments":5}`, `[12,5]`), true, Marker{}, "sources"},
		{"3/sources is not null", out(`{"orders":12,"payments":5}`, `null`), true, Marker{}, "sources"},
		{"3/sources break count down: sum too small", out(`"payments":5`, `"payments":4`), true, Marker{}, "sources"},
		{"3/sources break count down: sum too large", out(`"count":17`, `"count":16`), true, Marker{}, "sources"},
		{"3/sources counts are not negative", out(`"orders":12,"payments":5`, `"orders":18,"payments":-1`), true, Marker{}, "sources"},
		{"3/sources counts are integers", out(`"payments":5`, `"payments":5.0`), true, Marker{}, "sources"},
		{"3/sources counts are numbers", out(`"payments":5`, `"payments":"5"`), true, Marker{}, "sources"},
		{"3/sources keys are topics: not empty", out(`"payments"`, `""`), true, Marker{}, "sources"},
		{"3/sources keys are topics: no '/'", out(`"payments"`, `"pay/ments"`), true, Marker{}, "sources"},
		{"3/sources topic given twice", out(`"payments":5`, `"orders":5`), true, Marker{}, "sources"},
		{"3/sources counts overflow", out(`"orders":12,"payments":5`, `"orders":9223372036854775807,"payments":1`), true, Marker{}, "sources"},
		{"3.1/input: sources checked when present", `{"v":1,"phase":42,"partition":3,"sources":{"a":-1}}`, false, Marker{}, "sources"},
		{"3.1/input: sources and count must agree when both present", `{"v":1,"phase":42,"partition":3,"count":2,"sources":{"a":1}}`, false, Marker{}, "sources"},

		// watermark_ms.
		{"3/output: watermark_ms required", out(`"watermark_ms":1733140800000,`, ``), true, Marker{}, "watermark_ms"},
		{"3/watermark_ms is an integer", out(`1733140800000`, `1.7331408e12`), true, Marker{}, "watermark_ms"},
		{"3/watermark_ms fits int64", out(`1733140800000`, `9223372036854775808`), true, Marker{}, "watermark_ms"},

		// sealed_by.
		{"3/output: sealed_by required", out(`"sealed_by":"watermark",`, ``), true, Marker{}, "sealed_by"},
		{"3/sealed_by is one of four", out(`"watermark",`, `"manual",`), true, Marker{}, "sealed_by"},
		{"3/sealed_by is case-sensitive", out(`"watermark",`, `"Watermark",`), true, Marker{}, "sealed_by"},
		{"3/sealed_by is a string", out(`"watermark",`, `1,`), true, Marker{}, "sealed_by"},
		{"3.1/input: sealed_by checked when present", `{"v":1,"phase":42,"partition":3,"sealed_by":"soon"}`, false, Marker{}, "sealed_by"},

		// emitter.
		{"3/output: emitter required", out(`,"emitter":"phasegate-0"`, ``), true, Marker{}, "emitter"},
		{"3/output: emitter is a transactional ID, not empty", out(`"phasegate-0"`, `""`), true, Marker{}, "emitter"},
		{"3/emitter is a string", out(`"phasegate-0"`, `0`), true, Marker{}, "emitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decode := DecodeMarker
			if tt.output {
				decode = DecodeOutputMarker
			}
			got, err := decode([]byte(tt.value))
			if tt.field == ok {
				if err != nil {
					t.Fatalf("decode(%s): %v", tt.value, err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("decode(%s) =\n%+v\nwant\n%+v", tt.value, got, tt.want)
				}
				return
			}
			var me *MalformedError
			if !errors.As(err, &me) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode(%s) error = %v, want a *MalformedError", tt.value, err)
			}
			if me.Field != tt.field {
				t.Fatalf("decode(%s) error field %q (%v), want %q", tt.value, me.Field, err, tt.field)
			}
			if !reflect.DeepEqual(got, Marker{}) {
				t.Fatalf("decode(%s) returned %+v with an error, want the zero Marker", tt.value, got)
			}
		})
	}
}

// TestDecodeInputIsLenient: an input marker may omit the output fields
// (MARKERS.md section 3 table) but DecodeOutputMarker may not.
func TestDecodeInputIsLenient(t *testing.T) {
	v := []byte(`{"v":1,"phase":42,"partition":3,"count":0}`)
	if _, err := DecodeMarker(v); err != nil {
		t.Fatalf("DecodeMarker: %v", err)
	}
	if _, err := DecodeOutputMarker(v); err == nil {
		t.Fatal("DecodeOutputMarker accepted a marker without sources, watermark_ms, sealed_by and emitter")
	}
}

func TestValidateOutput(t *testing.T) {
	valid := specMarker()
	tests := []struct {
		name   string
		change func(*Marker)
		field  string // "" = valid
	}{
		{"3/output: the example is valid", func(*Marker) {}, ""},
		{"3/output: nil sources with count 0", func(m *Marker) { m.Sources, m.Count = nil, 0 }, ""},
		{"3/output: negative partition", func(m *Marker) { m.Partition = -1 }, "partition"},
		{"3/output: negative count", func(m *Marker) { m.Count = -1; m.Sources = nil }, "count"},
		{"3/output: sources do not add up to count", func(m *Marker) { m.Count = 18 }, "sources"},
		{"3/output: sources with a bad topic", func(m *Marker) { m.Sources = map[string]int64{"a b": 17} }, "sources"},
		{"3/output: sources with a negative count", func(m *Marker) { m.Sources = map[string]int64{"a": 18, "b": -1} }, "sources"},
		{"3/output: no sealed_by", func(m *Marker) { m.SealedBy = "" }, "sealed_by"},
		{"3/output: no emitter", func(m *Marker) { m.Emitter = "" }, "emitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid
			m.Sources = map[string]int64{"orders": 12, "payments": 5}
			tt.change(&m)
			err := m.ValidateOutput()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("ValidateOutput: %v", err)
				}
				back, err := DecodeOutputMarker(m.AppendOutput(nil))
				if err != nil {
					t.Fatalf("a valid marker does not decode: %v", err)
				}
				if back.Phase != m.Phase || back.Count != m.Count || back.Emitter != m.Emitter || len(back.Sources) != len(m.Sources) {
					t.Fatalf("round trip %+v -> %+v", m, back)
				}
				return
			}
			var me *MalformedError
			if !errors.As(err, &me) || me.Field != tt.field {
				t.Fatalf("ValidateOutput = %v, want field %q", err, tt.field)
			}
			if _, err := DecodeOutputMarker(m.AppendOutput(nil)); err == nil {
				t.Fatalf("DecodeOutputMarker accepted what ValidateOutput rejects: %s", m.AppendOutput(nil))
			}
		})
	}
}

func TestMalformedErrorMessage(t *testing.T) {
	_, err := DecodeMarker([]byte(`{"v":2,"phase":1,"partition":0}`))
	if got, want := err.Error(), `markers: malformed marker value: "v": version 2 is not 1`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
