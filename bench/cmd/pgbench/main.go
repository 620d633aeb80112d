package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(environ(), os.Stdout, os.Stderr))
}

func environ() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// run is the whole program: 0 when the report was written (even if some
// steps failed: the report says which), 1 when it could not be, 2 on a bad
// configuration.
func run(env map[string]string, stdout, stderr io.Writer) int {
	cfg, err := loadConfig(env)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	for _, d := range []string{cfg.WorkDir, cfg.ResultsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &runner{
		cfg: cfg, log: log,
		tools: tools{kafkaSh: cfg.KafkaSh, brokers: strings.Join(cfg.Brokers, ","), logDir: cfg.WorkDir},
		tag:   "b" + strconv.FormatInt(time.Now().Unix()%1e6, 10),
	}
	res := r.suite(ctx)
	md := render(res)
	path := resultPath(cfg.ResultsDir, res.Started, res.Machine.ID)
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprint(stdout, md)
	fmt.Fprintf(stdout, "\n(written to %s)\n", path)
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

// resultPath is dir/<date>-<machine>.md, with -2, -3, ... added when a run
// of the same day is already there (earlier runs are kept).
func resultPath(dir string, at time.Time, id string) string {
	base := at.Format("2006-01-02") + "-" + id
	p := filepath.Join(dir, base+".md")
	for n := 2; ; n++ {
		if _, err := os.Stat(p); os.IsNotExist(err) {
			return p
		}
		p = filepath.Join(dir, fmt.Sprintf("%s-%d.md", base, n))
	}
}
