package markers

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"testing"
)

func FuzzParsePhase(f *testing.F) {
	for _, s := range []string{"0", "42", "007", "18446744073709551615", "18446744073709551616", "99999999999999999999",
		"000000000000000000001", "", "+1", "-1", " 1", "1 ", "1_000", "0x10", "1e3", "４"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePhase(b)
		u, uerr := strconv.ParseUint(string(b), 10, 64)
		if err != nil {
			switch err {
			case ErrPhaseEmpty, ErrPhaseSyntax, ErrPhaseTooLong, ErrPhaseOverflow:
			default:
				t.Fatalf("ParsePhase(%q) returned a non-sentinel error %v", b, err)
			}
			// The one difference from strconv: more than 20 digits
			// (leading zeros) are too long for MARKERS.md section 1.
			if uerr == nil && !(len(b) > maxPhaseDigits && err == ErrPhaseTooLong) {
				t.Fatalf("ParsePhase(%q) = %v but strconv accepts it as %d", b, err, u)
			}
			return
		}
		if uerr != nil || u != p {
			t.Fatalf("ParsePhase(%q) = %d; strconv.ParseUint = %d, %v", b, p, u, uerr)
		}
		canon := AppendPhase(nil, p)
		if back, err := ParsePhase(canon); err != nil || back != p {
			t.Fatalf("ParsePhase(AppendPhase(%d) = %q) = %d, %v", p, canon, back, err)
		}
		if len(canon) > len(b) || (len(canon) == len(b)) != bytes.Equal(canon, b) {
			t.Fatalf("AppendPhase(%d) = %q is not the canonical form of %q", p, canon, b)
		}
	})
}

// kafkaTopic is an independent statement of Kafka's topic name rule.
var kafkaTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func FuzzParseSource(f *testing.F) {
	f.Add([]byte("orders/3/17"), "orders", int32(3), int64(17))
	f.Add([]byte("a/b/1/2"), "a/b", int32(1), int64(2))
	f.Add([]byte("t/2147483647/9223372036854775807"), "t", int32(-1), int64(-1))
	f.Add([]byte("t/2147483648/1"), ".", int32(0), int64(0))
	f.Add([]byte("t/01/1"), "..", int32(0), int64(0))
	f.Add([]byte("//"), "", int32(0), int64(0))
	f.Add([]byte("t/1/+1"), "my topic", int32(0), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, topic string, partition int32, offset int64) {
		// Decode direction: what is accepted is exactly what AppendSource writes.
		tp, p, o, err := ParseSource(b)
		if err != nil {
			if !errors.Is(err, ErrSource) {
				t.Fatalf("ParseSource(%q) error %v does not wrap ErrSource", b, err)
			}
		} else {
			if !kafkaTopic.MatchString(tp) || tp == "." || tp == ".." || p < 0 || o < 0 {
				t.Fatalf("ParseSource(%q) accepted %q, %d, %d", b, tp, p, o)
			}
			if back := AppendSource(nil, tp, p, o); !bytes.Equal(back, b) {
				t.Fatalf("AppendSource(ParseSource(%q)) = %q", b, back)
			}
		}
		// Encode direction: a legal source always parses back.
		enc := AppendSource(nil, topic, partition, offset)
		tp, p, o, err = ParseSource(enc)
		legal := kafkaTopic.MatchString(topic) && topic != "." && topic != ".." && partition >= 0 && offset >= 0
		if legal != (err == nil) {
			t.Fatalf("ParseSource(AppendSource(%q, %d, %d)) error = %v, legal = %v", topic, partition, offset, err, legal)
		}
		if legal && (tp != topic || p != partition || o != offset) {
			t.Fatalf("round trip of %q, %d, %d gave %q, %d, %d", topic, partition, offset, tp, p, o)
		}
	})
}

func FuzzDecodeMarker(f *testing.F) {
	for _, s := range []string{
		specExample,
		specExampleWriters,
		`{"v":2,"phase":1,"partition":0,"count":0,"sources":{},"watermark_ms":0,"sealed_by":"idle","emitter":"x","task":1}`,
		`{"v":2,"phase":1,"partition":0,"count":0,"sources":{},"watermark_ms":0,"sealed_by":"idle","emitter":"x","task":2,"writers":2}`,
		`{"task":0,"writers":2,"v":2,"phase":1,"partition":0,"count":0,"sources":{},"watermark_ms":0,"sealed_by":"idle","emitter":"x"}`,
		`{"v":1,"phase":1,"partition":0,"count":0,"sources":{},"watermark_ms":0,"sealed_by":"idle","emitter":"x","task":-1,"task":null,"writers":1}`,
		`{"v":1,"phase":42,"partition":3}`,
		`{"v":1,"phase":42,"partition":3,"count":0}`,
		`{"v":1,"phase":18446744073709551615,"partition":2147483647,"count":9223372036854775807,"sources":{"a":9223372036854775807},"watermark_ms":-9223372036854775808,"sealed_by":"idle","emitter":"\u00e9\"\\"}`,
		`{"v":1,"phase":1,"partition":0,"count":0,"sources":{},"watermark_ms":0,"sealed_by":"timeout","emitter":"x","extra":[1,{"v":2}]}`,
		`{"v":2,"phase":1,"partition":0}`,
		`{"v":1,"v":1,"phase":1,"partition":0}`,
		`{"V":1,"phase":1,"partition":0}`,
		`{"v":1.0,"phase":1,"partition":0}`,
		`{"v":1,"phase":-1,"partition":0}`,
		`{"v":1,"phase":1,"partition":0,"sources":{"a":1,"a":1}}`,
		`{"v":1,"phase":1,"partition":0,"emitter":"\xff"}`,
		`[]`, `null`, ``, `{`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, inErr := DecodeMarker(b)
		if err := inErr; err != nil {
			var me *MalformedError
			if !errors.As(err, &me) {
				t.Fatalf("DecodeMarker(%q) error %v is not a *MalformedError", b, err)
			}
		} else {
			if !json.Valid(b) {
				t.Fatalf("DecodeMarker accepted invalid JSON %q", b)
			}
			back, err := DecodeMarker(in.AppendInput(nil))
			if err != nil || back.Phase != in.Phase || back.Partition != in.Partition || back.HasCount != in.HasCount || back.Count != in.Count {
				t.Fatalf("DecodeMarker(AppendInput(%+v)) = %+v, %v", in, back, err)
			}
		}

		m, err := DecodeOutputMarker(b)
		if err != nil {
			var me *MalformedError
			if !errors.As(err, &me) {
				t.Fatalf("DecodeOutputMarker(%q) error %v is not a *MalformedError", b, err)
			}
			return
		}
		var me *MalformedError
		switch {
		case m.Writers == 0 && !reflect.DeepEqual(m, in):
			t.Fatalf("DecodeOutputMarker(%q) = %+v but DecodeMarker = %+v", b, m, in)
		case m.Writers != 0 && (!errors.As(inErr, &me) || me.Field != "v"):
			// MARKERS.md section 3: a "v":2 marker is output only.
			t.Fatalf("DecodeMarker(%q) = %+v, %v; want a malformed \"v\"", b, in, inErr)
		case m.Writers != 0 && (m.Writers < 2 || m.Task < 0 || m.Task >= m.Writers):
			t.Fatalf("DecodeOutputMarker(%q) accepted task %d of %d writers", b, m.Task, m.Writers)
		}
		if err := m.ValidateOutput(); err != nil {
			t.Fatalf("decoded marker %+v fails ValidateOutput: %v", m, err)
		}
		enc := m.AppendOutput(nil)
		m2, err := DecodeOutputMarker(enc)
		if err != nil {
			t.Fatalf("DecodeOutputMarker(AppendOutput(%+v) = %s): %v", m, enc, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip of %s:\n%+v\n%+v", b, m, m2)
		}
		if enc2 := m2.AppendOutput(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("AppendOutput is not canonical:\n%s\n%s", enc, enc2)
		}
	})
}

// fuzzKeys are the header keys FuzzInspect and FuzzReader pick from.
var fuzzKeys = []string{HeaderMarker, HeaderPhase, HeaderID, HeaderSource, HeaderReason, "phasegate.other", "Phasegate.Phase", "traceparent", HeaderTask}

// fuzzHeaders splits b at 0xff bytes; each chunk is one header whose
// first byte picks its key from fuzzKeys (or, from 0xf0 up, makes the
// rest of the chunk up to '=' the key) and whose remaining bytes are its
// value.
func fuzzHeaders(b []byte) []Header {
	var hs []Header
	for _, c := range bytes.Split(b, []byte{0xff}) {
		if len(c) == 0 {
			continue
		}
		if c[0] >= 0xf0 {
			k, v, _ := bytes.Cut(c[1:], []byte("="))
			hs = append(hs, Header{Key: k, Value: v})
			continue
		}
		hs = append(hs, Header{Key: []byte(fuzzKeys[int(c[0])%len(fuzzKeys)]), Value: c[1:]})
	}
	return hs
}

// refInspect is a plain restatement of MARKERS.md sections 1 to 3 for
// headers, to check Inspect against.
func refInspect(hs []Header) (Meta, bool) {
	var m Meta
	seen := map[string]bool{}
	for _, hd := range hs {
		k, v := string(hd.Key), hd.Value
		switch k {
		case HeaderMarker, HeaderPhase, HeaderID, HeaderSource, HeaderReason, HeaderTask:
		default:
			continue
		}
		if seen[k] {
			return m, false
		}
		seen[k] = true
		switch k {
		case HeaderMarker:
			if string(v) != "1" {
				return m, false
			}
			m.Marker = true
		case HeaderPhase:
			p, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil || len(v) > 20 {
				return m, false
			}
			m.Phase, m.HasPhase = p, true
		case HeaderID:
			if len(v) == 0 || len(v) > 256 {
				return m, false
			}
			m.ID = v
		case HeaderSource:
			m.Source = v
		case HeaderTask:
			m.Task = v
		}
	}
	return m, !m.Marker || m.HasPhase
}

func FuzzInspect(f *testing.F) {
	f.Add([]byte("\x01" + "42" + "\xff" + "\x02" + "order-7" + "\xff" + "\x07" + "00-abc"))
	f.Add([]byte("\x00" + "1" + "\xff" + "\x01" + "7"))
	f.Add([]byte("\x00" + "1"))
	f.Add([]byte("\x01" + "1" + "\xff" + "\x01" + "1"))
	f.Add([]byte("\x01" + "+1"))
	f.Add([]byte("\x02"))
	f.Add([]byte("\xf0phasegate.phase=18446744073709551616"))
	f.Add([]byte("\x03orders/1/2\xff\x04late\xff\x05x\xff\x06y"))
	f.Add([]byte("\x01" + "5" + "\xff" + "\x08" + "3"))
	f.Add([]byte("\x08" + "3" + "\xff" + "\x08" + "3"))
	f.Add([]byte("\x08"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hs := fuzzHeaders(b)
		got, err := Inspect(hs)
		want, ok := refInspect(hs)
		if ok != (err == nil) {
			t.Fatalf("Inspect(%q) error = %v, reference ok = %v", hs, err, ok)
		}
		if err != nil {
			switch err {
			case ErrPhaseEmpty, ErrPhaseSyntax, ErrPhaseTooLong, ErrPhaseOverflow, ErrMarkerValue,
				ErrIDEmpty, ErrIDTooLong, ErrHeaderRepeated, ErrMarkerNoPhase:
			default:
				t.Fatalf("Inspect returned a non-sentinel error %v", err)
			}
			return
		}
		if !sameMeta(got, want) {
			t.Fatalf("Inspect(%q) = %+v, reference %+v", hs, got, want)
		}
	})
}
