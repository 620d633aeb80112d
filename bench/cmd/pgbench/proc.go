package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a child process in a process group of its own, so that a Kafka
// tool (kafka.sh runs java as its child) is stopped whole. Its stdout lines
// go to onLine (when set) and, with stderr, to a log file.
type proc struct {
	cmd     *exec.Cmd
	started time.Time
	log     *os.File
	done    chan struct{}
	err     error // set before done is closed
	stdout  chan struct{}
}

// startProc runs name with args and env added to the environment. onLine,
// when set, is called on the reader goroutine with each stdout line and the
// time it was read.
func startProc(name string, args []string, env []string, logPath string, onLine func(line string, at time.Time)) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // a restarted process appends
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, log: f, done: make(chan struct{}), stdout: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		defer close(p.stdout)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			at := time.Now()
			fmt.Fprintln(f, line)
			if onLine != nil {
				onLine(line, at)
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		<-p.stdout // Wait must not run before the pipe is read to its end
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is the child's process ID (the group's leader).
func (p *proc) pid() int { return p.cmd.Process.Pid }

// wait waits for the process to exit or ctx to end (then kills the group).
func (p *proc) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		p.kill()
		<-p.done
		return ctx.Err()
	}
}

// stop sends SIGTERM to the group and waits up to grace, then SIGKILL.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		p.kill()
		<-p.done
		return fmt.Errorf("pid %d did not stop within %s after SIGTERM; killed", p.pid(), grace)
	}
}

func (p *proc) kill() { _ = syscall.Kill(-p.pid(), syscall.SIGKILL) }

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// cpuSeconds is user+system time of the exited process and the children it
// waited for (a Kafka tool's JVM under kafka.sh's bash).
func (p *proc) cpuSeconds() float64 {
	st := p.cmd.ProcessState
	if st == nil {
		return 0
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		return tv(ru.Utime) + tv(ru.Stime)
	}
	return (st.UserTime() + st.SystemTime()).Seconds()
}

// maxRSS is the peak resident set of the exited process or its largest
// waited-for descendant, in bytes.
func (p *proc) maxRSS() int64 {
	if st := p.cmd.ProcessState; st != nil {
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			return ru.Maxrss << 10 // kilobytes on Linux
		}
	}
	return 0
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// usage is what /proc says of a live process.
type usage struct {
	CPU     float64 // utime + stime, seconds
	HWM     int64   // VmHWM, bytes
	RSS     int64   // VmRSS, bytes
	RSSFile int64   // RssFile: the binary's and other files' resident pages, bytes
}

// userHZ is the unit of utime and stime in /proc/<pid>/stat; Linux fixes it
// at 100 for user space on every architecture Go supports.
const userHZ = 100

// procUsage reads /proc/<pid>/stat and /proc/<pid>/status.
func procUsage(pid int) (usage, error) {
	var u usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	if u.CPU, err = parseStatCPU(string(stat)); err != nil {
		return u, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	u.HWM, u.RSS, u.RSSFile = parseStatusMem(string(status))
	return u, nil
}

// parseStatCPU returns utime+stime in seconds from a /proc/<pid>/stat line.
// The command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("pgbench: /proc stat without a command name: %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("pgbench: /proc stat has %d fields after the name", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("pgbench: /proc stat utime %q stime %q", f[11], f[12])
	}
	return float64(ut+st) / userHZ, nil
}

// parseStatusMem returns VmHWM, VmRSS and RssFile in bytes from
// /proc/<pid>/status.
func parseStatusMem(status string) (hwm, rss, rssFile int64) {
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmHWM" && k != "VmRSS" && k != "RssFile") {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			hwm = n << 10
		case "VmRSS":
			rss = n << 10
		default:
			rssFile = n << 10
		}
	}
	return hwm, rss, rssFile
}
