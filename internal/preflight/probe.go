package preflight

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/phasegate/phasegate/internal/config"
)

// Bounds of the probe: long enough for a loaded broker across a slow link,
// short enough that a wrong address is explained within seconds.
const (
	probeDialTimeout   = 10 * time.Second
	probeAnswerTimeout = 5 * time.Second
)

// Kafka's ApiVersions request (key 18), version 0: every broker since 0.10
// answers it, before any authentication, on every listener.
const (
	apiVersionsKey     = 18
	probeCorrelationID = 0x70677072 // "pgpr"
	maxProbeAnswer     = 1 << 20
)

// probe is one exchange with a broker before any Kafka client touches it:
// a TCP connection (and TLS handshake when tlsCfg is set), then an
// ApiVersions request. It returns the API keys the broker supports, or an
// error that names addr, what answered and what to check. sarama's own dial
// would wait minutes on a listener that accepts and never answers, and
// report only that it ran out of brokers.
func probe(ctx context.Context, addr string, tlsCfg *tls.Config, protocol string) (map[int16]bool, error) {
	conn, err := dialProbe(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if tlsCfg != nil {
		tc, err := handshake(ctx, conn, addr, tlsCfg)
		if err != nil {
			return nil, explainTLS(ctx, addr, protocol, err)
		}
		conn = tc
	}
	apis, answer, err := apiVersions(ctx, conn)
	if err == nil {
		return apis, nil
	}
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case bytes.HasPrefix(answer, []byte("HTTP/")):
		return nil, httpError(addr, firstLine(answer))
	case looksLikeTLS(answer):
		return nil, tlsListener(addr, protocol)
	case len(answer) > 0:
		return nil, fmt.Errorf("%s answered %d bytes that are not a Kafka ApiVersions response (starting %q): it is not a Kafka listener, check the port in %sBROKERS",
			addr, len(answer), answer[:min(len(answer), 16)], config.Prefix)
	case errors.As(err, &ne) && ne.Timeout():
		if tlsCfg == nil {
			if line := httpAnswer(ctx, addr); line != "" {
				return nil, httpError(addr, line)
			}
		}
		return nil, fmt.Errorf("%s accepted the connection but answered nothing within %s to a Kafka ApiVersions request: it is not a Kafka listener, or the broker hangs; check %sBROKERS and the broker",
			addr, probeAnswerTimeout, config.Prefix)
	case tlsCfg == nil && speaksTLS(ctx, addr):
		return nil, tlsListener(addr, protocol)
	}
	return nil, fmt.Errorf("%s closed the connection without answering a Kafka ApiVersions request (%v): it is not a Kafka listener, or it expects another protocol than %sSECURITY_PROTOCOL=%s; check %sBROKERS and the listener's protocol",
		addr, ShortErr(err), config.Prefix, protocol, config.Prefix)
}

func httpError(addr, statusLine string) error {
	return fmt.Errorf("%s answered in HTTP (%q), not the Kafka protocol: it is a web server (a REST proxy, a UI, a metrics port?), not a broker listener: check the port in %sBROKERS",
		addr, statusLine, config.Prefix)
}

// dialProbe opens a TCP connection and explains a failure.
func dialProbe(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: probeDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		return conn, nil
	}
	var dns *net.DNSError
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &dns):
		return nil, fmt.Errorf("cannot resolve the host of %s (%s): check %sBROKERS and DNS", addr, dns.Err, config.Prefix)
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("nothing listens at %s (connection refused): check %sBROKERS and that the broker is up", addr, config.Prefix)
	case errors.As(err, &ne) && ne.Timeout():
		return nil, fmt.Errorf("%s did not accept a TCP connection within %s: a wrong host, a firewall, or an unreachable network; check %sBROKERS", addr, probeDialTimeout, config.Prefix)
	}
	return nil, fmt.Errorf("cannot connect to %s (%v): check %sBROKERS and the network", addr, ShortErr(err), config.Prefix)
}

// handshake runs the TLS handshake as sarama would (server name from the
// address unless set).
func handshake(ctx context.Context, conn net.Conn, addr string, cfg *tls.Config) (net.Conn, error) {
	c := cfg.Clone()
	if c.ServerName == "" {
		host, _, _ := net.SplitHostPort(addr)
		c.ServerName = host
	}
	hctx, cancel := context.WithTimeout(ctx, probeAnswerTimeout)
	defer cancel()
	tc := tls.Client(conn, c)
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, err
	}
	return tc, nil
}

// explainTLS says why the TLS handshake with addr failed.
func explainTLS(ctx context.Context, addr, protocol string, err error) error {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var header tls.RecordHeaderError
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &unknownCA):
		return fmt.Errorf("TLS: the certificate of %s is signed by an authority this sidecar does not trust (%v): set %sTLS_CA_FILE to the CA that signed it", addr, err, config.Prefix)
	case errors.As(err, &hostname):
		return fmt.Errorf("TLS: the certificate of %s is not valid for that name (%v): connect by a name it lists, or set %sTLS_SERVER_NAME", addr, err, config.Prefix)
	case errors.As(err, &invalid):
		return fmt.Errorf("TLS: the certificate of %s is invalid (%v)", addr, err)
	case errors.As(err, &header) && bytes.HasPrefix(header.RecordHeader[:], []byte("HTTP/")):
		return fmt.Errorf("TLS: %s answered the TLS handshake in plain HTTP: it is a web server, not a broker listener; check the port in %sBROKERS", addr, config.Prefix)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("TLS: %s accepted the connection but did not answer the TLS handshake within %s: it is not a TLS listener, or the broker hangs; check %sBROKERS and %sSECURITY_PROTOCOL=%s",
			addr, probeAnswerTimeout, config.Prefix, config.Prefix, protocol)
	}
	if _, _, perr := plainAPIVersions(ctx, addr); perr == nil {
		return fmt.Errorf("TLS: %s is a plaintext Kafka listener, but %sSECURITY_PROTOCOL=%s expects TLS: set %sSECURITY_PROTOCOL=%s, or use the brokers' TLS port",
			addr, config.Prefix, protocol, config.Prefix, strings.Replace(strings.Replace(protocol, "SASL_SSL", "SASL_PLAINTEXT", 1), "SSL", "PLAINTEXT", 1))
	}
	return fmt.Errorf("TLS: the handshake with %s failed (%v): is it a TLS listener? Check %sBROKERS and %sSECURITY_PROTOCOL=%s", addr, ShortErr(err), config.Prefix, config.Prefix, protocol)
}

// tlsListener is the error for a TLS listener given to a plaintext client.
func tlsListener(addr, protocol string) error {
	want := "SSL"
	if protocol == "SASL_PLAINTEXT" {
		want = "SASL_SSL"
	}
	return fmt.Errorf("%s is a TLS listener, but %sSECURITY_PROTOCOL=%s speaks plaintext: set %sSECURITY_PROTOCOL=%s (and %sTLS_CA_FILE if its CA is not the system's), or use the brokers' plaintext port",
		addr, config.Prefix, protocol, config.Prefix, want, config.Prefix)
}

// httpProbeTimeout bounds the second look at a silent listener.
const httpProbeTimeout = 2 * time.Second

// httpAnswer sends an HTTP request to a listener that stayed silent on a
// Kafka request (an HTTP server waits for the end of a request line, which a
// Kafka request never has) and returns the status line it answered, or "".
func httpAnswer(ctx context.Context, addr string) string {
	conn, err := dialProbe(ctx, addr)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(httpProbeTimeout))
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err != nil {
		return ""
	}
	b := make([]byte, 128)
	n, _ := io.ReadAtLeast(conn, b, len("HTTP/1.0 200"))
	if !bytes.HasPrefix(b[:n], []byte("HTTP/")) {
		return ""
	}
	return firstLine(b[:n])
}

// plainAPIVersions is a plaintext probe, to tell a plaintext Kafka listener
// from anything else after a failed TLS handshake.
func plainAPIVersions(ctx context.Context, addr string) (map[int16]bool, []byte, error) {
	conn, err := dialProbe(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	return apiVersions(ctx, conn)
}

// speaksTLS reports whether addr completes (or refuses with a TLS alert) a
// TLS handshake: a listener that closed on a plaintext request may be a TLS
// one.
func speaksTLS(ctx context.Context, addr string) bool {
	conn, err := dialProbe(ctx, addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	_, err = handshake(ctx, conn, addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only asks whether TLS answers; nothing is sent after
	var alert tls.AlertError
	return err == nil || errors.As(err, &alert)
}

// apiVersions sends an ApiVersions v0 request on conn and reads the answer.
// On failure it returns what was read, for the caller to classify.
func apiVersions(ctx context.Context, conn net.Conn) (map[int16]bool, []byte, error) {
	deadline := time.Now().Add(probeAnswerTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	clientID := "phasegate-probe"
	req := binary.BigEndian.AppendUint32(nil, uint32(2+2+4+2+len(clientID)))
	req = binary.BigEndian.AppendUint16(req, apiVersionsKey)
	req = binary.BigEndian.AppendUint16(req, 0)
	req = binary.BigEndian.AppendUint32(req, probeCorrelationID)
	req = binary.BigEndian.AppendUint16(req, uint16(len(clientID)))
	req = append(req, clientID...)
	if _, err := conn.Write(req); err != nil {
		return nil, nil, err
	}
	head := make([]byte, 8)
	n, err := io.ReadFull(conn, head)
	if err != nil {
		return nil, head[:n], err
	}
	size := binary.BigEndian.Uint32(head)
	if size < 6 || size > maxProbeAnswer || binary.BigEndian.Uint32(head[4:]) != probeCorrelationID {
		more := make([]byte, 64)
		m, _ := conn.Read(more)
		return nil, append(head, more[:m]...), errors.New("not a Kafka response")
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, head, err
	}
	return parseAPIVersions(body, head)
}

// parseAPIVersions reads an ApiVersions v0 response body (after the
// correlation ID): error code, then [api key, min, max].
func parseAPIVersions(body, head []byte) (map[int16]bool, []byte, error) {
	if len(body) < 6 {
		return nil, head, errors.New("short ApiVersions response")
	}
	if code := int16(binary.BigEndian.Uint16(body)); code != 0 {
		return nil, nil, fmt.Errorf("the broker answered ApiVersions with Kafka error code %d", code)
	}
	n := int(int32(binary.BigEndian.Uint32(body[2:])))
	body = body[6:]
	if n < 0 || len(body) < 6*n {
		return nil, head, errors.New("truncated ApiVersions response")
	}
	apis := make(map[int16]bool, n)
	for i := range n {
		apis[int16(binary.BigEndian.Uint16(body[6*i:]))] = true
	}
	return apis, nil, nil
}

// looksLikeTLS: a TLS record header (handshake or alert, version 3.x).
func looksLikeTLS(b []byte) bool {
	return len(b) >= 3 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 3
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(b, []byte("\r\n"))
	return string(line)
}

// shortErr drops the "read tcp a->b:" noise of net.OpError; a connection
// closed or reset by the peer (which comes first is a race) is "closed at
// once".
func ShortErr(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return "closed at once"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}
