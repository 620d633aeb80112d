package config

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"
)

// PrintVariables writes the table of every variable with its default and
// meaning (the help tags) that `sidecar --help` shows. It reads no
// environment, so it never shows a value.
func PrintVariables(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tMEANING")
	helpRows(tw, reflect.TypeFor[Config]())
	tw.Flush()
}

// helpRows prints a row per variable of t, descending into embedded structs.
func helpRows(tw io.Writer, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			helpRows(tw, f.Type)
			continue
		}
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("env"), ",")
		def := f.Tag.Get("envDefault")
		if len(tag) > 1 && tag[1] == "required" {
			def = "(required)"
		} else if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "  %s%s\t%s\t%s\n", Prefix, tag[0], def, f.Tag.Get("help"))
	}
}

// Print writes every variable's effective value, one a line, secrets
// redacted (`sidecar config`).
func Print(w io.Writer, cfg Config) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	configRows(tw, reflect.ValueOf(cfg))
	tw.Flush()
}

func configRows(w io.Writer, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			configRows(w, v.Field(i))
			continue
		}
		if !f.IsExported() {
			continue
		}
		val := fmt.Sprint(v.Field(i).Interface())
		if d, ok := v.Field(i).Interface().(time.Duration); ok {
			val = FormatDuration(d) // "5m", as people write it, not "5m0s"
		}
		if sl, ok := v.Field(i).Interface().([]string); ok {
			val = strings.Join(sl, ",")
		}
		if f.Tag.Get("secret") == "true" && val != "" {
			val = "(redacted)"
		}
		fmt.Fprintf(w, "%s%s\t%s\n", Prefix, strings.Split(f.Tag.Get("env"), ",")[0], val)
	}
}
