//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chromium returns the headless browser to drive: $PHASEGATE_CHROMIUM, else
// chromium or chromium-browser on PATH. Without one the test is skipped, or
// fails when CI=true: CI must have installed it (scripts/install-chromium.sh).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PHASEGATE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium is not installed: run scripts/install-chromium.sh (Debian: apt-get install -y chromium), or set PHASEGATE_CHROMIUM"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browse runs headless Chromium on url with the extra args and returns its
// stdout. virtual runs the page's timers (its refresh loop) for that much
// virtual time; Chromium holds virtual time while a request is in flight.
// Under virtual time the page's clocks stand still while its script runs;
// virtual 0 runs in real time, and a DOM dump is taken at the load event.
func browse(t *testing.T, bin, url string, virtual time.Duration, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
		"--user-data-dir=" + t.TempDir(),
	}, args...)
	if virtual > 0 {
		all = append(all, fmt.Sprintf("--virtual-time-budget=%d", virtual.Milliseconds()))
	}
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	// Chromium forks renderer and utility processes: give them a process
	// group of their own and end the whole group on timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstderr (tail):\n%s", bin, strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return stdout.Bytes()
}

// dumpDOM loads url, lets its script run, and returns the DOM as HTML.
func dumpDOM(t *testing.T, bin, url string, virtual time.Duration) string {
	t.Helper()
	dom := string(browse(t, bin, url, virtual, "--dump-dom"))
	if !strings.Contains(dom, "</html>") {
		t.Fatalf("chromium dumped no DOM for %s: %q", url, tail(dom, 500))
	}
	return dom
}

// screenshot loads url, lets its script run, and writes a 1280x900 PNG.
func screenshot(t *testing.T, bin, url, file string, virtual time.Duration) {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	browse(t, bin, url, virtual, "--window-size=1280,900", "--screenshot="+abs)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// element is one element of a dumped DOM: its attributes and its text.
type element struct {
	attrs map[string]string
	text  string // text content, blanks collapsed
}

var (
	attrRE = regexp.MustCompile(`([a-zA-Z_:][-a-zA-Z0-9_:.]*)(?:="([^"]*)")?`)
	tagRE  = regexp.MustCompile(`<[^>]*>`)
)

// elements finds every <tag ...>...</tag> in dom, for tags that do not
// nest (tr, td, span, dd). Chromium serialises attribute values in double
// quotes with " escaped, so a regular expression is enough here.
func elements(dom, tag string) []element {
	re := regexp.MustCompile(`(?s)<` + tag + `\b([^>]*)>(.*?)</` + tag + `>`)
	var out []element
	for _, m := range re.FindAllStringSubmatch(dom, -1) {
		e := element{attrs: map[string]string{}}
		for _, a := range attrRE.FindAllStringSubmatch(m[1], -1) {
			e.attrs[a[1]] = html.UnescapeString(a[2])
		}
		e.text = strings.Join(strings.Fields(html.UnescapeString(tagRE.ReplaceAllString(m[2], " "))), " ")
		out = append(out, e)
	}
	return out
}

// byAttr returns the elements whose attribute name equals value.
func byAttr(es []element, name, value string) []element {
	var out []element
	for _, e := range es {
		if v, ok := e.attrs[name]; ok && v == value {
			out = append(out, e)
		}
	}
	return out
}

// byID returns the text of the element with that id, or fails.
func byID(t *testing.T, dom, tag, id string) element {
	t.Helper()
	es := byAttr(elements(dom, tag), "id", id)
	if len(es) != 1 {
		t.Fatalf("want one <%s id=%q>, found %d", tag, id, len(es))
	}
	return es[0]
}

// artifactDir is where browser tests keep screenshots: $PHASEGATE_ARTIFACTS,
// else bin/artifacts at the module root (git-ignored).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PHASEGATE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(moduleRoot(t), "bin", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// moduleRoot is the nearest directory above the test's with a go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
