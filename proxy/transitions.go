package proxy

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/phasegate/phasegate/align"
)

// A partition's pause, resume, idle and live transitions are logged in
// aggregate: at most one line per kind per transitionEvery, with the count
// and the first few partitions named; each transition is at debug. With
// hundreds of partitions a line per transition drowned the log (issue 15:
// 1,454 pause/resume and 512 idle lines in 16 s at 512 partitions).
const (
	transitionEvery = time.Second
	transitionNames = 5
)

type transitionKind int

const (
	tPaused transitionKind = iota
	tResumed
	tIdle
	tLive
	nTransitions
)

// transitionText is each kind's info line: what happened and what it means.
var transitionText = [nTransitions]string{
	tPaused:  "partitions paused: they run ahead of the global watermark while the buffer (or the dedupe cache) is over half its bound; they resume when the slowest partition catches up",
	tResumed: "partitions resumed",
	tIdle:    "partitions idle: no record for PHASEGATE_IDLE_TIMEOUT and no lag; phases seal without them (sealed_by idle), and a record of a sealed phase arriving later goes to the quarantine",
	tLive:    "partitions live again",
}

// transitionDebug is each kind's debug line, one per transition.
var transitionDebug = [nTransitions]string{
	tPaused: "partition paused", tResumed: "partition resumed", tIdle: "partition idle", tLive: "partition live again",
}

// transitions gathers the transitions of the last transitionEvery.
type transitions struct {
	last  time.Time
	count [nTransitions]int
	names [nTransitions][]string
}

// add records one transition of k, logged at debug now and counted for the
// next aggregate line.
func (t *transitions) add(log *slog.Logger, kind transitionKind, k align.TP, args ...any) {
	t.count[kind]++
	if len(t.names[kind]) < transitionNames {
		t.names[kind] = append(t.names[kind], k.String())
	}
	if log.Enabled(context.Background(), slog.LevelDebug) {
		log.Debug(transitionDebug[kind], append([]any{"partition", k.String()}, args...)...)
	}
}

// flush writes one info line per kind with transitions, once transitionEvery
// has passed since the last flush (or at once with force).
func (t *transitions) flush(log *slog.Logger, now time.Time, force bool) {
	if !force && now.Sub(t.last) < transitionEvery {
		return
	}
	t.last = now
	for kind := range nTransitions {
		n := t.count[kind]
		if n == 0 {
			continue
		}
		args := []any{"count", n, "partitions", strings.Join(t.names[kind], ",")}
		if n > len(t.names[kind]) {
			args[3] = args[3].(string) + ",…"
		}
		log.Info(transitionText[kind], args...)
		t.count[kind], t.names[kind] = 0, t.names[kind][:0]
	}
}
