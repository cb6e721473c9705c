package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// LEASEHOLD_PPROF adds the profiles to the OPS handler and changes nothing
// else; off, the OPS handler is served as it is.
func TestWithPprof(t *testing.T) {
	ops := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "ops "+r.URL.Path)
	})
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}

	off := withPprof(ops, false)
	if code, body := get(off, "/debug/pprof/heap"); code != http.StatusTeapot || body != "ops /debug/pprof/heap" {
		t.Errorf("off: /debug/pprof/heap answered %d %q, want the OPS handler's answer", code, body)
	}

	on := withPprof(ops, true)
	for path, want := range map[string]string{
		"/debug/pprof/heap?debug=1":      "heap profile:",
		"/debug/pprof/goroutine?debug=1": "goroutine profile:",
		"/debug/pprof/":                  "Types of profiles available",
	} {
		if code, body := get(on, path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("on: %s answered %d, want 200 with %q; body starts %.80q", path, code, want, body)
		}
	}
	for _, path := range []string{"/readyz", "/metrics", "/v1/status", "/debug/other"} {
		if code, body := get(on, path); code != http.StatusTeapot || body != "ops "+path {
			t.Errorf("on: %s answered %d %q, want the OPS handler's answer", path, code, body)
		}
	}
}
