// Package config is the sidecar's configuration: every PHASEGATE_*
// variable (Config, Security), how it is read and checked (Load), the
// libraries' part of it (Config.Pipeline, Config.Kafka), and how it is
// shown (PrintVariables for --help, Print for `sidecar config`). The part
// `sidecar verify` reads is VerifyEnv (LoadVerify).
//
// Why the env.ParseAs call lives here and not in cmd/sidecar
// (CONVENTIONS.md, rule 2): caarlos0/env's errors must become one line
// naming the variable (envError), and the checks need the values as
// written; parse, translation and checks in one package give every
// message one home. The rule's intent holds: cmd/sidecar reads the process
// environment once, into a map, and hands that map to Load (or
// LoadVerify) once per command; this package never reads the process
// environment itself, and no library package does.
//
// Invariants:
//   - Every error of Load and LoadVerify is an *Error of one line: the
//     variable, the value as written (Config.Raw: "60s", not "1m0s") and
//     what is allowed. cmd/sidecar prints it and exits with status 2. No
//     message starts with a library package's name (userMessage).
//   - Load connects to nothing; it reads only the files the variables
//     name (the SASL password file, the TLS files), once.
//   - Secrets are never shown: Print redacts fields tagged secret,
//     PrintVariables reads no environment, and errors about a secret name
//     the variable, never its value.
//   - A Config is a value: safe to copy and to read from several
//     goroutines.
//
// Imports: config is at the bottom of the sidecar's own packages. It
// imports the library packages whose Config it fills (proxy, watermarks,
// dedupe, tasks) and sarama; internal/preflight, internal/verifycmd,
// internal/statuscmd and cmd/sidecar import it, never the reverse.
package config
