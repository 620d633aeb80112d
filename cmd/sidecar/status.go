package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/phasegate/phasegate/proxy"
)

// errStatusAnswer is returned when the sidecar answered /phases with
// something other than a 200 and a Status.
var errStatusAnswer = errors.New("sidecar: unexpected answer from /phases")

// runStatus is `sidecar status`: it reads /phases of a running sidecar and
// prints it as tables. It exits 0 on success, 1 when the sidecar cannot be
// reached or answers badly, 2 on bad arguments.
func runStatus(args []string, environ map[string]string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sidecar status [-addr host:port] [-sealed n] [-timeout d]")
		fmt.Fprintln(stderr, "Prints the phase view of a running sidecar (its /phases) as tables.")
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "", "the sidecar's HTTP address (default: "+envPrefix+"HTTP_ADDR, else :9464)")
	sealed := fs.Int("sealed", 10, "how many of the last sealed phases to print")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the sidecar")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "status: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	base, err := statusBase(*addr, environ)
	if err != nil {
		fmt.Fprintln(stderr, "status:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	st, err := fetchStatus(ctx, &http.Client{}, base)
	if err != nil {
		fmt.Fprintln(stderr, "status:", err)
		return 1
	}
	if err := printStatus(stdout, base, st, *sealed); err != nil {
		fmt.Fprintln(stderr, "status:", err)
		return 1
	}
	return 0
}

// statusBase is the URL of the sidecar to ask: -addr when given, else
// PHASEGATE_HTTP_ADDR, else :9464; a wildcard host means this machine.
// -addr may also be a full http:// or https:// URL.
func statusBase(flagAddr string, environ map[string]string) (string, error) {
	addr, from := flagAddr, "-addr"
	if addr == "" {
		addr, from = environ[envPrefix+"HTTP_ADDR"], envPrefix+"HTTP_ADDR"
	}
	if addr == "" {
		addr = ":9464"
	}
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimRight(addr, "/"), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("%s=%q: want host:port (e.g. 127.0.0.1:9464)", from, addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// fetchStatus GETs base/phases and decodes it.
func fetchStatus(ctx context.Context, c *http.Client, base string) (*proxy.Status, error) {
	url := base + "/phases"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the sidecar at %s: %w (is it running? point to it with -addr host:port or %sHTTP_ADDR)",
			url, err, envPrefix)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("%w: GET %s: %s: %s", errStatusAnswer, url, resp.Status, strings.TrimSpace(string(body)))
	}
	var st proxy.Status
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: GET %s: not a phase status: %v", errStatusAnswer, url, err)
	}
	return &st, nil
}
