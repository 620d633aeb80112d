package app

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestLiveViewHandler(t *testing.T) {
	srv := httptest.NewServer(LiveView())
	t.Cleanup(srv.Close)
	tests := []struct {
		name, method string
		wantBody     bool
	}{
		{name: "GET serves the page", method: http.MethodGet, wantBody: true},
		{name: "HEAD serves the headers only", method: http.MethodHead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
				t.Errorf("%s %s, Content-Type %q", tt.method, resp.Status, resp.Header.Get("Content-Type"))
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no X-Content-Type-Options: nosniff")
			}
			csp := resp.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
				}
			}
			if got := len(body) > 0; got != tt.wantBody {
				t.Fatalf("body of %d bytes, want body: %v", len(body), tt.wantBody)
			}
			if !tt.wantBody {
				return
			}
			if string(body) != indexHTML {
				t.Error("served page differs from ui/index.html")
			}
			// The browser runs the script only if its hash is in the policy.
			script := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindStringSubmatch(string(body))
			if script == nil {
				t.Fatal("page has no inline script")
			}
			sum := sha256.Sum256([]byte(script[1]))
			if h := "script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, h) {
				t.Errorf("Content-Security-Policy %q does not allow the page's script (%s)", csp, h)
			}
		})
	}
}

// The page is self-contained: it names no resource to load, on this host or
// another (the SVG namespace is an identifier, not a request).
func TestLiveViewLoadsNothingElse(t *testing.T) {
	page := strings.ReplaceAll(indexHTML, `"http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"src=", "<link", "@import", "url(", "http://", "https://", "//cdn", "<iframe"} {
		if strings.Contains(page, bad) {
			t.Errorf("ui/index.html contains %q: it must load no external asset", bad)
		}
	}
}

func TestBlockHashes(t *testing.T) {
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	tests := []struct{ name, page, want string }{
		{name: "none", page: "<p>hi</p>", want: " 'none'"},
		{name: "one", page: "<script>a()</script>", want: hash("a()")},
		{name: "two, in order", page: "<script>a()</script><p></p><script>\nb()\n</script>", want: hash("a()") + hash("\nb()\n")},
		{name: "unterminated is not allowed", page: "<script>a()", want: " 'none'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := blockHashes(tt.page, "script"); got != tt.want {
				t.Errorf("blockHashes = %q, want %q", got, tt.want)
			}
		})
	}
}
