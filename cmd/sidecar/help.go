package main

import (
	"fmt"
	"io"

	"github.com/phasegate/phasegate/internal/config"
)

// wantsHelp reports whether a subcommand was asked for its usage.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "--help", "-help", "help":
			return true
		}
	}
	return false
}

// printHelp lists every variable with its default and meaning.
func printHelp(w io.Writer) {
	fmt.Fprint(w, `phasegate sidecar: keeps a Kafka fork-join pipeline in phase.

Usage:
  sidecar              run, configured by the environment variables below
  sidecar config       check the environment and print the configuration it gives (secrets redacted)
  sidecar status       print the local sidecar's /phases as a table (-addr to ask another one)
  sidecar verify       check an aligned topic's phases against docs/MARKERS.md (sidecar verify --help)
  sidecar healthcheck  exit 0 when the local sidecar's /healthz answers (for container health checks)
  sidecar --help       this text; each command also answers --help

The demo (an in-process broker, no setup) is its own command: go run ./cmd/demo

Environment:
`)
	config.PrintVariables(w)
	fmt.Fprint(w, `
Start-up: /healthz answers at once; each step before consuming (broker probe,
metadata, transaction.max.timeout.ms, topics, quarantine topic, producer and
group) has its own deadline and is logged; SIGTERM/SIGINT end it at once.

Exit status: 0 after a clean shutdown (SIGTERM/SIGINT, also during start-up),
1 on a runtime error (brokers unreachable or not Kafka, missing topics, being
fenced by another instance with the same transactional ID), 2 on invalid
configuration (including a transaction timeout above the brokers'
transaction.max.timeout.ms, checked at start), with one line naming the
variable, the value and what is allowed.
`)
}

const configUsage = `usage: sidecar config

Checks the PHASEGATE_* environment as the sidecar would at start (without
connecting) and prints the configuration it gives, secrets redacted.
Exit status: 0 when valid, 2 with one line naming the variable otherwise.
`

const healthcheckUsage = `usage: sidecar healthcheck

Exits 0 when the local sidecar's /healthz answers 200 (at PHASEGATE_HTTP_ADDR,
default :9464; a wildcard host means 127.0.0.1), 1 when it does not, 2 when
PHASEGATE_HTTP_ADDR is not an address. For container health checks: the image
has no shell or curl.
`
