package proxy

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/phasegate/phasegate/align"
)

// Hundreds of transitions make one info line per kind per second, naming
// the count and the first few partitions; each one is at debug.
func TestTransitionsAggregate(t *testing.T) {
	cases := []struct {
		name       string
		level      slog.Level
		paused     int
		idle       int
		wantInfo   []string
		wantDebugs int
	}{
		{"512 pauses and 73 idle partitions: two lines", slog.LevelInfo, 512, 73,
			[]string{"partitions paused: ", "count=512 partitions=in/0,in/1,in/2,in/3,in/4,…", "partitions idle: ", "count=73 "}, 0},
		{"three pauses: named in full", slog.LevelInfo, 3, 0, []string{"count=3 partitions=in/0,in/1,in/2\n"}, 0},
		{"at debug, each transition too", slog.LevelDebug, 4, 2, []string{"count=4 ", "count=2 "}, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: c.level}))
			var tr transitions
			now := time.Unix(1_700_000_000, 0)
			tr.flush(log, now, false)
			for i := range c.paused {
				tr.add(log, tPaused, align.TP{Topic: "in", Partition: int32(i)}, "reasons", []string{"buffer"})
			}
			for i := range c.idle {
				tr.add(log, tIdle, align.TP{Topic: "in", Partition: int32(i)})
			}
			tr.flush(log, now.Add(500*time.Millisecond), false) // within the second: nothing yet
			if strings.Contains(buf.String(), "level=INFO") {
				t.Fatalf("logged before the second was over:\n%s", buf.String())
			}
			tr.flush(log, now.Add(time.Second), false)
			out := buf.String()
			infos := strings.Count(out, "level=INFO")
			kinds := 0
			for _, n := range []int{c.paused, c.idle} {
				if n > 0 {
					kinds++
				}
			}
			if infos != kinds {
				t.Fatalf("%d info lines, want %d:\n%s", infos, kinds, out)
			}
			for _, w := range c.wantInfo {
				if !strings.Contains(out, w) {
					t.Errorf("log lacks %q:\n%s", w, out)
				}
			}
			if got := strings.Count(out, "level=DEBUG"); got != c.wantDebugs {
				t.Errorf("%d debug lines, want %d", got, c.wantDebugs)
			}
			buf.Reset()
			tr.flush(log, now.Add(3*time.Second), false)
			if buf.Len() != 0 {
				t.Errorf("counts not reset: %s", buf.String())
			}
		})
	}
}
