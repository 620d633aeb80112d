package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	brokers := flag.String("brokers", "localhost:9092", "bootstrap servers, comma separated")
	topic := flag.String("topic", "aligned", "phasegate's output topic")
	group := flag.String("group", "phasegate-join", "consumer group of the join")
	left := flag.String("left", "orders", "input topic of the left branch")
	right := flag.String("right", "payments", "input topic of the right branch")
	idle := flag.Duration("idle", 0, "exit after this long without a record (0: run until SIGINT/SIGTERM)")
	session := flag.Duration("session-timeout", 45*time.Second, "group session timeout: how long a killed join holds its partitions")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	j := &Join{Left: *left, Right: *right, Out: os.Stdout, Idle: *idle, SessionTimeout: *session}
	err := j.Run(ctx, strings.Split(*brokers, ","), *topic, *group)
	switch {
	case errors.Is(err, ErrNewerVersion):
		fmt.Fprintln(os.Stderr, "join: stopped at a marker of a newer wire format version, upgrade the join:", err)
		os.Exit(1)
	case err != nil && ctx.Err() == nil:
		fmt.Fprintln(os.Stderr, "join:", err)
		os.Exit(1)
	}
	if j.Violations > 0 {
		os.Exit(3)
	}
}

// waitIdle is how often Run checks the idle deadline while nothing arrives.
const waitIdle = 200 * time.Millisecond
