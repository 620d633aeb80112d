package markers

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// AppendIdentity appends a record's identity (MARKERS.md section 2) to dst:
// its phasegate.id when id is non-empty (pass Meta.ID), else
// "<topic>/<partition>/<offset>", so that a replay of the same input offsets
// yields the same identities. It never allocates when dst has room.
//
// The two forms share one namespace: a producer that sets phasegate.id to
// "orders/0/5" collides with the derived identity of orders/0/5, which is
// what MARKERS.md asks for.
func AppendIdentity(dst, id []byte, topic string, partition int32, offset int64) []byte {
	if len(id) > 0 {
		return append(dst, id...)
	}
	return AppendSource(dst, topic, partition, offset)
}

// AppendSource appends "<topic>/<partition>/<offset>", the phasegate.source
// value of an output data record, to dst. It never allocates when dst has
// room. The caller passes a real Kafka topic name; ParseSource rejects
// anything else.
func AppendSource(dst []byte, topic string, partition int32, offset int64) []byte {
	dst = append(dst, topic...)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(partition), 10)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, offset, 10)
}

// ParseSource parses a phasegate.source value, from the right: the offset
// after the last '/', the partition before it, the topic before that. It
// accepts exactly the values AppendSource writes for a legal Kafka topic
// (1 to 249 bytes of [a-zA-Z0-9._-], not "." or "..", so no '/'), a
// partition in [0, MaxInt32] and an offset in [0, MaxInt64], both in
// canonical decimal (no sign, no leading zero). Errors wrap ErrSource.
func ParseSource(b []byte) (topic string, partition int32, offset int64, err error) {
	t, partition, offset, err := parseSource(b)
	if err != nil {
		return "", 0, 0, err
	}
	return string(t), partition, offset, nil
}

// parseSource is ParseSource without the topic's allocation; t aliases b.
func parseSource(b []byte) (t []byte, partition int32, offset int64, err error) {
	i := bytes.LastIndexByte(b, '/')
	if i < 0 {
		return nil, 0, 0, fmt.Errorf("%w: %q has no '/'", ErrSource, b)
	}
	off, ok := parseCanonical(b[i+1:], math.MaxInt64)
	if !ok {
		return nil, 0, 0, fmt.Errorf("%w: offset %q is not a non-negative int64", ErrSource, b[i+1:])
	}
	j := bytes.LastIndexByte(b[:i], '/')
	if j < 0 {
		return nil, 0, 0, fmt.Errorf("%w: %q has one '/', want two", ErrSource, b)
	}
	part, ok := parseCanonical(b[j+1:i], math.MaxInt32)
	if !ok {
		return nil, 0, 0, fmt.Errorf("%w: partition %q is not a non-negative int32", ErrSource, b[j+1:i])
	}
	if reason := checkTopic(b[:j]); reason != "" {
		return nil, 0, 0, fmt.Errorf("%w: topic %q %s", ErrSource, b[:j], reason)
	}
	return b[:j], int32(part), int64(off), nil
}

// parseCanonical parses a canonical non-negative decimal no greater than
// max: digits only, no leading zero unless the value is "0".
func parseCanonical(b []byte, max uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		d := uint64(c) - '0'
		if d > 9 || n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// maxTopicLen is Kafka's limit on topic names.
const maxTopicLen = 249

// checkTopic returns why t is not a legal Kafka topic name, or "".
func checkTopic[T string | []byte](t T) string {
	switch {
	case len(t) == 0:
		return "is empty"
	case len(t) > maxTopicLen:
		return "is longer than 249 bytes"
	case string(t) == "." || string(t) == "..":
		return "is . or .."
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "holds a byte outside [a-zA-Z0-9._-]"
		}
	}
	return ""
}
