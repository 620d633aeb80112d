package config

import (
	"bytes"
	"strings"
	"testing"
)

// --help lists every variable with its default (cmd/sidecar prints this
// table under "Environment:").
func TestHelpListsEveryVariable(t *testing.T) {
	var out bytes.Buffer
	PrintVariables(&out)
	for _, v := range knownVariables() {
		if !strings.Contains(out.String(), v+" ") {
			t.Errorf("--help does not list %s", v)
		}
	}
	if !strings.Contains(out.String(), "268435456") {
		t.Errorf("--help does not show defaults")
	}
}
