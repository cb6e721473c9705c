package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/leasehold/leasehold/pkg/api"
)

// Code is the machine-readable code of an answer the proxy gives itself,
// in the body {"error": "...", "code": "..."}, the shape of the sidecar
// API's errors (api.Error). A code is never renamed or given another
// meaning.
type Code = api.ErrorCode

// The codes of the proxy's own answers.
const (
	// CodeNoLeader (503, Retry-After): this instance does not lead and
	// knows no valid leader to forward to.
	CodeNoLeader Code = "no_leader"
	// CodeForwardLoop (503, Retry-After): this instance does not lead and
	// the request was already forwarded once by another instance's proxy
	// (HeaderForwarded); it is not forwarded a second time.
	CodeForwardLoop Code = "forward_loop"
	// CodeWrongLease (503, Retry-After): the request was forwarded by
	// another proxy for another Lease (HeaderLease) than this proxy's: the
	// address its sender took for its leader's now belongs to this proxy
	// (e.g. a Pod IP given to a Pod of another app). It is delivered to no
	// one.
	CodeWrongLease Code = "wrong_lease"
	// CodeLeaderUnreachable (503, Retry-After): this instance does not
	// lead, and the leader's proxy refused the connection (it is stopping,
	// or gone), also where the leader is known to be after that (the same
	// address, or another that refused too): the request was delivered to
	// no one.
	CodeLeaderUnreachable Code = "leader_unreachable"
	// CodeUpstreamUnavailable (502): the local app (on the leader), or the
	// leader's proxy (on a follower), gave no answer: refused (the app),
	// reset, closed before answering. The request is not sent again, to
	// anyone.
	CodeUpstreamUnavailable Code = "upstream_unavailable"
	// CodeLeaseRequired (400): a proxy of a lease group got a request
	// without HeaderLease, or with it more than once: the request must name
	// the one Lease whose leader's app is to answer it. The message lists
	// the group's Leases.
	CodeLeaseRequired Code = "lease_required"
	// CodeUnknownLease (404): a proxy of a lease group got a request whose
	// HeaderLease names none of its Leases (the code of the sidecar API's
	// /v1/leases/{lease} for the same). The message lists them.
	CodeUnknownLease Code = api.CodeUnknownLease
	// CodeBadRequest (400): net/http's ReverseProxy refused the request
	// before it could be forwarded (an Upgrade header naming no printable
	// protocol).
	CodeBadRequest Code = "bad_request"
)

// writeError answers status with {"error": msg, "code": code}, as the
// sidecar API's errors are written (internal/httpapi's writeError; the
// caller sets Retry-After on a 503).
func writeError(w http.ResponseWriter, status int, code Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Error{Message: msg, Code: code}) // a write error means the client left
}
