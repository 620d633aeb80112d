package statuscmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/phasegate/phasegate/internal/app"
	"github.com/phasegate/phasegate/internal/config"
	"github.com/phasegate/phasegate/proxy"
)

// errNotSidecar is returned when the address answers HTTP, but not as a
// phasegate sidecar does.
var errNotSidecar = errors.New("not a phasegate sidecar")

// options are the flags of `sidecar status`.
type options struct {
	addr    string
	sealed  int
	all     bool
	top     int
	timeout time.Duration
}

// flags is the flag set of `sidecar status`, parsing into o.
func flags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sidecar status [-addr host:port] [-all] [-top n] [-sealed n] [-timeout d]")
		fmt.Fprintln(fs.Output(), "Prints the phase view of a running sidecar (its /phases) as tables: the partitions summarised")
		fmt.Fprintln(fs.Output(), "(counts per state, those holding the global watermark, the most lagging), every one with -all.")
		fmt.Fprintln(fs.Output(), "Exit status: 0 when printed, 1 when the sidecar cannot be reached, is starting or is not a phasegate sidecar, 2 on bad arguments.")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.addr, "addr", "", "the sidecar's HTTP address (default: "+config.Prefix+"HTTP_ADDR, else :9464)")
	fs.IntVar(&o.sealed, "sealed", 10, "how many of the last sealed phases to print")
	fs.BoolVar(&o.all, "all", false, "also print every partition's row (/phases?partitions=all)")
	fs.IntVar(&o.top, "top", proxy.DefaultTop, "how many of the partitions holding the watermark and of the most lagging to list")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Second, "how long to wait for the sidecar")
	return fs
}

// Usage writes the usage of `sidecar status` with its flags: cmd/sidecar
// prints it on stdout when the arguments ask for help.
func Usage(w io.Writer) {
	fs := flags(&options{})
	fs.SetOutput(w)
	fs.Usage()
}

// Run is `sidecar status` with args (after "status", help already
// answered by the caller with Usage) and environ, the process environment
// that main hands over: it reads /phases of a running sidecar and prints
// its summary (counts per state, the partitions holding the global
// watermark, the most lagging), and every partition's row with -all. It
// returns the exit status: 0 on success, 1 when the sidecar cannot be
// reached or answers badly, 2 on bad arguments (the flag package's
// message and the usage on stderr).
func Run(args []string, environ map[string]string, stdout, stderr io.Writer) int {
	var o options
	fs := flags(&o)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "status: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if o.top < 0 {
		fmt.Fprintf(stderr, "status: -top=%d: want 0 or more partitions to list\n", o.top)
		return 2
	}
	base, err := statusBase(o.addr, environ)
	if err != nil {
		fmt.Fprintln(stderr, "status:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	st, err := fetchStatus(ctx, &http.Client{}, base, o.top, o.all)
	if err != nil {
		fmt.Fprintln(stderr, "status:", err)
		return 1
	}
	if err := printStatus(stdout, base, st, o.sealed, o.all); err != nil {
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
		addr, from = environ[config.Prefix+"HTTP_ADDR"], config.Prefix+"HTTP_ADDR"
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

// fetchStatus GETs base/phases (with ?top=top, and every partition's row
// when all) and decodes it. An answer that is not a phase status is
// described (status, content type), never dumped: the address may be any
// web server. A sidecar that predates the summary sends every row and no
// summary: the summary is then made here, from the rows.
func fetchStatus(ctx context.Context, c *http.Client, base string, top int, all bool) (*proxy.Phases, error) {
	url := base + "/phases"
	query := "?top=" + strconv.Itoa(top)
	if all {
		query += "&partitions=all"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+query, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the sidecar at %s: %w (is it running? point to it with -addr host:port or %sHTTP_ADDR)",
			url, err, config.Prefix)
	}
	defer resp.Body.Close()
	ctype := resp.Header.Get("Content-Type")
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	text := strings.TrimSpace(string(body))
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && strings.HasPrefix(text, app.StartingPrefix):
		return nil, fmt.Errorf("the sidecar at %s is starting, waiting for %s", base, strings.TrimPrefix(text, app.StartingPrefix))
	case resp.StatusCode != http.StatusOK && strings.HasPrefix(ctype, "text/plain") && len(text) <= 200 && !strings.ContainsAny(text, "<>"):
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, text)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s is %w: GET /phases answered %s (%s); check -addr or %sHTTP_ADDR",
			base, errNotSidecar, resp.Status, contentKind(ctype), config.Prefix)
	}
	var st proxy.Phases
	if !strings.HasPrefix(ctype, "application/json") || json.Unmarshal(body, &st) != nil || st.Updated.IsZero() {
		return nil, fmt.Errorf("%s is %w: GET /phases answered %s with %s, not a phase status; check -addr or %sHTTP_ADDR",
			base, errNotSidecar, resp.Status, contentKind(ctype), config.Prefix)
	}
	if st.Summary == nil {
		st.Summary = proxy.Summarize(&proxy.Status{GlobalWatermark: st.GlobalWatermark, Partitions: st.Partitions}, top)
	}
	return &st, nil
}

func contentKind(ctype string) string {
	if ctype == "" {
		return "no content type"
	}
	kind, _, _ := strings.Cut(ctype, ";")
	return kind
}
