package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/internal/config"
	"github.com/phasegate/phasegate/internal/preflight"
	"github.com/phasegate/phasegate/proxy"
)

// listen opens the HTTP endpoints before anything else, so /healthz
// answers during start-up. A listener that cannot open is a configuration
// error: nothing else about the sidecar can work without it.
func listen(cfg config.Config, log *slog.Logger) (*app.Server, *prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := app.Listen(cfg.HTTPAddr, app.Options{Registry: reg, Pprof: cfg.Pprof}, log)
	if err != nil {
		return nil, nil, config.BadVar("HTTP_ADDR", cfg.Raw("HTTP_ADDR"), fmt.Sprintf("cannot listen there (%s): use a free port on an address of this host", preflight.ShortErr(err)))
	}
	log.Info("serving /healthz and /metrics; /readyz answers 200 once consuming", "http", srv.Addr())
	return srv, reg, nil
}

// start checks the cluster and connects the pipeline, every step bounded
// and interruptible; it returns preflight.ErrInterrupted when ctx ends
// first.
func start(ctx context.Context, cfg config.Config, log *slog.Logger, srv *app.Server, reg *prometheus.Registry) (*proxy.Pipeline, error) {
	cfg.Security.Warn(log)
	k := cfg.Kafka()
	st := preflight.New(ctx, log, srv)
	if err := st.Check(k, cfg); err != nil {
		return nil, err
	}
	pc, _ := cfg.Pipeline()
	var pipe *proxy.Pipeline
	err := st.Step("the transactional producer (InitProducerId) and the consumer group", preflight.CheckAdvertised, preflight.DialTimeout, func(context.Context) error {
		p, err := proxy.Dial(k, pc, log, reg)
		pipe = p
		return err
	})
	if err != nil {
		return nil, err
	}
	srv.Attach(pipe)
	log.Info("phasegate started", "inputs", cfg.InputTopics, "output", cfg.OutputTopic,
		"quarantine", cfg.QuarantineTopic, "group", cfg.GroupID, "transactional_id", cfg.TransactionalID,
		"http", srv.Addr())
	return pipe, nil
}

// healthcheck asks the local sidecar's /healthz (the container image has no
// shell or curl).
func healthcheck(environ map[string]string, stderr io.Writer) int {
	addr := environ[config.Prefix+"HTTP_ADDR"]
	if addr == "" {
		addr = ":9464"
	}
	if err := config.CheckHTTPAddr(addr); err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 2
	}
	host, port, _ := net.SplitHostPort(addr)
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
