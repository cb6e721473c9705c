package main

import (
	"net/http"
	"net/http/pprof"
)

// withPprof returns the OPS handler ops, plus net/http/pprof's profiles
// under /debug/pprof/ when on (LEASEHOLD_PPROF): the heap, goroutine and CPU
// profiles the benchmark reads to show where the sidecar's memory and CPU
// go. Off by default; the API listener never serves them.
func withPprof(ops http.Handler, on bool) http.Handler {
	if !on {
		return ops
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index) // also every named profile: heap, goroutine, allocs, ...
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.Handle("/", ops)
	return mux
}
