package app

import (
	"crypto/sha256"
	_ "embed" // the live view is compiled into the binary
	"encoding/base64"
	"net/http"
	"strings"
)

// indexHTML is the live phase view: one self-contained page (HTML, CSS and
// JS, no external asset) that polls /phases. go:embed needs a package-level
// variable; it is the only one here and is never written.
//
//go:embed ui/index.html
var indexHTML string

// LiveView serves the live phase view at /. The Content-Security-Policy
// allows only the page's own inline script and style (by hash) and requests
// to its own origin, so the page cannot load or send anything elsewhere, and
// data from /phases (topic names) can never run as script. Safe for
// concurrent use.
func LiveView() http.Handler {
	csp := contentSecurityPolicy(indexHTML)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", csp)
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write([]byte(indexHTML))
	})
}

// contentSecurityPolicy allows exactly the inline <script> and <style>
// blocks of page, by their SHA-256.
func contentSecurityPolicy(page string) string {
	return "default-src 'none'; connect-src 'self'; img-src 'self' data:; " +
		"script-src" + blockHashes(page, "script") + "; style-src" + blockHashes(page, "style") + "; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// blockHashes returns " 'sha256-...'" for the body of every <tag>...</tag>
// (attribute-less opening tag) in page, or " 'none'" when there is none.
func blockHashes(page, tag string) string {
	open, end := "<"+tag+">", "</"+tag+">"
	var b strings.Builder
	for {
		i := strings.Index(page, open)
		if i < 0 {
			break
		}
		page = page[i+len(open):]
		j := strings.Index(page, end)
		if j < 0 {
			break
		}
		sum := sha256.Sum256([]byte(page[:j]))
		b.WriteString(" 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'")
		page = page[j+len(end):]
	}
	if b.Len() == 0 {
		return " 'none'"
	}
	return b.String()
}
