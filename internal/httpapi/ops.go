package httpapi

import (
	"fmt"
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leasehold/leasehold/pkg/api"
)

// opsRouter routes the read-only OPS listener.
func (s *Server) opsRouter(reg *prometheus.Registry) *mux.Router {
	r := newRouter()
	r.HandleFunc("/livez", s.handleLivez).Methods(http.MethodGet)
	r.HandleFunc("/readyz", s.handleReadyz).Methods(http.MethodGet)
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).Methods(http.MethodGet)
	r.HandleFunc("/v1/status", s.unnamed(s.handleStatus)).Methods(http.MethodGet)
	r.HandleFunc("/v1/leader", s.unnamed(s.handleLeader)).Methods(http.MethodGet)
	r.HandleFunc("/v1/leases", s.handleLeases).Methods(http.MethodGet)
	r.HandleFunc("/v1/leases/{lease}", s.named(s.handleStatus)).Methods(http.MethodGet)
	r.HandleFunc("/v1/leases/{lease}/leader", s.named(s.handleLeader)).Methods(http.MethodGet)
	return r
}

// handleLivez serves GET /livez: 200 unless an election loop has made no
// progress (Snapshot.Heartbeat, or the Server's start before the first
// one) for more than 2 × LeaseDuration; in group mode, any one of the
// group's. It never depends on who leads, so a liveness probe does not
// restart pods during an election.
func (s *Server) handleLivez(w http.ResponseWriter, _ *http.Request) {
	limit := 2 * s.leaseDuration
	for _, el := range s.elections {
		snap := el.Snapshot()
		last := s.started
		if snap.Heartbeat.After(last) {
			last = snap.Heartbeat
		}
		if stalled := s.clock.Since(last); stalled > limit {
			msg := fmt.Sprintf("election loop made no progress for %s (limit %s)", stalled, limit)
			if s.grouped {
				msg += fmt.Sprintf(": Lease %q", snap.Lease)
			}
			writeError(w, http.StatusServiceUnavailable, codeElectionStalled, msg)
			return
		}
	}
	writeJSON(w, http.StatusOK, api.Probe{Status: "ok"})
}

// handleReadyz serves GET /readyz: 200 once the Lease (in group mode,
// every Lease of the group) has been observed or acquired, 503 before that
// and from BeginShutdown on.
func (s *Server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	if s.shuttingDown() {
		writeError(w, http.StatusServiceUnavailable, codeShuttingDown, "shutting down")
		return
	}
	var unobserved []string
	for _, el := range s.elections {
		if snap := el.Snapshot(); !snap.Observed && !snap.Leading {
			unobserved = append(unobserved, snap.Lease)
		}
	}
	switch {
	case len(unobserved) == 0:
		writeJSON(w, http.StatusOK, api.Probe{Status: "ready"})
	case !s.grouped:
		writeError(w, http.StatusServiceUnavailable, codeNotReady, "the Lease has not been observed yet")
	default:
		writeError(w, http.StatusServiceUnavailable, codeNotReady,
			fmt.Sprintf("%d of %d Leases have not been observed yet: %s", len(unobserved), len(s.elections), quoteSome(unobserved)))
	}
}
