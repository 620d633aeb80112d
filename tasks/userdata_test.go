package tasks

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestAssignmentEncoding(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		a        Assignment
		want     []byte
	}{
		{"nothing yet", "ab", Assignment{Generation: -1},
			[]byte{2, 2, 'a', 'b', 0xff, 0xff, 0xff, 0xff, 0}},
		{"tasks as deltas", "x", Assignment{Generation: 7, Tasks: []ID{2, 3, 200}},
			[]byte{2, 1, 'x', 0, 0, 0, 7, 3, 2, 1, 197, 1}},
		{"task 0, no settings", "", Assignment{Generation: 0, Tasks: []ID{0}},
			[]byte{2, 0, 0, 0, 0, 0, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendAssignment(nil, tt.settings, tt.a)
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("AppendAssignment = %v, want %v", got, tt.want)
			}
			st, a, err := DecodeAssignment(got)
			if err != nil || st != tt.settings || !reflect.DeepEqual(a, tt.a) {
				t.Fatalf("DecodeAssignment = %q, %+v, %v", st, a, err)
			}
		})
	}
}

func TestDecodeAssignmentErrors(t *testing.T) {
	head := []byte{2, 1, 'x', 0, 0, 0, 7}
	with := func(tail ...byte) []byte { return append(append([]byte{}, head...), tail...) }
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"settings beyond the bytes", []byte{2, 5, 'x'}},
		{"short", head[:6]},
		{"no count", head},
		{"version 1 (an older phasegate)", append([]byte{1}, with(0)[1:]...)},
		{"count beyond the bytes", with(3, 1, 1)},
		{"repeated task", with(2, 1, 0)},
		{"trailing bytes", with(1, 1, 9)},
		{"padded varint", with(1, 0x81, 0x00)},
		{"task ID beyond int32", with(1, 0x80, 0x80, 0x80, 0x80, 0x08)},
		{"tasks adding up beyond int32", with(2, 0xff, 0xff, 0xff, 0xff, 0x07, 0x01)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, a, err := DecodeAssignment(tt.b); !errors.Is(err, ErrUserData) {
				t.Fatalf("DecodeAssignment(%v) = %+v, %v; want ErrUserData", tt.b, a, err)
			}
		})
	}
}

func FuzzDecodeAssignment(f *testing.F) {
	f.Add(AppendAssignment(nil, "routing=key tasks=3", Assignment{Generation: -1}))
	f.Add(AppendAssignment(nil, "x", Assignment{Generation: 9, Tasks: []ID{0, 1, 5, 1 << 30}}))
	f.Add([]byte{2, 1, 'x', 0, 0, 0, 7, 2, 1, 0})
	f.Add([]byte{2, 1, 'x', 0, 0, 0, 7, 1, 0x81, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, a, err := DecodeAssignment(b)
		if err != nil {
			if !errors.Is(err, ErrUserData) {
				t.Fatalf("error %v does not wrap ErrUserData", err)
			}
			return
		}
		for i, id := range a.Tasks {
			if id < 0 || i > 0 && id <= a.Tasks[i-1] {
				t.Fatalf("decoded tasks %v are not ascending task IDs", a.Tasks)
			}
		}
		if back := AppendAssignment(nil, st, a); !bytes.Equal(back, b) {
			t.Fatalf("DecodeAssignment(%v) = %+v, which encodes as %v", b, a, back)
		}
	})
}
