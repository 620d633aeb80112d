package tasks

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestAssignmentEncoding(t *testing.T) {
	tests := []struct {
		name string
		fp   uint64
		a    Assignment
		want []byte
	}{
		{"nothing yet", 0x0102030405060708, Assignment{Generation: -1},
			[]byte{1, 1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff, 0xff, 0xff, 0}},
		{"tasks as deltas", 1, Assignment{Generation: 7, Tasks: []ID{2, 3, 200}},
			[]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 3, 2, 1, 197, 1}},
		{"task 0", 1, Assignment{Generation: 0, Tasks: []ID{0}},
			[]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendAssignment(nil, tt.fp, tt.a)
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("AppendAssignment = %v, want %v", got, tt.want)
			}
			fp, a, err := DecodeAssignment(got)
			if err != nil || fp != tt.fp || !reflect.DeepEqual(a, tt.a) {
				t.Fatalf("DecodeAssignment = %x, %+v, %v", fp, a, err)
			}
		})
	}
}

func TestDecodeAssignmentErrors(t *testing.T) {
	head := []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7}
	with := func(tail ...byte) []byte { return append(append([]byte{}, head...), tail...) }
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short", head[:12]},
		{"no count", head},
		{"other version", append([]byte{2}, with(0)[1:]...)},
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
	f.Add(AppendAssignment(nil, 42, Assignment{Generation: -1}))
	f.Add(AppendAssignment(nil, 42, Assignment{Generation: 9, Tasks: []ID{0, 1, 5, 1 << 30}}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 2, 1, 0})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 1, 0x81, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		fp, a, err := DecodeAssignment(b)
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
		if back := AppendAssignment(nil, fp, a); !bytes.Equal(back, b) {
			t.Fatalf("DecodeAssignment(%v) = %+v, which encodes as %v", b, a, back)
		}
	})
}
