//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/markers"
)

// phaseLine is one reader's line for a phase of a partition
// (docs/CONSUMING.md); the Go join appends its join counts.
var phaseLine = regexp.MustCompile(`^phase=(\d+) partition=(\d+) records=(\d+) sources=(\S*) marker_count=(-?\d+) sealed_by=(\S+)`)

// readerIdle ends a reader after this long without a record: the output is
// complete before the readers start.
const readerIdle = "10"

// R1: the three readers of docs/CONSUMING.md (Go on franz-go, Java on
// kafka-clients, Python on confluent-kafka) read a real phasegate output in
// their own consumer groups; each prints every phase of every partition
// once, with the records it buffered equal to the marker's count and
// sources, and no violation. Then the Go join is SIGKILLed a third of the
// way through and restarted in its group: no phase is missed, and only the
// last phase a partition printed before the kill (printed, not yet
// committed) may come again.
func TestR1Readers(t *testing.T) {
	sc := newScenario(t, "R1")
	sc.start(newPlan(sc.topo, 11, nil), nil)
	sc.finish()
	r := sc.check()
	want := markerLines(t, r.outRecs)
	brokers := strings.Join(sc.b.addrs, ",")
	join := filepath.Join(suite.work, "join")
	build := exec.Command("go", "build", "-o", join, "./examples/join")
	build.Dir = suite.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build examples/join: %v\n%s", err, out)
	}
	java := filepath.Join(suite.root, "examples", "java-reader", "target")
	if _, err := os.Stat(filepath.Join(java, "classes", "io", "github", "phasegate", "reader", "Reader.class")); err != nil {
		t.Fatalf("the Java reader is not built (run scripts/install-readers.sh): %v", err)
	}
	readers := map[string][]string{
		"go": {join, "-idle", readerIdle + "s", "-left", sc.topo.orders, "-right", sc.topo.payments},
		"java": {"java", "-cp", filepath.Join(java, "classes") + ":" + filepath.Join(java, "lib", "*"),
			"io.github.phasegate.reader.Reader", "--idle", readerIdle},
		"python": {"python3", filepath.Join(suite.root, "examples", "python-reader", "reader.py"), "--idle", readerIdle},
	}
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(readers)) {
		args := append(readers[name], flagsFor(name, brokers, sc.topo.out, sc.name+"-"+name)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			lines, code, stderr := runReader(context.Background(), args, 0)
			agree, bad := compareLines(want, lines)
			verdict := "PASS"
			if code != 0 || len(bad) > 0 || agree != len(want) {
				verdict = "FAIL"
				t.Errorf("reader %s: exit %d, %d of %d phase lines agree with the markers; first disagreements: %v\nstderr: %s",
					name, code, agree, len(want), bad[:min(len(bad), 5)], tail(stderr, 10))
			}
			fmt.Printf("R1 reader=%s lines=%d markers=%d agree=%d exit=%d time=%s verdict=%s\n",
				name, len(lines), len(want), agree, code, time.Since(t0).Round(100*time.Millisecond), verdict)
			for _, l := range lines[:min(3, len(lines))] {
				fmt.Printf("R1   %s: %s\n", name, l)
			}
		}()
	}
	wg.Wait()
	// A killed member holds its partitions for the session timeout: 6 s,
	// the broker's minimum, and an idle limit that outlasts it.
	killArgs := append([]string{join, "-idle", "20s", "-session-timeout", "6s"}, flagsFor("go", brokers, sc.topo.out, sc.name+"-go-kill")...)
	killAndResume(t, sc, want, killArgs)
}

// killAndResume SIGKILLs the Go join after a third of the phase lines,
// restarts it in the same group and checks the two runs together.
func killAndResume(t *testing.T, sc *scenario, want map[string]string, args []string) {
	t0 := time.Now()
	first, _, _ := runReader(context.Background(), args, len(want)/3)
	second, code, stderr := runReader(context.Background(), args, 0)
	lastBeforeKill := map[string]string{} // partition -> its last key printed before the kill
	seen := map[string]int{}
	var bad []string
	for i, run := range [][]string{first, second} {
		for _, l := range run {
			k, rest, ok := lineKey(l)
			if !ok || want[k] != rest {
				bad = append(bad, l)
				continue
			}
			seen[k]++
			if i == 0 {
				lastBeforeKill[strings.Fields(k)[1]] = k
			}
		}
	}
	missed, twice := 0, 0
	for k := range want {
		switch n := seen[k]; {
		case n == 0:
			missed++
		case n == 2 && lastBeforeKill[strings.Fields(k)[1]] == k:
			twice++ // printed, killed before its commit: at least once
		case n > 1:
			t.Errorf("%s joined %d times across the kill", k, n)
		}
	}
	verdict := "PASS"
	if missed > 0 || code != 0 || len(first) == 0 || len(first) >= len(want) || len(bad) > 0 {
		verdict = "FAIL"
		t.Errorf("kill and resume: %d phase lines before the kill, %d after (exit %d), %d missed; disagreements %v\nstderr: %s",
			len(first), len(second), code, missed, bad[:min(len(bad), 5)], tail(stderr, 10))
	}
	fmt.Printf("R1 reader=go-kill before_kill=%d after_restart=%d markers=%d missed=%d repeated_last_uncommitted=%d time=%s verdict=%s\n",
		len(first), len(second), len(want), missed, twice, time.Since(t0).Round(100*time.Millisecond), verdict)
}

func flagsFor(reader, brokers, topic, group string) []string {
	dash := "--"
	if reader == "go" {
		dash = "-"
	}
	return []string{dash + "brokers", brokers, dash + "topic", topic, dash + "group", group}
}

// runReader runs a reader and returns its phase (and violation) lines.
// killAfter > 0 SIGKILLs it once it has printed that many phase lines.
func runReader(ctx context.Context, args []string, killAfter int) (lines []string, code int, stderr string) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute) // not the scenario's: the readers come after it
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, -1, err.Error()
	}
	if err := cmd.Start(); err != nil {
		return nil, -1, err.Error()
	}
	sc := bufio.NewScanner(out)
	phases := 0
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "phase=") || strings.HasPrefix(l, "VIOLATION") {
			lines = append(lines, l)
		}
		if strings.HasPrefix(l, "phase=") {
			phases++
			if killAfter > 0 && phases == killAfter {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
		}
	}
	_ = cmd.Wait()
	return lines, cmd.ProcessState.ExitCode(), errb.String()
}

// markerLines gives, per "phase=N partition=P", the part of a reader's line
// the marker determines: records, sources, count and sealed_by.
func markerLines(t *testing.T, parts [][]*kgo.Record) map[string]string {
	t.Helper()
	want := map[string]string{}
	for p, recs := range parts {
		for _, r := range recs {
			if header(r, markers.HeaderMarker) != "1" {
				continue
			}
			m, err := markers.DecodeOutputMarker(r.Value)
			if err != nil {
				t.Fatalf("partition %d offset %d: %v", p, r.Offset, err)
			}
			var src []string
			for _, topic := range slices.Sorted(maps.Keys(m.Sources)) {
				if m.Sources[topic] > 0 {
					src = append(src, topic+":"+strconv.FormatInt(m.Sources[topic], 10))
				}
			}
			want[fmt.Sprintf("phase=%d partition=%d", m.Phase, p)] = fmt.Sprintf("records=%d sources=%s marker_count=%d sealed_by=%s",
				m.Count, strings.Join(src, ","), m.Count, m.SealedBy)
		}
	}
	if len(want) == 0 {
		t.Fatal("the output holds no marker")
	}
	return want
}

// lineKey splits a phase line into its key and the marker-determined rest.
func lineKey(l string) (key, rest string, ok bool) {
	m := phaseLine.FindStringSubmatch(l)
	if m == nil {
		return "", "", false
	}
	return "phase=" + m[1] + " partition=" + m[2],
		fmt.Sprintf("records=%s sources=%s marker_count=%s sealed_by=%s", m[3], m[4], m[5], m[6]), true
}

// compareLines counts the markers whose phase a reader printed exactly
// once, as the marker says; bad lists every other line and every marker
// the reader never printed.
func compareLines(want map[string]string, lines []string) (agree int, bad []string) {
	got := map[string][]string{}
	for _, l := range lines {
		k, rest, ok := lineKey(l)
		if !ok {
			bad = append(bad, l)
			continue
		}
		got[k] = append(got[k], rest)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		switch g := got[k]; {
		case len(g) == 1 && g[0] == want[k]:
			agree++
		case len(g) == 0:
			bad = append(bad, k+": never printed")
		default:
			bad = append(bad, fmt.Sprintf("%s: printed %q, marker says %q", k, g, want[k]))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, k+": printed, no such marker")
		}
	}
	return agree, bad
}
