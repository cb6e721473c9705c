package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/leasehold/leasehold/pkg/api"
)

// handleHold serves POST /v1/hold?token=T (and
// POST /v1/leases/{lease}/hold?token=T) for el: hold the term with fencing token
// T (Election.Hold) for as long as the client keeps the response open.
//
// If this instance leads with token T and the term is not being released,
// it answers 200 at once, with {"held": true, ...status} and the headers
// flushed, and then keeps the response open without writing more: every
// voluntary release of that term (POST /v1/release, a health step-down,
// shutdown) ends the term at once (leader:false), then waits until the
// hold ends, at most until the term's validity ends, before it writes the
// release. The hold ends when the client closes the connection (or the
// request's context ends otherwise), so a client that dies gives it up by
// itself, and one that is paused (SIGSTOP) keeps it; or, at the latest,
// when EndBlockingRequests is called: the sidecar calls it once its
// election has stopped, when the release has been written or given up and
// there is nothing left to hold; the response then ends (EOF after the
// body). Otherwise: 409 with {"error": ..., "code": "conflict"} when this instance does not
// lead with T or the term is being released (the client must not start
// what the hold was to protect); 503 with Retry-After once
// EndBlockingRequests has been called (code shutting_down), or when the
// listener already serves its bound of blocking requests, which a hold
// counts in (code too_many_blocking_requests; nothing is held); 400 for a
// missing or malformed token.
func (s *Server) handleHold(w http.ResponseWriter, r *http.Request, el Election) {
	q, err := queryOf(r)
	if err != nil {
		badParameter(w, err)
		return
	}
	tok, err := q.token("token")
	if err != nil {
		badParameter(w, err)
		return
	}
	if s.blockingEnded() {
		refuseBlocking(w)
		return
	}
	limit := limitOf(r.Context())
	if !limit.acquire() {
		refuseTooMany(w, r)
		return
	}
	defer limit.release()
	end, ok := el.Hold(tok)
	if !ok {
		writeError(w, http.StatusConflict, codeConflict, "not leading with fencing token "+tok.String()+
			" (another term, no term, or the term is being released): nothing to hold")
		return
	}
	defer end()
	s.holds.Add(1)
	defer s.holds.Add(-1)
	log := s.logFor(el)

	snap := el.Snapshot()
	setIndex(w, snap)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // tell proxies not to buffer
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(api.Held{Held: true, Status: s.statusOf(snap)})
	if err := http.NewResponseController(w).Flush(); err != nil {
		log.Debug("hold: the client left before the answer was sent", "fencingToken", tok, "err", err)
		return
	}
	log.Debug("hold taken", "fencingToken", tok)
	select {
	case <-r.Context().Done():
		log.Debug("hold ended by the client", "fencingToken", tok)
	case <-s.ended:
		log.Info("hold ended: the sidecar is shutting down and its election has stopped", "fencingToken", tok)
	}
}
