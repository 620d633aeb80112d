package main

import (
	"fmt"
	"io"
	"net/http"
)

// liveView serves the live phase view (not built yet).
func liveView() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "live view not built yet; see /phases", http.StatusNotImplemented)
	})
}

// runStatus prints the local sidecar's status (not built yet).
func runStatus(_ []string, _ map[string]string, _ io.Writer, stderr io.Writer) int {
	fmt.Fprintln(stderr, "status: not built yet")
	return 1
}
