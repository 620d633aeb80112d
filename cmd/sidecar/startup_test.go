//go:build unix

package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A sidecar process against listeners that are not (the right) Kafka: each
// case runs the built binary twice. Left alone, it must exit with the
// status and the one ERROR line of the case; signalled with SIGTERM 2 s
// after its start, it must end within 25 s (with status 0 when it was
// still starting). While it starts, /healthz answers 200 and /readyz 503.
func TestStartupFaults(t *testing.T) {
	bin := sidecarBinary(t)
	tests := []struct {
		name     string
		listener func(t *testing.T) string // starts it, returns its address
		env      map[string]string
		code     int
		line     string // %[1]s is the listener's address
		slow     bool   // still starting 2 s after start: SIGTERM ends it with 0
		skipLone bool   // too slow to wait for alone (sarama's own timeouts)
	}{
		{
			name: "accepts and never answers", listener: silentListener, code: 1, slow: true,
			line: "%[1]s accepted the connection but answered nothing within 5s to a Kafka ApiVersions request: it is not a Kafka listener, or the broker hangs; check PHASEGATE_BROKERS and the broker",
		},
		{
			name: "speaks HTTP", listener: httpListener, code: 1, slow: true,
			line: `%[1]s answered in HTTP ("HTTP/1.0 404 Not Found"), not the Kafka protocol: it is a web server (a REST proxy, a UI, a metrics port?), not a broker listener: check the port in PHASEGATE_BROKERS`,
		},
		{
			name: "closes at once", listener: closingListener, code: 1,
			line: "%[1]s closed the connection without answering a Kafka ApiVersions request (closed at once): it is not a Kafka listener, or it expects another protocol than PHASEGATE_SECURITY_PROTOCOL=PLAINTEXT; check PHASEGATE_BROKERS and the listener's protocol",
		},
		{
			name: "TLS listener, plaintext configured", listener: tlsListenerAt, code: 1,
			line: "%[1]s is a TLS listener, but PHASEGATE_SECURITY_PROTOCOL=PLAINTEXT speaks plaintext: set PHASEGATE_SECURITY_PROTOCOL=SSL (and PHASEGATE_TLS_CA_FILE if its CA is not the system's), or use the brokers' plaintext port",
		},
		{
			name: "plaintext Kafka listener, TLS configured", listener: fakeKafka, env: map[string]string{"PHASEGATE_SECURITY_PROTOCOL": "SSL"}, code: 1,
			line: "TLS: %[1]s is a plaintext Kafka listener, but PHASEGATE_SECURITY_PROTOCOL=SSL expects TLS: set PHASEGATE_SECURITY_PROTOCOL=PLAINTEXT, or use the brokers' TLS port",
		},
		{
			name: "nothing listens", listener: closedPort, code: 1,
			line: "nothing listens at %[1]s (connection refused): check PHASEGATE_BROKERS and that the broker is up",
		},
		{
			name: "answers the probe, then hangs", listener: fakeKafka, slow: true, skipLone: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := tt.listener(t)
			env := map[string]string{
				"PHASEGATE_BROKERS": addr, "PHASEGATE_INPUT_TOPICS": "orders,payments", "PHASEGATE_OUTPUT_TOPIC": "aligned",
				"PHASEGATE_HTTP_ADDR": "127.0.0.1:0", "PHASEGATE_LOG_FORMAT": "json",
			}
			for k, v := range tt.env {
				env[k] = v
			}
			want := fmt.Sprintf(tt.line, addr)
			if !tt.skipLone {
				t.Run("alone", func(t *testing.T) {
					p := startProcess(t, bin, env)
					code, took := p.wait(t, time.Minute)
					errs := p.errors()
					if code != tt.code || len(errs) != 1 || errs[0] != want {
						t.Fatalf("exit %d after %s with ERROR lines %q;\nwant exit %d and %q\nlog:\n%s", code, took, errs, tt.code, want, p.out.String())
					}
					t.Logf("exit %d after %s: %s", code, took.Round(time.Millisecond), errs[0])
				})
			}
			t.Run("SIGTERM at 2s", func(t *testing.T) {
				p := startProcess(t, bin, env)
				if tt.slow {
					base := "http://" + p.httpAddr(t)
					if code := get(t, base+"/healthz"); code != http.StatusOK {
						t.Errorf("/healthz during start-up: %d, want 200", code)
					}
					if code := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
						t.Errorf("/readyz during start-up: %d, want 503", code)
					}
				}
				time.Sleep(time.Until(p.started.Add(2 * time.Second))) // the fault's timing, not a wait for state
				sent := time.Now()
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
				code, ran := p.wait(t, 25*time.Second)
				after := time.Since(sent)
				wantCode := tt.code
				if tt.slow {
					wantCode = 0
				}
				if code != wantCode {
					t.Fatalf("exit %d, want %d; log:\n%s", code, wantCode, p.out.String())
				}
				if tt.slow && !strings.Contains(p.out.String(), "start-up interrupted by a signal while waiting for ") {
					t.Errorf("the log does not say start-up was interrupted:\n%s", p.out.String())
				}
				if ran < 2*time.Second {
					t.Logf("exit %d after %s, before the signal: nothing was left to interrupt", code, ran.Round(time.Millisecond))
					return
				}
				t.Logf("exit %d, %s after SIGTERM", code, after.Round(time.Millisecond))
			})
		})
	}
}

// process is a running sidecar binary with its combined output.
type process struct {
	cmd     *exec.Cmd
	out     *syncBuffer
	started time.Time
	exitAt  time.Time     // set before done is closed
	done    chan struct{} // closed when the process has exited
}

func startProcess(t *testing.T, bin string, env map[string]string) *process {
	t.Helper()
	cmd := exec.Command(bin)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &process{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.started = time.Now()
	go func() {
		_ = cmd.Wait()
		p.exitAt = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits up to limit for the process to exit; it returns the exit
// status and how long the process ran.
func (p *process) wait(t *testing.T, limit time.Duration) (int, time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("still running after %s; log:\n%s", limit, p.out.String())
	}
	return p.cmd.ProcessState.ExitCode(), p.exitAt.Sub(p.started)
}

// logLine is one JSON log line of the sidecar.
type logLine struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	HTTP  string `json:"http"`
}

func (p *process) lines() []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(p.out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

func (p *process) errors() []string {
	var errs []string
	for _, l := range p.lines() {
		if l.Level == "ERROR" {
			errs = append(errs, l.Msg)
		}
	}
	return errs
}

// httpAddr is the address the sidecar logged it serves HTTP on.
func (p *process) httpAddr(t *testing.T) string {
	t.Helper()
	var addr string
	pollUntil(t, 10*time.Second, "the sidecar logged no HTTP address", func() bool {
		for _, l := range p.lines() {
			if l.HTTP != "" {
				addr = l.HTTP
				return true
			}
		}
		return false
	})
	return addr
}

// The listeners. Each returns its address and closes at cleanup.

func tcpListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// serveConns runs handle on every accepted connection until cleanup.
func serveConns(t *testing.T, ln net.Listener, handle func(net.Conn)) string {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { handle(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// silentListener accepts and reads, and never answers.
func silentListener(t *testing.T) string {
	return serveConns(t, tcpListener(t), func(c net.Conn) {
		defer c.Close()
		_, _ = io.Copy(io.Discard, c)
	})
}

func closingListener(t *testing.T) string {
	return serveConns(t, tcpListener(t), func(c net.Conn) { c.Close() })
}

func httpListener(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func tlsListenerAt(t *testing.T) string {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the probe's plaintext bytes are expected here
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// closedPort is an address where nothing listens.
func closedPort(t *testing.T) string {
	ln := tcpListener(t)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Kafka's API keys that fakeKafka knows: ApiVersions, which it answers, and
// InitProducerId, which it lists so that the probe finds transactions.
const (
	apiVersionsKey    = 18
	apiInitProducerID = 22
)

// fakeKafka answers ApiVersions v0 as a broker does (with InitProducerId)
// and nothing else: every other request waits for the connection to close.
// Like a broker, it drops a connection whose first bytes give an absurd
// request size (a TLS ClientHello).
func fakeKafka(t *testing.T) string {
	return serveConns(t, tcpListener(t), func(c net.Conn) {
		defer c.Close()
		for {
			head := make([]byte, 12)
			if _, err := io.ReadFull(c, head); err != nil {
				return
			}
			size := binary.BigEndian.Uint32(head)
			if size > 1<<20 || size < 8 {
				return
			}
			if _, err := io.CopyN(io.Discard, c, int64(size)-8); err != nil {
				return
			}
			key, version := binary.BigEndian.Uint16(head[4:]), binary.BigEndian.Uint16(head[6:])
			if key != apiVersionsKey || version != 0 {
				_, _ = io.Copy(io.Discard, c)
				return
			}
			resp := binary.BigEndian.AppendUint32(nil, 4+2+4+3*6)
			resp = append(resp, head[8:12]...) // correlation ID
			resp = binary.BigEndian.AppendUint16(resp, 0)
			resp = binary.BigEndian.AppendUint32(resp, 3)
			for _, api := range [][3]uint16{{apiVersionsKey, 0, 3}, {apiInitProducerID, 0, 4}, {3, 0, 12}} {
				for _, v := range api {
					resp = binary.BigEndian.AppendUint16(resp, v)
				}
			}
			if _, err := c.Write(resp); err != nil {
				return
			}
		}
	})
}

// sidecarBinary builds ./cmd/sidecar once per test binary.
func sidecarBinary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "phasegate-sidecar-test-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		build.path = filepath.Join(dir, "sidecar")
		out, err := exec.Command("go", "build", "-o", build.path, ".").CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// build is the sidecar binary the process tests share; TestMain removes it.
var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// syncBuffer is a bytes buffer safe for a writer and readers.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
