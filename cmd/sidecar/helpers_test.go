package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/phasegate/phasegate/proxy"
)

// pollUntil calls cond every 50 ms until it holds or timeout passes.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		<-tick.C
	}
}

// partKey names a partition of the status as topic/partition.
func partKey(p proxy.PartitionStatus) string { return p.Topic + "/" + strconv.Itoa(int(p.Partition)) }
