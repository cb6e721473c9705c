package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
)

// errorCode is the machine-readable code of an error answer, next to its
// human-readable message. The codes are public contract, listed in
// api/openapi.yaml (ErrorCode): a code is never renamed or given another
// meaning; new ones may be added, so a client treats an unknown code as
// its HTTP status.
type errorCode string

const (
	// codeBadParameter (400): a query parameter is missing, malformed or
	// out of range, or the query string is malformed.
	codeBadParameter errorCode = "bad_parameter"
	// codeNotFound (404): no route serves the path on this listener.
	codeNotFound errorCode = "not_found"
	// codeMethodNotAllowed (405): the path is served, with other methods
	// (listed in Allow).
	codeMethodNotAllowed errorCode = "method_not_allowed"
	// codeConflict (409): POST /v1/hold for a term this instance does not
	// lead, or that is being released.
	codeConflict errorCode = "conflict"
	// codeNotLeader (503): GET /v1/token while this instance is not the
	// valid leader.
	codeNotLeader errorCode = "not_leader"
	// codeNotReady (503): GET /readyz before the Lease has been observed.
	codeNotReady errorCode = "not_ready"
	// codeElectionStalled (503): GET /livez once the election loop has
	// made no progress for 2 × LeaseDuration.
	codeElectionStalled errorCode = "election_stalled"
	// codeShuttingDown (503): the sidecar is shutting down: /readyz from
	// BeginShutdown on; a request that would block, or a hold, after
	// EndBlockingRequests; a release the stopped election can no longer do.
	codeShuttingDown errorCode = "shutting_down"
	// codeReleaseFailed (503): POST /v1/release: the election could not
	// read or write the Lease.
	codeReleaseFailed errorCode = "release_failed"
	// codeLeaseGroup (409): an endpoint that names no Lease (/v1/status,
	// /v1/leader, /v1/token, /v1/watch, /v1/release, /v1/hold, GET /) on a
	// sidecar that serves a lease group; the message points at
	// /v1/leases/{lease}.
	codeLeaseGroup errorCode = "lease_group"
	// codeUnknownLease (404): /v1/leases/{lease} names no Lease this
	// sidecar serves.
	codeUnknownLease errorCode = "unknown_lease"
)

// Retry-After values of the 503 answers (whole seconds, the header's
// delta-seconds form, ≥ 1). api/openapi.yaml documents them.
const (
	// stateRetryAfter is for a state that may change at any moment: not
	// leader (a takeover completes within a round trip of a release), not
	// ready yet (the Lease is observed within a round trip of start), the
	// election loop stalled. Asking a loopback sidecar once a second costs
	// nothing; blocking with ?wait= or /v1/watch is better still.
	stateRetryAfter = time.Second
	// retryAfter (shutdown.go, 2 s) is for a sidecar that is going away,
	// and for a release the election could not write: it retries its own
	// Lease requests after retryPeriod (2 s by default), so asking sooner
	// finds the same state.
)

// retryAfterOf is the Retry-After of a 503 with code.
func retryAfterOf(code errorCode) time.Duration {
	switch code {
	case codeShuttingDown, codeReleaseFailed:
		return retryAfter
	default:
		return stateRetryAfter
	}
}

// setRetryAfter sets Retry-After to d in whole seconds, at least 1.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(d/time.Second))))
}

// errorBody is the JSON body of every error answer:
// {"error": "<message for people>", "code": "<errorCode>"}.
type errorBody struct {
	Error string    `json:"error"`
	Code  errorCode `json:"code"`
}

// writeError answers status with {"error": msg, "code": code}. Every 503
// also carries Retry-After (retryAfterOf).
func writeError(w http.ResponseWriter, status int, code errorCode, msg string) {
	if status == http.StatusServiceUnavailable {
		setRetryAfter(w, retryAfterOf(code))
	}
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

// badParameter answers 400 with err's message.
func badParameter(w http.ResponseWriter, err error) {
	writeError(w, http.StatusBadRequest, codeBadParameter, err.Error())
}

// notFound answers requests for paths no route serves.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, codeNotFound, "no such endpoint: "+r.URL.Path)
}

// methodNotAllowed answers requests whose path r serves with other methods,
// listing those methods in Allow.
func methodNotAllowed(r *mux.Router) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		allowed := allowedMethods(r, req)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed,
			"method "+req.Method+" not allowed on "+req.URL.Path+"; allowed: "+strings.Join(allowed, ", "))
	})
}

// allowedMethods lists, sorted, the methods with which some route of r
// matches req's path.
func allowedMethods(r *mux.Router, req *http.Request) []string {
	var allowed []string
	_ = r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		methods, err := route.GetMethods()
		if err != nil {
			return nil // a route without a method restriction: none of ours
		}
		for _, m := range methods {
			probe := req.Clone(req.Context())
			probe.Method = m
			if route.Match(probe, &mux.RouteMatch{}) {
				allowed = append(allowed, m)
			}
		}
		return nil
	})
	slices.Sort(allowed)
	return slices.Compact(allowed)
}
