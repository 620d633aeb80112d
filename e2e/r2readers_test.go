//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readerNames are the three readers of docs/CONSUMING.md, in the order
// R2 reports them.
var readerNames = []string{"go", "java", "python"}

// readerCommand returns the command line of reader name on topic in
// group; idle is its idle limit in seconds, 0 for none (it then runs
// until SIGTERM).
type readerCommand func(name, topic, group string, idle int) []string

// buildReaders builds the Go join and checks that the Java reader is
// built (scripts/install-readers.sh), and returns how to run each reader.
func buildReaders(t *testing.T, brokers string, left, right string) readerCommand {
	t.Helper()
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
	return func(name, topic, group string, idle int) []string {
		flags := flagsFor(name, brokers, topic, group)
		switch name {
		case "go":
			// The join's session timeout is a flag; the others keep their
			// clients' 45 s, which leaveGroup makes moot.
			return append([]string{join, "-idle", fmt.Sprintf("%ds", idle), "-session-timeout", "6s",
				"-left", left, "-right", right}, flags...)
		case "java":
			return append([]string{"java", "-Xmx256m", "-cp", filepath.Join(java, "classes") + ":" + filepath.Join(java, "lib", "*"),
				"io.github.phasegate.reader.Reader", "--idle", fmt.Sprint(idle)}, flags...)
		default:
			return append([]string{"python3", filepath.Join(suite.root, "examples", "python-reader", "reader.py"),
				"--idle", fmt.Sprint(idle)}, flags...)
		}
	}
}

// readerProc is one running reader process.
type readerProc struct {
	cmd  *exec.Cmd
	run  *readerRun
	done chan struct{} // closed once it exited and its lines are all read
}

// startReaderProc runs args, its stderr into stderrPath, and calls onLine
// for each phase, skipped or VIOLATION line it prints; run gets its exit
// status.
func startReaderProc(args []string, stderrPath string, run *readerRun, onLine func(string)) (*readerProc, error) {
	errf, err := os.Create(stderrPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = errf
	out, err := cmd.StdoutPipe()
	if err != nil {
		errf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		errf.Close()
		return nil, err
	}
	p := &readerProc{cmd: cmd, run: run, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer errf.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "phase=") || strings.HasPrefix(l, "skipped ") || strings.HasPrefix(l, "VIOLATION") {
				onLine(l)
			}
		}
		_ = cmd.Wait()
		p.run.code = cmd.ProcessState.ExitCode()
	}()
	return p, nil
}

// readerGroup is one reader in its own consumer group, killed and
// restarted while the sidecars write.
type readerGroup struct {
	name, group string
	args        []string
	dir         string

	mu      sync.Mutex // guards the fields below: the line readers write them
	runs    []*readerRun
	printed map[phaseKey]bool // every phase printed by any run
}

// add records a line of the current run.
func (g *readerGroup) add(run *readerRun, l string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	run.lines = append(run.lines, l)
	if k, _, skip, _, ok := parseLine(l); ok && !skip {
		g.printed[k] = true
	}
}

// distinct is how many phases the group printed so far.
func (g *readerGroup) distinct() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.printed)
}

// printedAll reports whether every phase of want was printed.
func (g *readerGroup) printedAll(want map[phaseKey]truePhase) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range want {
		if !g.printed[k] {
			return false
		}
	}
	return true
}

// follow runs the reader from offset 0 while the sidecars write: it is
// SIGKILLed once it has printed each number of distinct phases in kills,
// and started again in the same group right after the group's commit was
// read (kadm FetchOffsets) and the dead member removed. A reader that
// exits by itself is started again the same way (at most maxCrashes
// times; the judge reports each such run). Once the truth is sent on
// final, it runs until it printed every phase of it (or 2 minutes
// passed), then it is stopped with SIGTERM.
func (g *readerGroup) follow(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, kills []int,
	final <-chan map[phaseKey]truePhase) {
	const maxCrashes = 5
	var want map[phaseKey]truePhase
	var deadline time.Time
	killed, crashes := 0, 0
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for n := 1; ; n++ {
		run := &readerRun{stderr: filepath.Join(g.dir, fmt.Sprintf("%s-%d.stderr", g.name, n))}
		g.mu.Lock()
		g.runs = append(g.runs, run)
		g.mu.Unlock()
		p, err := startReaderProc(g.args, run.stderr, run, func(l string) { g.add(run, l) })
		if err != nil {
			t.Errorf("reader %s: %v", g.name, err)
			return
		}
		for {
			if ctx.Err() != nil {
				g.stop(p, syscall.SIGKILL) // the scenario failed
				return
			}
			if exitedProc(p) {
				g.stop(p, 0)
				break
			}
			if killed < len(kills) && (g.distinct() >= kills[killed] || want != nil && g.printedAll(want)) {
				_ = p.cmd.Process.Signal(syscall.SIGKILL)
				<-p.done
				run.killed, run.ok = true, true
				killed++
				break
			}
			if killed == len(kills) && want != nil && (g.printedAll(want) || time.Now().After(deadline)) {
				g.stop(p, syscall.SIGTERM)
				return
			}
			select {
			case w := <-final:
				want, deadline = w, time.Now().Add(2*time.Minute)
			case <-tick.C:
			}
		}
		if !run.killed {
			if crashes++; crashes > maxCrashes {
				t.Errorf("reader %s exited by itself %d times; not started again", g.name, crashes)
				return
			}
		}
		if err := g.afterKill(ctx, cl, topic, run); err != nil {
			if ctx.Err() == nil {
				t.Errorf("reader %s after run %d: %v", g.name, n, err)
			}
			return
		}
	}
}

// stop ends p with sig (0: it has exited) and judges its status: 0, or
// for the Java reader stopped by SIGTERM 143 (the JVM's status after its
// shutdown hook; violations are judged from its lines).
func (g *readerGroup) stop(p *readerProc, sig syscall.Signal) {
	if sig != 0 {
		_ = p.cmd.Process.Signal(sig)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	p.run.ok = p.run.code == 0 || g.name == "java" && sig == syscall.SIGTERM && p.run.code == 143
}

func exitedProc(p *readerProc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// afterKill removes the killed reader from its group, so that its
// restart is assigned at once rather than after its client's session
// timeout (45 s for Java and librdkafka), and then reads the group's
// commits. A commit the dead process had in flight is either done before
// the removal or refused after it (unknown member), so what FetchOffsets
// returns is the last commit the restarted reader can start from.
func (g *readerGroup) afterKill(ctx context.Context, cl *kgo.Client, topic string, run *readerRun) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if err := leaveGroup(ctx, cl, g.group); err != nil {
		return err
	}
	offs, err := adm.FetchOffsets(ctx, g.group)
	if err != nil {
		return fmt.Errorf("fetch the group's offsets: %w", err)
	}
	run.after = map[int32]groupCommit{}
	for p, o := range offs[topic] {
		if o.Err != nil {
			return fmt.Errorf("offset of %s/%d: %w", topic, p, o.Err)
		}
		if o.At >= 0 {
			run.after[p] = groupCommit{offset: o.At, metadata: o.Metadata}
		}
	}
	return nil
}

// leaveGroup removes every member of group (LeaveGroup by member ID, as a
// session timeout would).
func leaveGroup(ctx context.Context, cl *kgo.Client, group string) error {
	dg, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describe group %s: %w", group, err)
	}
	d := dg[group]
	if d.Err != nil {
		return fmt.Errorf("describe group %s: %w", group, d.Err)
	}
	if len(d.Members) == 0 {
		return nil
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	for _, m := range d.Members {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID, lm.InstanceID = m.MemberID, m.InstanceID
		req.Members = append(req.Members, lm)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("leave group %s: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("leave group %s: %w", group, err)
	}
	for _, m := range resp.Members {
		if err := kerr.ErrorForCode(m.ErrorCode); err != nil && err != kerr.UnknownMemberID {
			return fmt.Errorf("leave group %s member %s: %w", group, m.MemberID, err)
		}
	}
	return nil
}

// setMidOffsets sets group's committed offsets of topic by hand, with empty
// metadata, to an offset between 40 % and 58 % of each partition (rule
// C4: a reader must prove each phase or skip it), and returns them.
func setMidOffsets(ctx context.Context, adm *kadm.Client, topic, group string) (map[int32]int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	at := map[int32]int64{}
	var os kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) {
		at[o.Partition] = o.Offset * int64(40+3*o.Partition) / 100
		os.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: at[o.Partition], LeaderEpoch: -1})
	})
	resp, err := adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	return at, err
}
