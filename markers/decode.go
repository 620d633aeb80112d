package markers

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Fields of a marker value; bits of the set decodeMarker has seen.
const (
	fieldV uint16 = 1 << iota
	fieldPhase
	fieldPartition
	fieldCount
	fieldSources
	fieldWatermark
	fieldSealedBy
	fieldEmitter
	fieldTask    // version 2 only; read after the walk, once "v" is known
	fieldWriters // version 2 only

	fieldsInput  = fieldV | fieldPhase | fieldPartition
	fieldsOutput = fieldsInput | fieldCount | fieldSources | fieldWatermark | fieldSealedBy | fieldEmitter
	fieldLast    = fieldWriters
)

// fieldName is the JSON name of a field bit.
func fieldName(bit uint16) string {
	switch bit {
	case fieldV:
		return "v"
	case fieldPhase:
		return "phase"
	case fieldPartition:
		return "partition"
	case fieldCount:
		return "count"
	case fieldSources:
		return "sources"
	case fieldWatermark:
		return "watermark_ms"
	case fieldSealedBy:
		return "sealed_by"
	case fieldEmitter:
		return "emitter"
	case fieldTask:
		return "task"
	case fieldWriters:
		return "writers"
	}
	return ""
}

// DecodeMarker decodes a marker value as phasegate reads input markers
// (MARKERS.md sections 3 and 3.1). The value must be one JSON object with
// "v" equal to 1 (a "v":2 marker is output only, section 3), "phase" (uint64) and "partition" (int32 >= 0). "count"
// (int64 >= 0) is optional. The output-only fields are checked when present:
// "sources" an object of Kafka topic names to counts >= 0 that add up to
// "count", "watermark_ms" an int64, "sealed_by" one of the four values,
// "emitter" a string. Unknown fields are ignored. Field names match exactly
// (JSON is case-sensitive, whatever encoding/json does by default); a known
// field given twice, a number written with a fraction or exponent, and
// null in place of a value are malformed. Every error is a
// *MalformedError. Safe for concurrent use.
func DecodeMarker(value []byte) (Marker, error) {
	return decodeMarker(value, fieldsInput, false)
}

// DecodeOutputMarker is DecodeMarker for markers phasegate wrote: "count",
// "sources", "watermark_ms", "sealed_by" and "emitter" are required too,
// and "emitter" must not be empty. On success HasCount is true and Sources
// is non-nil. It also accepts "v":2 (MARKERS.md section 3.3), which
// requires "task" and "writers" (writers >= 2, 0 <= task < writers) and
// sets Task and Writers; in a "v":1 marker both names are unknown fields
// and ignored, whatever their value, as a version 1 reader does.
func DecodeOutputMarker(value []byte) (Marker, error) {
	return decodeMarker(value, fieldsOutput, true)
}

func decodeMarker(value []byte, required uint16, output bool) (Marker, error) {
	var m Marker
	if !json.Valid(value) {
		return m, malformed("", "not valid JSON")
	}
	if output {
		if err := newerVersion(value); err != nil {
			return m, err
		}
	}
	var seen uint16
	var version uint64
	// "task" and "writers" mean something only in a "v":2 marker, and "v"
	// may come after them: keep their raw values (and whether one came
	// twice) until the walk is over.
	var rawTask, rawWriters []byte
	var twice uint16
	err := walkObject("", value, func(key string, raw []byte) *MalformedError {
		bit := fieldBit(key)
		switch {
		case bit == 0:
			return nil // MARKERS.md section 3: unknown fields are ignored
		case bit == fieldTask || bit == fieldWriters:
			if seen&bit != 0 {
				twice |= bit
			}
			seen |= bit
			if bit == fieldTask {
				rawTask = raw
			} else {
				rawWriters = raw
			}
			return nil
		case seen&bit != 0:
			return malformed(key, "given twice")
		}
		seen |= bit
		if bit == fieldV {
			return checkVersion(key, raw, output, &version)
		}
		return m.setField(bit, key, raw)
	})
	if err != nil {
		return Marker{}, err
	}
	if version == VersionWriters {
		required |= fieldTask | fieldWriters
	}
	for bit := uint16(1); bit != 0 && bit <= fieldLast; bit <<= 1 {
		if required&^seen&bit != 0 {
			return Marker{}, malformed(fieldName(bit), "is required")
		}
	}
	if version == VersionWriters {
		if err := m.setWriters(twice, rawTask, rawWriters); err != nil {
			return Marker{}, err
		}
	}
	if err := m.validate(output); err != nil {
		return Marker{}, err
	}
	return m, nil
}

// newerVersion looks at "v" before any other field (MARKERS.md 3.3: a
// reader stops at a marker whose "v" is an integer above 2, whatever else
// the value holds), and returns the ErrNewerVersion error for such a
// marker; value must be valid JSON.
func newerVersion(value []byte) *MalformedError {
	var newer *MalformedError
	_ = walkObject("", value, func(key string, raw []byte) *MalformedError {
		if key != "v" || newer != nil || checkInteger(key, raw) != nil || raw[0] == '-' {
			return nil
		}
		if v, err := strconv.ParseUint(string(raw), 10, 64); err != nil || v > VersionWriters {
			newer = &MalformedError{Field: key, Reason: "version " + string(raw) + " is newer than this reader (1 and 2): upgrade the reader", newer: true}
		}
		return nil
	})
	return newer
}

// checkVersion reads "v": 1, or 2 for an output marker (MARKERS.md
// sections 3 and 3.3).
func checkVersion(key string, raw []byte, output bool, version *uint64) *MalformedError {
	v, err := jsonUint(key, raw, 64)
	switch {
	case err != nil:
		return err
	case v == Version:
	case v == VersionWriters && output:
	case output:
		return malformed(key, "version "+string(raw)+" is not 1 or 2")
	default: // input markers are version 1 (section 3.1), whatever a "v":2 says
		return malformed(key, "version "+string(raw)+" is not 1")
	}
	*version = v
	return nil
}

// setWriters sets Task and Writers of a "v":2 marker from their raw JSON.
func (m *Marker) setWriters(twice uint16, rawTask, rawWriters []byte) *MalformedError {
	for _, bit := range []uint16{fieldTask, fieldWriters} {
		if twice&bit != 0 {
			return malformed(fieldName(bit), "given twice")
		}
	}
	t, err := jsonUint("task", rawTask, 31)
	if err != nil {
		return err
	}
	w, err := jsonUint("writers", rawWriters, 31)
	if err != nil {
		return err
	}
	m.Task, m.Writers = int32(t), int32(w)
	return nil
}

func fieldBit(key string) uint16 {
	for bit := uint16(1); bit != 0 && bit <= fieldLast; bit <<= 1 {
		if key == fieldName(bit) {
			return bit
		}
	}
	return 0
}

func (m *Marker) setField(bit uint16, key string, raw []byte) *MalformedError {
	var err *MalformedError
	switch bit {
	case fieldPhase:
		m.Phase, err = jsonUint(key, raw, 64)
	case fieldPartition:
		var p uint64
		p, err = jsonUint(key, raw, 31)
		m.Partition = int32(p)
	case fieldCount:
		var c uint64
		c, err = jsonUint(key, raw, 63)
		m.Count, m.HasCount = int64(c), true
	case fieldWatermark:
		m.WatermarkMs, err = jsonInt(key, raw)
	case fieldSealedBy:
		var s string
		s, err = jsonString(key, raw)
		m.SealedBy = SealedBy(s)
	case fieldEmitter:
		m.Emitter, err = jsonString(key, raw)
	case fieldSources:
		m.Sources = make(map[string]int64)
		err = walkObject(key, raw, func(topic string, n []byte) *MalformedError {
			if _, dup := m.Sources[topic]; dup {
				return malformed(key, "topic "+strconv.Quote(topic)+" given twice")
			}
			c, err := jsonUint(key, n, 63)
			if err != nil {
				err.Reason = "count of " + strconv.Quote(topic) + ": " + err.Reason
				return err
			}
			m.Sources[topic] = int64(c)
			return nil
		})
	}
	return err
}

// walkObject calls fn for each member of the JSON object raw (the value of
// field, "" for the whole marker), in order, with the member's unescaped
// name and raw value, trimmed. raw must be valid JSON.
func walkObject(field string, raw []byte, fn func(key string, value []byte) *MalformedError) *MalformedError {
	raw = bytes.TrimSpace(raw)
	if raw[0] != '{' {
		return malformed(field, "must be a JSON object, not "+kindOf(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return malformed(field, err.Error())
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return malformed(field, err.Error())
		}
		key, _ := tok.(string) // inside an object a token here is always a name
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return malformed(key, err.Error())
		}
		if err := fn(key, bytes.TrimSpace(value)); err != nil {
			return err
		}
	}
	return nil
}

// kindOf names the JSON type of a raw value for error messages.
func kindOf(raw []byte) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// jsonUint parses a JSON integer in [0, 2^bitSize).
func jsonUint(key string, raw []byte, bitSize int) (uint64, *MalformedError) {
	if err := checkInteger(key, raw); err != nil {
		return 0, err
	}
	if raw[0] == '-' {
		return 0, malformed(key, "must not be negative")
	}
	n, err := strconv.ParseUint(string(raw), 10, bitSize)
	if err != nil {
		return 0, malformed(key, string(raw)+" is out of range")
	}
	return n, nil
}

// jsonInt parses a JSON integer that fits an int64.
func jsonInt(key string, raw []byte) (int64, *MalformedError) {
	if err := checkInteger(key, raw); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, malformed(key, string(raw)+" is out of range")
	}
	return n, nil
}

// checkInteger accepts a JSON number without fraction or exponent.
func checkInteger(key string, raw []byte) *MalformedError {
	if k := kindOf(raw); k != "a number" {
		return malformed(key, "must be an integer, not "+k)
	}
	if bytes.ContainsAny(raw, ".eE") {
		return malformed(key, "must be an integer, not "+string(raw))
	}
	return nil
}

func jsonString(key string, raw []byte) (string, *MalformedError) {
	if raw[0] != '"' {
		return "", malformed(key, "must be a string, not "+kindOf(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", malformed(key, err.Error())
	}
	return s, nil
}
