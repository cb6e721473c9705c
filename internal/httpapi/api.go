package httpapi

import (
	"errors"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/pkg/api"
)

// apiRouter routes the API listener.
func (s *Server) apiRouter() *mux.Router {
	r := newRouter()
	r.HandleFunc("/v1/status", s.unnamed(s.handleStatus)).Methods(http.MethodGet)
	r.HandleFunc("/v1/leader", s.unnamed(s.handleLeader)).Methods(http.MethodGet)
	r.HandleFunc("/v1/token", s.unnamed(s.handleToken)).Methods(http.MethodGet)
	r.HandleFunc("/v1/watch", s.unnamed(s.handleWatch)).Methods(http.MethodGet)
	r.HandleFunc("/v1/release", s.unnamed(s.handleRelease)).Methods(http.MethodPost)
	r.HandleFunc("/v1/hold", s.unnamed(s.handleHold)).Methods(http.MethodPost)
	r.HandleFunc("/", s.unnamed(s.handleRoot)).Methods(http.MethodGet)
	r.HandleFunc("/v1/leases", s.handleLeases).Methods(http.MethodGet)
	r.HandleFunc("/v1/leases/{lease}", s.named(s.handleStatus)).Methods(http.MethodGet)
	r.HandleFunc("/v1/leases/{lease}/leader", s.named(s.handleLeader)).Methods(http.MethodGet)
	r.HandleFunc("/v1/leases/{lease}/token", s.named(s.handleToken)).Methods(http.MethodGet)
	r.HandleFunc("/v1/leases/{lease}/release", s.named(s.handleRelease)).Methods(http.MethodPost)
	r.HandleFunc("/v1/leases/{lease}/hold", s.named(s.handleHold)).Methods(http.MethodPost)
	return r
}

// handleStatus serves GET /v1/status (and GET /v1/leases/{lease}): 200
// with el's current status.
func (s *Server) handleStatus(w http.ResponseWriter, _ *http.Request, el Election) {
	snap := el.Snapshot()
	respond(w, http.StatusOK, snap, s.statusOf(snap))
}

// handleLeader serves GET /v1/leader[?wait=D] (and
// GET /v1/leases/{lease}/leader) for el: 200 with the status when this
// instance is the valid leader, else 503 with the status and
// Retry-After (stateRetryAfter). With wait it
// first blocks (at most D, ≤ 10m) until this instance leads; once
// EndBlockingRequests has been called, a wait that does not find this
// instance leading is answered 503 by refuseBlocking instead.
func (s *Server) handleLeader(w http.ResponseWriter, r *http.Request, el Election) {
	q, err := queryOf(r)
	if err != nil {
		badParameter(w, err)
		return
	}
	wait, err := q.duration("wait", 0, maxWait)
	if err != nil {
		badParameter(w, err)
		return
	}
	snap := el.Snapshot()
	if wait > 0 {
		var ok bool
		if snap, ok = block(s, w, r, s.electionSource(el), snap, wait, func(snap *elect.Snapshot) bool {
			return snap.IsLeader(s.clock.Now())
		}); !ok {
			return
		}
	}
	st := s.statusOf(snap)
	code := http.StatusOK
	if !st.Leader {
		code = http.StatusServiceUnavailable
		setRetryAfter(w, stateRetryAfter)
	}
	respond(w, code, snap, st)
}

// handleToken serves GET /v1/token (and GET /v1/leases/{lease}/token) for
// el: 200 with the own term's token and
// validity when leader, else 503 with a JSON error (not_leader) and
// Retry-After.
func (s *Server) handleToken(w http.ResponseWriter, _ *http.Request, el Election) {
	snap := el.Snapshot()
	st := s.statusOf(snap)
	setIndex(w, snap)
	if !st.Leader {
		writeError(w, http.StatusServiceUnavailable, codeNotLeader, "not leader")
		return
	}
	writeJSON(w, http.StatusOK, api.Token{FencingToken: st.FencingToken, Term: st.Term, ValidUntil: st.ValidUntil, ValidForMs: st.ValidForMs})
}

// handleRelease serves POST /v1/release[?for=D][&to=ID] (and
// POST /v1/leases/{lease}/release) for el: step down if leading,
// release the Lease (after the holds on the term have ended, at most when
// its validity ends: see handleHold), handed to member ID when to is given
// (Handover; 409 unknown_successor when ID is no live member other than
// this instance, 409 handover_unavailable without membership, nothing
// released either way), and stay out of the election for D (default
// LeaseDuration, ≤ 1h), then 200 with {"released": bool, ...status}.
// Idempotent. A failure of the election to release is the server's: 503
// with Retry-After and a JSON error, code shutting_down when the elector has
// stopped (elect.ErrStopped), else release_failed (the Lease could not be
// read or written); the state it left is what GET /v1/status shows.
func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request, el Election) {
	q, err := queryOf(r)
	if err != nil {
		badParameter(w, err)
		return
	}
	stayOut, err := q.duration("for", s.leaseDuration, maxStayOut)
	if err != nil {
		badParameter(w, err)
		return
	}
	to, err := q.identity("to")
	if err != nil {
		badParameter(w, err)
		return
	}
	var ok bool
	if to == "" {
		ok, err = el.Release(r.Context(), stayOut)
	} else if h, can := el.(Handover); can {
		ok, err = h.HandOver(r.Context(), stayOut, to)
	} else {
		err = group.ErrNoMembership
	}
	if errors.Is(err, group.ErrNoMembership) {
		writeError(w, http.StatusConflict, codeNoHandover,
			"this sidecar has no membership to hand over to (an observer, or one Lease without LEASEHOLD_HANDOVER=successor); nothing was released")
		return
	}
	log := s.logFor(el)
	if errors.Is(err, group.ErrUnknownSuccessor) {
		writeError(w, http.StatusConflict, codeUnknownSuccessor, err.Error()+"; nothing was released")
		return
	}
	if err != nil {
		if r.Context().Err() != nil {
			return // the client left
		}
		log.Warn("release requested over HTTP failed", "err", err, "stayOut", stayOut)
		code := codeReleaseFailed
		if errors.Is(err, elect.ErrStopped) {
			code = codeShuttingDown // the election has stopped: the sidecar is going away
		}
		writeError(w, http.StatusServiceUnavailable, code, "release failed: "+err.Error())
		return
	}
	log.Info("release requested over HTTP", "released", ok, "stayOut", stayOut, "to", to)
	snap := el.Snapshot()
	respond(w, http.StatusOK, snap, api.Release{Released: ok, Status: s.statusOf(snap)})
}

// handleRoot serves GET / for el: {"name": "<holder>"}, "" when none, as
// the retired Kubernetes contrib leader-elector sidecar served it.
func (s *Server) handleRoot(w http.ResponseWriter, _ *http.Request, el Election) {
	snap := el.Snapshot()
	respond(w, http.StatusOK, snap, api.Name{Name: snap.Holder})
}

// respond answers code with body, which describes snap.
func respond(w http.ResponseWriter, code int, snap *elect.Snapshot, body any) {
	setIndex(w, snap)
	writeJSON(w, code, body)
}
