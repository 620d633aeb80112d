package main

import (
	"testing"
	"time"
)

func TestStableWatchVisibleAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := &stableWatch{steps: map[int32][]stableStep{}}
	w.observe(0, 0, at(0))
	w.observe(0, 10, at(5))
	w.observe(0, 10, at(10)) // no change: not a step
	w.observe(0, 7, at(12))  // an older answer arriving late: not a step
	w.observe(0, 25, at(15))
	w.observe(1, 3, at(20))
	tests := []struct {
		name   string
		part   int32
		offset int64
		want   time.Time
		ok     bool
	}{
		{"below the first step's LSO", 0, 9, at(5), true},
		{"at an LSO: not yet visible", 0, 10, at(15), true},
		{"the last offset below the newest LSO", 0, 24, at(15), true},
		{"at the newest LSO: never seen", 0, 25, time.Time{}, false},
		{"another partition's steps", 1, 2, at(20), true},
		{"a partition never polled", 2, 0, time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := w.visibleAt(tt.part, tt.offset)
			if ok != tt.ok || !got.Equal(tt.want) {
				t.Fatalf("visibleAt(%d, %d) = %v, %v; want %v, %v", tt.part, tt.offset, got, ok, tt.want, tt.ok)
			}
		})
	}
}
