//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// instance is one sidecar process, logging JSON to its own file.
type instance struct {
	n       int // 1-based within the scenario
	cmd     *exec.Cmd
	http    string // host:port of /metrics, /healthz, /readyz, /phases
	log     string // path of its stderr and stdout
	started time.Time
	done    chan struct{} // closed once it exited and state is set
	state   *os.ProcessState
	exitAt  time.Time
}

// startInstance runs the sidecar binary with env (PHASEGATE_* settings).
func startInstance(n int, dir string, env []string) (*instance, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	in := &instance{n: n, http: addr, log: filepath.Join(dir, fmt.Sprintf("sidecar-%d.log", n)), done: make(chan struct{})}
	f, err := os.Create(in.log)
	if err != nil {
		return nil, err
	}
	in.cmd = exec.Command(suite.bin)
	if wrap := strings.Fields(os.Getenv("PHASEGATE_E2E_SIDECAR_WRAP")); len(wrap) > 0 {
		// A command that execs the sidecar in its own process (taskset,
		// nice): signals still reach the sidecar itself.
		in.cmd = exec.Command(wrap[0], append(wrap[1:], suite.bin)...)
	}
	in.cmd.Env = append(append(os.Environ(), env...), "PHASEGATE_HTTP_ADDR="+addr)
	in.cmd.Stdout, in.cmd.Stderr = f, f
	in.started = time.Now()
	if err := in.cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	go func() {
		_ = in.cmd.Wait()
		f.Close()
		in.state, in.exitAt = in.cmd.ProcessState, time.Now()
		close(in.done)
	}()
	return in, nil
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (in *instance) signal(sig syscall.Signal) error { return in.cmd.Process.Signal(sig) }

func (in *instance) exited() bool {
	select {
	case <-in.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit.
func (in *instance) wait(d time.Duration) bool {
	select {
	case <-in.done:
		return true
	case <-time.After(d):
		return false
	}
}

// describe is how the instance ended, for messages.
func (in *instance) describe() string {
	if !in.exited() {
		return fmt.Sprintf("instance %d still running", in.n)
	}
	return fmt.Sprintf("instance %d: %s after %s", in.n, in.state, in.exitAt.Sub(in.started).Round(time.Millisecond))
}

// logLine is one JSON line of a sidecar's log.
type logLine struct {
	Time  time.Time `json:"time"`
	Level string    `json:"level"`
	Msg   string    `json:"msg"`
	Phase *uint64   `json:"phase"`
	Err   string    `json:"err"`
	raw   string
}

// lines parses the instance's log (lines that are not JSON are skipped).
func (in *instance) lines() ([]logLine, error) {
	f, err := os.Open(in.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []logLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			l.raw = sc.Text()
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// status is the part of /phases the suite reads.
type status struct {
	Joined     bool    `json:"joined"`
	LastSealed *uint64 `json:"last_sealed_phase"`
	Sealed     []struct {
		Phase    uint64 `json:"phase"`
		SealedBy string `json:"sealed_by"`
	} `json:"sealed"`
	Fleet struct {
		Owned []int32 `json:"owned"`
	} `json:"fleet"`
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
	} `json:"partitions"`
}

// owned is how many tasks the instance owns.
func (st *status) owned() int { return len(st.Fleet.Owned) }

// phases asks the instance's /phases.
func (in *instance) phases(ctx context.Context) (*status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+in.http+"/phases", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/phases: %s", resp.Status)
	}
	var st status
	return &st, json.NewDecoder(resp.Body).Decode(&st)
}

// restartDelay is how long the supervisor waits before it starts a
// sidecar again, as a process manager's back-off would.
const restartDelay = 500 * time.Millisecond

// maxRestarts stops a crash loop from hiding a broken run.
const maxRestarts = 40

// supervisor keeps one sidecar running for a scenario: when the current
// instance exits for any reason other than stop or detach, it starts a new
// one and counts a restart.
type supervisor struct {
	t    *testing.T
	dir  string
	env  []string
	quit chan struct{}
	wg   sync.WaitGroup // the watchers

	mu       sync.Mutex // mu guards the fields below
	cur      *instance  // nil while detached or stopped
	all      []*instance
	restarts int
	stopping bool
	lost     bool      // its instance was lost for good (lose)
	gaveUp   *instance // the last instance, once the supervisor gave up
}

func newSupervisor(t *testing.T, dir string, env []string) *supervisor {
	s := &supervisor{t: t, dir: dir, env: env, quit: make(chan struct{})}
	t.Cleanup(s.cleanup)
	return s
}

// start launches a new instance as the supervised one.
func (s *supervisor) start() *instance {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.launchLocked()
	if err != nil {
		s.t.Fatalf("start the sidecar: %v", err)
	}
	return in
}

func (s *supervisor) launchLocked() (*instance, error) {
	in, err := startInstance(len(s.all)+1, s.dir, s.env)
	if err != nil {
		return nil, err
	}
	s.cur = in
	s.all = append(s.all, in)
	s.wg.Add(1)
	go s.watch(in)
	return in, nil
}

// watch restarts in when it exits while it is still the supervised one.
func (s *supervisor) watch(in *instance) {
	defer s.wg.Done()
	select {
	case <-in.done:
	case <-s.quit:
		return
	}
	select {
	case <-time.After(restartDelay):
	case <-s.quit:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.cur != in {
		return
	}
	if s.restarts >= maxRestarts {
		s.gaveUp, s.cur = in, nil
		return
	}
	s.restarts++
	if _, err := s.launchLocked(); err != nil {
		s.t.Errorf("restart the sidecar: %v", err)
		s.cur = nil
	}
}

// givenUp returns the last instance once the supervisor stopped
// restarting a sidecar that keeps exiting, else nil.
func (s *supervisor) givenUp() *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gaveUp
}

// current returns the supervised instance (nil while detached).
func (s *supervisor) current() *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// detach stops supervising the current instance and returns it: it is
// not restarted when it exits.
func (s *supervisor) detach() *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.cur
	s.cur = nil
	return in
}

// lose SIGKILLs the current instance and never restarts it: a machine
// lost for good.
func (s *supervisor) lose() error {
	s.mu.Lock()
	in := s.cur
	s.cur, s.lost = nil, true
	s.mu.Unlock()
	if in == nil {
		return errors.New("no instance to lose")
	}
	return in.signal(syscall.SIGKILL)
}

func (s *supervisor) isLost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// restartCount is how many times the supervisor restarted the sidecar.
func (s *supervisor) restartCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// instances returns every instance started so far.
func (s *supervisor) instances() []*instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*instance(nil), s.all...)
}

// stop ends supervision and shuts the current instance down with SIGTERM;
// it returns that instance (already exited), or an error when it did not
// exit within the grace period.
func (s *supervisor) stop() (*instance, error) {
	s.mu.Lock()
	s.stopping = true
	in := s.cur
	s.mu.Unlock()
	close(s.quit)
	s.wg.Wait()
	if in == nil {
		return nil, errors.New("no sidecar was running at the end")
	}
	if in.exited() {
		return in, fmt.Errorf("the sidecar had exited before the end: %s", in.describe())
	}
	if err := in.signal(syscall.SIGTERM); err != nil {
		return in, err
	}
	if !in.wait(40 * time.Second) {
		_ = in.signal(syscall.SIGKILL)
		in.wait(10 * time.Second)
		return in, fmt.Errorf("instance %d did not exit within 40 s of SIGTERM", in.n)
	}
	return in, nil
}

// cleanup kills whatever is still running (after a failed test).
func (s *supervisor) cleanup() {
	s.mu.Lock()
	s.stopping = true
	all := append([]*instance(nil), s.all...)
	s.mu.Unlock()
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	for _, in := range all {
		if !in.exited() {
			_ = in.signal(syscall.SIGCONT)
			_ = in.signal(syscall.SIGKILL)
			in.wait(10 * time.Second)
		}
	}
	s.wg.Wait()
}

// excerpt returns the log lines of in at level WARN or above, and those
// whose message contains one of the words, at most n of them.
func (in *instance) excerpt(n int, words ...string) string {
	ls, err := in.lines()
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range ls {
		keep := l.Level == "WARN" || l.Level == "ERROR"
		for _, w := range words {
			keep = keep || strings.Contains(l.Msg, w)
		}
		if keep {
			out = append(out, l.raw)
		}
	}
	if len(out) > n {
		out = append([]string{fmt.Sprintf("(%d earlier lines left out)", len(out)-n)}, out[len(out)-n:]...)
	}
	return strings.Join(out, "\n")
}
