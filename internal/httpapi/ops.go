package httpapi

import (
	"fmt"
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsRouter routes the read-only OPS listener.
func (s *Server) opsRouter(reg *prometheus.Registry) *mux.Router {
	r := newRouter()
	r.HandleFunc("/livez", s.handleLivez).Methods(http.MethodGet)
	r.HandleFunc("/readyz", s.handleReadyz).Methods(http.MethodGet)
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).Methods(http.MethodGet)
	r.HandleFunc("/v1/status", s.handleStatus).Methods(http.MethodGet)
	r.HandleFunc("/v1/leader", s.handleLeader).Methods(http.MethodGet)
	return r
}

// probe is the body of a passing probe.
type probe struct {
	Status string `json:"status"`
}

// handleLivez serves GET /livez: 200 unless the election loop has made no
// progress (Snapshot.Heartbeat, or the Server's start before the first
// one) for more than 2 × LeaseDuration. It never depends on who leads, so
// a liveness probe does not restart pods during an election.
func (s *Server) handleLivez(w http.ResponseWriter, _ *http.Request) {
	snap := s.election.Snapshot()
	last := s.started
	if snap.Heartbeat.After(last) {
		last = snap.Heartbeat
	}
	limit := 2 * s.leaseDuration
	if stalled := s.clock.Since(last); stalled > limit {
		writeError(w, http.StatusServiceUnavailable, codeElectionStalled, fmt.Sprintf("election loop made no progress for %s (limit %s)", stalled, limit))
		return
	}
	writeJSON(w, http.StatusOK, probe{Status: "ok"})
}

// handleReadyz serves GET /readyz: 200 once the Lease has been observed or
// acquired, 503 before that and from BeginShutdown on.
func (s *Server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	snap := s.election.Snapshot()
	switch {
	case s.shuttingDown():
		writeError(w, http.StatusServiceUnavailable, codeShuttingDown, "shutting down")
	case !snap.Observed && !snap.Leading:
		writeError(w, http.StatusServiceUnavailable, codeNotReady, "the Lease has not been observed yet")
	default:
		writeJSON(w, http.StatusOK, probe{Status: "ready"})
	}
}
