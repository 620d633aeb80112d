package main

import (
	"bufio"
	"os"
	"strings"
	"time"
)

// logLine is one line of a sidecar's text log (log/slog's TextHandler:
// time=... level=... msg="..." key=value ...).
type logLine struct {
	at    time.Time
	level string
	text  string // the whole line
}

// readLog returns the lines of a sidecar log at or after since (a
// restarted sidecar appends to its predecessor's log).
func readLog(path string, since time.Time) ([]logLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []logLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l, ok := parseLogLine(sc.Text())
		if ok && !l.at.Before(since) {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

func parseLogLine(s string) (logLine, bool) {
	rest, ok := strings.CutPrefix(s, "time=")
	if !ok {
		return logLine{}, false
	}
	ts, rest, _ := strings.Cut(rest, " ")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return logLine{}, false
	}
	l := logLine{at: at, text: s}
	if lv, ok := strings.CutPrefix(rest, "level="); ok {
		l.level, _, _ = strings.Cut(lv, " ")
	}
	return l, true
}

// firstLine is the first line whose text holds every one of subs.
func firstLine(lines []logLine, subs ...string) (logLine, bool) {
	for _, l := range lines {
		all := true
		for _, s := range subs {
			if !strings.Contains(l.text, s) {
				all = false
				break
			}
		}
		if all {
			return l, true
		}
	}
	return logLine{}, false
}

// countLines counts the lines that hold sub.
func countLines(lines []logLine, sub string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l.text, sub) {
			n++
		}
	}
	return n
}
