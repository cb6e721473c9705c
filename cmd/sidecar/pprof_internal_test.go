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
		"/debug/pprof/heap?debug=1&gc=1": "heap profile:",
		"/debug/pprof/goroutine?debug=1": "goroutine profile:",
		"/debug/pprof/goroutine?debug=2": "goroutine ",
		"/debug/pprof/allocs?debug=1":    "heap profile:",
	} {
		if code, body := get(on, path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("on: %s answered %d, want 200 with %q; body starts %.80q", path, code, want, body)
		}
	}
	for _, path := range []string{"/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		if code, body := get(on, path); code != http.StatusOK || len(body) == 0 {
			t.Errorf("on: %s answered %d with %d bytes, want 200 with a profile", path, code, len(body))
		}
	}
	if code, _ := get(on, "/debug/pprof/nonesuch"); code != http.StatusNotFound {
		t.Errorf("on: an unknown profile answered %d, want 404", code)
	}
	for _, path := range []string{"/readyz", "/metrics", "/v1/status", "/debug/other", "/debug/pprof/"} {
		if code, body := get(on, path); code != http.StatusTeapot || body != "ops "+path {
			t.Errorf("on: %s answered %d %q, want the OPS handler's answer", path, code, body)
		}
	}
}
