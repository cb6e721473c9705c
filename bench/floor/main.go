// Command floor is the floor the bench measures leasehold's footprint
// against: the libraries the product is built on, initialised as the
// sidecar initialises them, with an HTTP API that answers like leasehold's
// and does nothing else. It builds the Kubernetes REST client and the lean
// Lease client from KUBECONFIG as the sidecar does (internal/kubeclient),
// registers Prometheus' Go and process collectors and serves /metrics, and
// routes with gorilla/mux; it never talks to the apiserver. GET /v1/status
// answers {"index":1}; GET /v1/watch blocks until the client leaves (with
// Accept: text/event-stream it first sends one event). On the OPS address,
// GET /readyz answers 200 and GET /memstats answers, after two garbage
// collections, the heap and stack bytes in use and the goroutines. It reads
// LEASEHOLD_API_ADDR and LEASEHOLD_OPS_ADDR, so that the bench's process
// runner starts it like a sidecar.
//
// Its idle RSS is what those libraries cost at rest. What 1,000 open
// watchers add to it is what net/http itself costs per connection: a
// goroutine that serves the connection, one that watches it for the client
// leaving while a request is open, and their buffers.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leasehold/leasehold/internal/kubeclient"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run() error {
	api, err := net.Listen("tcp", os.Getenv("LEASEHOLD_API_ADDR"))
	if err != nil {
		return err
	}
	ops, err := net.Listen("tcp", os.Getenv("LEASEHOLD_OPS_ADDR"))
	if err != nil {
		return err
	}
	restConfig, err := kubeclient.New(kubeclient.Options{Kubeconfig: os.Getenv("KUBECONFIG"), UserAgent: "leasehold-floor"})
	if err != nil {
		return err
	}
	if _, err := kubeclient.NewLeaseClient(restConfig, "default"); err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	apiMux := mux.NewRouter()
	apiMux.HandleFunc("/v1/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"index":1}`)
	})
	apiMux.HandleFunc("/v1/watch", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "text/event-stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: 1\nevent: status\ndata: {\"index\":1}\n\n")
			_ = http.NewResponseController(w).Flush()
		}
		<-r.Context().Done()
	})
	opsMux := http.NewServeMux()
	opsMux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	opsMux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	opsMux.HandleFunc("GET /memstats", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		runtime.GC() // the second empties the sync.Pools' victim caches
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]uint64{
			"heapInuse": m.HeapInuse, "stackInuse": m.StackInuse, "goroutines": uint64(runtime.NumGoroutine()),
		})
	})
	go http.Serve(ops, opsMux) //nolint:errcheck // the process ends with the API server
	// internal/testing/fleet trusts /readyz only once the process has logged this.
	fmt.Fprintf(os.Stderr, "floor: leasehold started (api %s, ops %s)\n", api.Addr(), ops.Addr())
	return (&http.Server{Handler: apiMux, ReadHeaderTimeout: 5 * time.Second}).Serve(api)
}
