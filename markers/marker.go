package markers

import (
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Marker is the JSON value of a marker record (MARKERS.md section 3).
type Marker struct {
	Phase       uint64
	Partition   int32
	Count       int64 // valid when HasCount
	HasCount    bool
	Sources     map[string]int64 // output only
	WatermarkMs int64            // output only
	SealedBy    SealedBy         // output only
	Emitter     string           // output only
	// Writers is how many tasks write the marker's partition when there
	// are several (MARKERS.md section 3.3): a marker with Writers >= 2 is
	// written as "v":2 with "task" and "writers". Writers is 0 on a
	// one-writer partition, whose markers are "v":1, byte for byte as in
	// version 1.
	Writers int32
	// Task is the writer's task number on the partition, 0 <= Task <
	// Writers; 0 when Writers is 0. In the summary marker of a Phase with
	// several writers (Reader), it is -1.
	Task int32
}

// AppendOutput appends the output form of m to dst: every field, "v"
// first, in the order of MARKERS.md section 3, sources sorted by topic, no
// spaces. With Writers 0 it writes "v":1 and neither "task" nor
// "writers"; otherwise "v":2 with "task" and "writers" after "partition"
// (section 3.3). "count" is always written (HasCount is not consulted) because
// it is required on output. Strings are escaped as encoding/json does,
// except that '<', '>' and '&' are kept; invalid UTF-8 becomes U+FFFD. A
// nil Sources is written as {}.
//
// AppendOutput does not validate m: call ValidateOutput first when m does
// not come from DecodeOutputMarker. For a valid m,
// DecodeOutputMarker(m.AppendOutput(nil)) returns m with HasCount set and
// Sources non-nil.
func (m Marker) AppendOutput(dst []byte) []byte {
	if m.Writers == 0 {
		dst = m.appendHead(dst, Version)
	} else {
		dst = m.appendHead(dst, VersionWriters)
		dst = append(dst, `,"task":`...)
		dst = strconv.AppendInt(dst, int64(m.Task), 10)
		dst = append(dst, `,"writers":`...)
		dst = strconv.AppendInt(dst, int64(m.Writers), 10)
	}
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendInt(dst, m.Count, 10)
	dst = append(dst, `,"sources":{`...)
	for i, topic := range slices.Sorted(maps.Keys(m.Sources)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, topic)
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, m.Sources[topic], 10)
	}
	dst = append(dst, `},"watermark_ms":`...)
	dst = strconv.AppendInt(dst, m.WatermarkMs, 10)
	dst = append(dst, `,"sealed_by":`...)
	dst = appendString(dst, string(m.SealedBy))
	dst = append(dst, `,"emitter":`...)
	dst = appendString(dst, m.Emitter)
	return append(dst, '}')
}

// AppendInput appends the input form of m to dst (MARKERS.md section 3.1):
// "v", "phase", "partition", and "count" when HasCount. It is what a
// producer writes; tests use it to build input markers. Input markers are
// "v":1: Task and Writers are not written.
func (m Marker) AppendInput(dst []byte) []byte {
	dst = m.appendHead(dst, Version)
	if m.HasCount {
		dst = append(dst, `,"count":`...)
		dst = strconv.AppendInt(dst, m.Count, 10)
	}
	return append(dst, '}')
}

func (m Marker) appendHead(dst []byte, version int64) []byte {
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, version, 10)
	dst = append(dst, `,"phase":`...)
	dst = strconv.AppendUint(dst, m.Phase, 10)
	dst = append(dst, `,"partition":`...)
	return strconv.AppendInt(dst, int64(m.Partition), 10)
}

// ValidateOutput reports, as a *MalformedError, what would make
// DecodeOutputMarker reject m.AppendOutput: a negative partition or count,
// a source that is not a Kafka topic name or has a negative count, sources
// that do not add up to count, an unknown sealed_by, an empty emitter,
// Writers 1 or negative, a Task outside [0, Writers) (or not 0 when
// Writers is 0).
// phasegate calls it before writing a marker.
func (m Marker) ValidateOutput() error {
	if err := m.validate(true); err != nil {
		return err
	}
	return nil
}

// validate checks the fields a decoded value could not have rejected on
// syntax alone. With output set every output field is checked; otherwise
// only the fields that are present.
func (m *Marker) validate(output bool) *MalformedError {
	if m.Partition < 0 {
		return malformed("partition", "must not be negative")
	}
	if m.HasCount && m.Count < 0 || output && m.Count < 0 {
		return malformed("count", "must not be negative")
	}
	if m.Sources != nil || output {
		var sum int64
		for topic, n := range m.Sources {
			if reason := checkTopic(topic); reason != "" {
				return malformed("sources", "topic "+strconv.Quote(topic)+" "+reason)
			}
			if n < 0 {
				return malformed("sources", "count of "+strconv.Quote(topic)+" is negative")
			}
			sum += n
			if sum < 0 {
				return malformed("sources", "counts overflow int64")
			}
		}
		if (m.HasCount || output) && sum != m.Count {
			return malformed("sources", "add up to "+strconv.FormatInt(sum, 10)+", count is "+strconv.FormatInt(m.Count, 10))
		}
	}
	if (m.SealedBy != "" || output) && !m.SealedBy.Valid() {
		return malformed("sealed_by", strconv.Quote(string(m.SealedBy))+" is not markers, watermark, idle or timeout")
	}
	if output && m.Emitter == "" {
		return malformed("emitter", "is empty")
	}
	switch {
	case m.Writers == 0 && m.Task != 0:
		return malformed("task", "is set on a one-writer marker")
	case m.Writers == 1 || m.Writers < 0:
		return malformed("writers", strconv.Itoa(int(m.Writers))+" is not 2 or more (a one-writer marker is \"v\":1)")
	case m.Writers > 0 && (m.Task < 0 || m.Task >= m.Writers):
		return malformed("task", strconv.Itoa(int(m.Task))+" is not below writers "+strconv.Itoa(int(m.Writers)))
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
