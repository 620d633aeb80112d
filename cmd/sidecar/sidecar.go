package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/proxy"
)

// kafka builds the client settings shared by the consumer and the producer.
func (c Config) kafka() proxy.Kafka {
	version, _ := c.kafkaVersion()
	return proxy.Kafka{
		Brokers: c.Brokers,
		Base: func() *sarama.Config {
			sc := sarama.NewConfig()
			sc.Version = version
			sc.ClientID = c.ClientID
			// A metadata request never creates a topic: on brokers with
			// auto.create.topics.enable a mistyped or missing topic would
			// otherwise appear with the broker's defaults.
			sc.Metadata.AllowAutoTopicCreation = false
			c.Security.apply(sc)
			return sc
		},
		TransactionTimeout: c.TransactionTimeout,
		SessionTimeout:     c.SessionTimeout,
		MaxRecordBytes:     c.MaxRecordBytes,
	}
}

// listen opens the HTTP endpoints before anything else, so /healthz
// answers during start-up. A listener that cannot open is a configuration
// error: nothing else about the sidecar can work without it.
func listen(cfg Config, log *slog.Logger) (*app.Server, *prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := app.Listen(cfg.HTTPAddr, app.Options{Registry: reg, Pprof: cfg.Pprof}, log)
	if err != nil {
		return nil, nil, badVar("HTTP_ADDR", cfg.raw["HTTP_ADDR"], fmt.Sprintf("cannot listen there (%s): use a free port on an address of this host", shortErr(err)))
	}
	log.Info("serving /healthz and /metrics; /readyz answers 200 once consuming", "http", srv.Addr())
	return srv, reg, nil
}

// start checks the cluster and connects the pipeline, every step bounded
// and interruptible; it returns errInterrupted when ctx ends first.
func start(ctx context.Context, cfg Config, log *slog.Logger, srv *app.Server, reg *prometheus.Registry) (*proxy.Pipeline, error) {
	cfg.Security.warn(log)
	k := cfg.kafka()
	st := &startup{ctx: ctx, log: log, http: srv}
	if err := st.preflight(k, cfg); err != nil {
		return nil, err
	}
	pc, _ := cfg.pipeline()
	var pipe *proxy.Pipeline
	err := st.step("the transactional producer (InitProducerId) and the consumer group", checkAdvertised, dialStepTimeout, func(context.Context) error {
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
	addr := environ[envPrefix+"HTTP_ADDR"]
	if addr == "" {
		addr = ":9464"
	}
	if err := checkHTTPAddr(addr); err != nil {
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
