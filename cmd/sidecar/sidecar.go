package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/phasegate/phasegate/proxy"
)

// sidecar is one running instance: the pipeline and its HTTP server.
type sidecar struct {
	ctx  context.Context
	log  *slog.Logger
	pipe *proxy.Pipeline
	http *http.Server
	ln   net.Listener
}

// kafka builds the client settings shared by the consumer and the producer.
func (c Config) kafka() proxy.Kafka {
	version, _ := c.kafkaVersion()
	return proxy.Kafka{
		Brokers: c.Brokers,
		Base: func() *sarama.Config {
			sc := sarama.NewConfig()
			sc.Version = version
			sc.ClientID = c.ClientID
			c.Security.apply(sc)
			return sc
		},
		TransactionTimeout: c.TransactionTimeout,
		SessionTimeout:     c.SessionTimeout,
		MaxRecordBytes:     c.MaxRecordBytes,
	}
}

// start checks the cluster, connects the pipeline and starts HTTP.
func start(ctx context.Context, cfg Config, log *slog.Logger) (*sidecar, error) {
	cfg.Security.warn(log)
	k := cfg.kafka()
	if err := preflight(k, cfg, log); err != nil {
		return nil, err
	}
	pc, _ := cfg.pipeline()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pipe, err := proxy.Dial(k, pc, log, reg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on PHASEGATE_HTTP_ADDR=%s: %w", cfg.HTTPAddr, err)
	}
	s := &sidecar{ctx: ctx, log: log, pipe: pipe, ln: ln}
	mux := s.routes(reg)
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server stopped", "err", err)
		}
	}()
	log.Info("phasegate started", "inputs", cfg.InputTopics, "output", cfg.OutputTopic,
		"quarantine", cfg.QuarantineTopic, "group", cfg.GroupID, "transactional_id", cfg.TransactionalID,
		"http", ln.Addr().String())
	return s, nil
}

func (s *sidecar) run() error { return s.pipe.Run(s.ctx) }

func (s *sidecar) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
}

func (s *sidecar) routes(reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", liveView())
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.pipe.Ready() {
			http.Error(w, "not ready: not in the group, shutting down, or phases not advancing (see /phases)", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /phases", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.pipe.Status())
	})
	return mux
}

// healthcheck asks the local sidecar's /healthz (the container image has no
// shell or curl).
func healthcheck(environ map[string]string, stderr interface{ Write([]byte) (int, error) }) int {
	addr := environ[envPrefix+"HTTP_ADDR"]
	if addr == "" {
		addr = ":9464"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", badVar("HTTP_ADDR", addr, "host:port"))
		return 2
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(host, port) + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%w: /healthz answered %s", errUnhealthy, resp.Status)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	return 0
}
