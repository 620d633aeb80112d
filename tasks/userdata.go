package tasks

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Assignment is what one member holds: its tasks and the group generation
// that gave them. It travels, encoded by AppendAssignment, both ways
// through the group protocol: the leader puts it in each member's
// assignment UserData, and the member sends it back in its subscription
// UserData at the next rebalance, so the leader knows who held what
// (sarama's eager group protocol sends no owned partitions).
type Assignment struct {
	Generation int32 // -1: nothing assigned yet
	Tasks      []ID  // ascending, no repeats
}

// userDataVersion is the first byte of an encoded Assignment. Version 1
// carried a layout fingerprint where version 2 carries the settings
// themselves, so that a refusal can name what differs.
const userDataVersion = 2

// ErrUserData: bytes that DecodeAssignment cannot read; the concrete error
// says why.
var ErrUserData = errors.New("tasks: malformed assignment user data")

// AppendAssignment appends the encoding of a under the layout settings
// (Layout.Settings) to dst:
//
//	byte     version (2)
//	uvarint  length of settings, then settings
//	4 bytes  generation, big endian two's complement
//	uvarint  number of tasks
//	uvarint  first task ID, then each next ID minus the previous one
//
// Tasks must be ascending without repeats (Assign's output is).
func AppendAssignment(dst []byte, settings string, a Assignment) []byte {
	dst = append(dst, userDataVersion)
	dst = binary.AppendUvarint(dst, uint64(len(settings)))
	dst = append(dst, settings...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(a.Generation))
	dst = binary.AppendUvarint(dst, uint64(len(a.Tasks)))
	prev := ID(0)
	for i, t := range a.Tasks {
		d := t - prev
		if i == 0 {
			d = t
		}
		dst = binary.AppendUvarint(dst, uint64(d))
		prev = t
	}
	return dst
}

// DecodeAssignment reads what AppendAssignment wrote and returns the
// settings and the assignment. It accepts exactly the canonical encodings
// of ascending, repeat-free task lists of IDs in [0, 2^31): every error
// wraps ErrUserData. Safe for concurrent use.
func DecodeAssignment(b []byte) (string, Assignment, error) {
	var a Assignment
	if len(b) == 0 {
		return "", a, fmt.Errorf("%w: empty", ErrUserData)
	}
	if b[0] != userDataVersion {
		return "", a, fmt.Errorf("%w: version %d (every member of a group must run the same version of phasegate)", ErrUserData, b[0])
	}
	b = b[1:]
	n, k := uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", a, fmt.Errorf("%w: bad settings length", ErrUserData)
	}
	settings := string(b[k : k+int(n)])
	b = b[k+int(n):]
	if len(b) < 4 {
		return "", a, fmt.Errorf("%w: %d bytes after the settings, want at least 5", ErrUserData, len(b))
	}
	a.Generation = int32(binary.BigEndian.Uint32(b[:4]))
	b = b[4:]
	n, k = uvarint(b)
	if k <= 0 || n > uint64(len(b)) { // each task takes at least one byte
		return "", Assignment{}, fmt.Errorf("%w: bad task count", ErrUserData)
	}
	b = b[k:]
	if n > 0 {
		a.Tasks = make([]ID, 0, n)
	}
	var prev uint64
	for i := range n {
		d, k := uvarint(b)
		if k <= 0 || i > 0 && d == 0 || d >= 1<<31 {
			return "", Assignment{}, fmt.Errorf("%w: bad task %d", ErrUserData, i)
		}
		b = b[k:]
		prev += d
		if prev >= 1<<31 {
			return "", Assignment{}, fmt.Errorf("%w: task ID out of range", ErrUserData)
		}
		a.Tasks = append(a.Tasks, ID(prev))
	}
	if len(b) != 0 {
		return "", Assignment{}, fmt.Errorf("%w: %d trailing bytes", ErrUserData, len(b))
	}
	return settings, a, nil
}

// uvarint is binary.Uvarint that also rejects non-canonical encodings
// (a padded last byte), so that decoding and encoding are inverses.
func uvarint(b []byte) (uint64, int) {
	v, k := binary.Uvarint(b)
	if k > 1 && b[k-1] == 0 {
		return 0, -1
	}
	return v, k
}
