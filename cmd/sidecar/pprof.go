package main

import (
	"fmt"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"
)

// withPprof returns the OPS handler ops, plus Go's profiles when on
// (LEASEHOLD_PPROF), for measuring the sidecar's own memory and CPU (the
// benchmark reads them): GET /debug/pprof/<name>[?debug=N][&gc=1] writes a
// named profile (heap, allocs, goroutine, threadcreate, block, mutex) as
// net/http/pprof does, gc=1 collecting garbage first;
// GET /debug/pprof/profile[?seconds=N] a CPU profile (default 30s). It uses
// runtime/pprof alone: net/http/pprof would link the execution tracer too.
// Off by default; the API listener never serves them.
func withPprof(ops http.Handler, on bool) http.Handler {
	if !on {
		return ops
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/profile", cpuProfile)
	mux.HandleFunc("GET /debug/pprof/{name}", namedProfile)
	mux.Handle("/", ops)
	return mux
}

// namedProfile serves GET /debug/pprof/{name}.
func namedProfile(w http.ResponseWriter, r *http.Request) {
	p := pprof.Lookup(r.PathValue("name"))
	if p == nil {
		http.Error(w, "unknown profile", http.StatusNotFound)
		return
	}
	debug, _ := strconv.Atoi(r.FormValue("debug"))
	if r.FormValue("gc") != "" && r.PathValue("name") == "heap" {
		runtime.GC()
	}
	if debug == 0 {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+p.Name()+`"`)
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	if err := p.WriteTo(w, debug); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// cpuProfile serves GET /debug/pprof/profile[?seconds=N].
func cpuProfile(w http.ResponseWriter, r *http.Request) {
	seconds, err := strconv.Atoi(r.FormValue("seconds"))
	if err != nil || seconds <= 0 {
		seconds = 30
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
	if err := pprof.StartCPUProfile(w); err != nil {
		http.Error(w, fmt.Sprintf("could not enable CPU profiling: %v", err), http.StatusInternalServerError)
		return
	}
	select {
	case <-time.After(time.Duration(seconds) * time.Second):
	case <-r.Context().Done():
	}
	pprof.StopCPUProfile()
}
