package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/phasegate/phasegate/tasks"
)

// Error is a value that cannot work, in one line naming the variable, the
// value as written and what is allowed: the sidecar prints Msg and exits
// with status 2. Load returns only these; the preflight checks that need
// the brokers' answer (routing, transaction.max.timeout.ms) return them too.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// BadVar is the *Error for variable name (without the prefix) with value
// as written, and what is allowed instead.
func BadVar(name, value, allowed string) error {
	return &Error{fmt.Sprintf("%s%s=%q: %s", Prefix, name, value, allowed)}
}

// settingVars names the variables behind each word of tasks.Layout's
// Settings.
var settingVars = map[string]string{
	"routing": "ROUTING", "tasks": "TASKS", "output": "OUTPUT_TOPIC (topic:partitions)", "phase": "PHASE_LENGTH",
	"out-of-orderness": "MAX_OUT_OF_ORDERNESS", "inputs": "INPUT_TOPICS (topic:partitions)",
}

// SettingsError is the one line for an instance its consumer group
// refused because it runs with other settings (an *Error: exit status 2).
// cmd/sidecar calls it when the pipeline returns a *tasks.SettingsError.
func SettingsError(group string, se *tasks.SettingsError) error {
	var parts []string
	for _, d := range se.Differences() {
		parts = append(parts, fmt.Sprintf("%s%s is %s here but %s in consumer group %s", Prefix, settingVars[d.Key], d.Mine, d.Group, group))
	}
	return &Error{strings.Join(parts, "; ") +
		": every instance of a group must agree; change a setting on every instance at once (stop them all), and a phase length, bound or layout with a new group and output topic"}
}

// userMessage drops what precedes the variable's name in a library
// package's error ("watermarks: invalid configuration: PHASEGATE_..."):
// users read variables, not package names.
func userMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, Prefix); i > 0 {
		return msg[i:]
	}
	return msg
}

// envError turns caarlos0/env's error into one line naming the variable,
// the value as written and what is allowed.
func envError(err error, environ map[string]string) error {
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) > 0 {
		err = agg.Errors[0]
	}
	var notSet env.VarIsNotSetError
	var empty env.EmptyVarError
	var parse env.ParseError
	switch {
	case errors.As(err, &notSet):
		return &Error{notSet.Key + " is not set: it is required (see sidecar --help)"}
	case errors.As(err, &empty):
		return &Error{empty.Key + " is empty: it is required (see sidecar --help)"}
	case errors.As(err, &parse):
		name := varOfField(parse.Name)
		value := environ[Prefix+name]
		switch parse.Type {
		case reflect.TypeFor[time.Duration]():
			if b, ok := durationRule(name); ok {
				return BadVar(name, value, "not a duration: "+b.allowed())
			}
			return BadVar(name, value, "not a duration such as 500ms, 5s or 1m")
		case reflect.TypeFor[bool]():
			return BadVar(name, value, "not a bool: use true or false")
		}
		if b, ok := intRule(name); ok {
			if errors.Is(parse.Err, strconv.ErrRange) {
				return BadVar(name, value, "must be "+b.allowed())
			}
			return BadVar(name, value, "not a whole number: "+b.allowed())
		}
		return BadVar(name, value, "not a valid "+parse.Type.String())
	}
	return &Error{userMessage(err)}
}

// varOfField is the variable name (without prefix) of a Config field.
func varOfField(field string) string {
	for _, t := range []reflect.Type{reflect.TypeFor[Config](), reflect.TypeFor[Security]()} {
		if f, ok := t.FieldByName(field); ok {
			return strings.Split(f.Tag.Get("env"), ",")[0]
		}
	}
	return field
}
