package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// The embedded run shows phases flowing and every failure mode handled:
// the silent partition sealed by idleness, the retry storm dropped as
// duplicates, the late payment quarantined, every record visible.
func TestDemoShowsThePhaseTrapHandled(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs for about 10 s")
	}
	var out, errOut bytes.Buffer
	if code := runDemo([]string{"--duration", "6s", "--http", "127.0.0.1:0"}, &out, &errOut); code != 0 {
		t.Fatalf("demo exit %d: %s", code, errOut.String())
	}
	text := out.String()
	if strings.Contains(text, "VIOLATION") {
		t.Fatalf("the demo's reader saw a violation:\n%s", text)
	}
	if n := strings.Count(text, " visible: "); n < 8 {
		t.Fatalf("%d phases visible, want at least 8:\n%s", n, text)
	}
	for _, want := range []string{"sealed_by=watermark", "sealed_by=idle", "quarantined: 1 (the late payment)"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	m := regexp.MustCompile(`orders (\d+) of (\d+) sent, payments (\d+) of (\d+) sent`).FindStringSubmatch(text)
	if m == nil || m[1] != m[2] || m[3] == "0" {
		t.Errorf("not every order visible: %v", m)
	}
	d := regexp.MustCompile(`duplicates dropped: (\d+) \(the retry storm resent (\d+)\)`).FindStringSubmatch(text)
	if d == nil || d[1] != d[2] || d[1] == "0" {
		t.Errorf("duplicates dropped differ from the retries sent: %v", d)
	}
	if t.Failed() {
		t.Log(text)
	}
}
