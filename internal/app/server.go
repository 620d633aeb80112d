package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/phasegate/phasegate/proxy"
)

// Server serves a process's HTTP endpoints. Its methods are safe for
// concurrent use; Close is safe to call twice.
type Server struct {
	ln       net.Listener
	srv      *http.Server
	pipe     atomic.Pointer[proxy.Pipeline]
	step     atomic.Pointer[string] // what start-up is waiting for
	stopping atomic.Bool
	served   chan struct{} // closed when Serve's goroutine has returned
}

// Options are what a Server serves beyond the fixed endpoints.
type Options struct {
	Registry *prometheus.Registry // /metrics; required
	Pprof    bool                 // serve Go's profiler on /debug/pprof/
}

// Listen binds addr and starts serving at once (before any pipeline
// exists, so /healthz answers during start-up). The error is the listener's
// (address in use, cannot assign), for the caller to explain.
func Listen(addr string, opts Options, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return Serve(ln, opts, log), nil
}

// Serve serves on ln, which the Server then owns.
func Serve(ln net.Listener, opts Options, log *slog.Logger) *Server {
	s := &Server{ln: ln, served: make(chan struct{})}
	s.srv = &http.Server{Handler: s.Handler(opts), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server stopped", "err", err)
		}
	}()
	return s
}

// Addr is the address the server listens on (the port chosen when the
// address asked for port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Starting records what start-up is waiting for; /readyz and /phases name
// it until Attach.
func (s *Server) Starting(step string) { s.step.Store(&step) }

func (s *Server) stepName() string {
	if p := s.step.Load(); p != nil {
		return *p
	}
	return "starting"
}

// Routes is the handler of a process whose pipeline p already runs, for
// tests that serve it themselves.
func Routes(p *proxy.Pipeline, opts Options) http.Handler {
	s := &Server{}
	s.Attach(p)
	return s.Handler(opts)
}

// Attach makes p the pipeline behind /readyz and /phases.
func (s *Server) Attach(p *proxy.Pipeline) { s.pipe.Store(p) }

// Stopping turns /readyz off for good: the first phase of a shutdown.
func (s *Server) Stopping() { s.stopping.Store(true) }

// Close stops serving, giving requests in flight up to 2 s.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.served
}

// Handler is the process's routes, for Serve and for tests that put their
// own server in front.
func (s *Server) Handler(opts Options) http.Handler {
	reg := opts.Registry
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", LiveView())
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		p := s.pipe.Load()
		switch {
		case s.stopping.Load():
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
		case p == nil:
			http.Error(w, "not ready: starting: "+s.stepName(), http.StatusServiceUnavailable)
		case !p.Ready():
			http.Error(w, "not ready: not in the group, shutting down, or phases not advancing (see /phases)", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ready")
		}
	})
	mux.HandleFunc("GET /phases", func(w http.ResponseWriter, r *http.Request) {
		p := s.pipe.Load()
		if p == nil {
			http.Error(w, StartingPrefix+s.stepName(), http.StatusServiceUnavailable)
			return
		}
		ServePhases(w, r, p.Status())
	})
	if opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// StartingPrefix begins the body of /phases while the process starts, so a
// client (sidecar status) can tell "starting" from any other answer.
const StartingPrefix = "phasegate is starting: "
