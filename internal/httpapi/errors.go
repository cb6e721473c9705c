package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/leasehold/leasehold/pkg/api"
)

// errorCode is the machine-readable code of an error answer: pkg/api's
// ErrorCode, where each code's meaning is documented (and api/openapi.yaml
// lists them). A code is never renamed or given another meaning.
type errorCode = api.ErrorCode

// The codes this server answers with (pkg/api says which status carries
// each, and when).
const (
	codeBadParameter     = api.CodeBadParameter
	codeNotFound         = api.CodeNotFound
	codeMethodNotAllowed = api.CodeMethodNotAllowed
	codeConflict         = api.CodeConflict
	codeNotLeader        = api.CodeNotLeader
	codeNotReady         = api.CodeNotReady
	codeElectionStalled  = api.CodeElectionStalled
	codeShuttingDown     = api.CodeShuttingDown // /readyz from BeginShutdown on; blocking requests and holds after EndBlockingRequests
	codeReleaseFailed    = api.CodeReleaseFailed
	codeLeaseGroup       = api.CodeLeaseGroup
	codeUnknownLease     = api.CodeUnknownLease
	codeUnknownSuccessor = api.CodeUnknownSuccessor
	codeNoHandover       = api.CodeHandoverUnavailable
	codeTooManyBlocking  = api.CodeTooManyBlockingRequests // a blocking request beyond its listener's bound (limit.go)
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
	//
	// tooManyRetryAfter (limit.go, 5 s) is for a blocking request beyond
	// its listener's bound.
)

// retryAfterOf is the Retry-After of a 503 with code.
func retryAfterOf(code errorCode) time.Duration {
	switch code {
	case codeShuttingDown, codeReleaseFailed:
		return retryAfter
	case codeTooManyBlocking:
		return tooManyRetryAfter
	default:
		return stateRetryAfter
	}
}

// setRetryAfter sets Retry-After to d in whole seconds, at least 1.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(d/time.Second))))
}

// writeError answers status with {"error": msg, "code": code}. Every 503
// also carries Retry-After (retryAfterOf).
func writeError(w http.ResponseWriter, status int, code errorCode, msg string) {
	if status == http.StatusServiceUnavailable {
		setRetryAfter(w, retryAfterOf(code))
	}
	writeJSON(w, status, api.Error{Message: msg, Code: code})
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
