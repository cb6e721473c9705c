// Package api holds the JSON types of leasehold's HTTP API, as
// api/openapi.yaml defines them: what the sidecar sends, field for field.
// The sidecar encodes its answers with these types, and pkg/client decodes
// them, so the two cannot drift apart; a test checks each type against the
// OpenAPI document.
//
// The package imports the standard library only, so an app can use it
// without pulling in leasehold's server or Kubernetes' client libraries.
//
// Contract: within v1 a field is never renamed, removed or given another
// meaning, and an error code never changes its meaning; fields and codes
// may be added. Decode leniently (unknown fields ignored, as encoding/json
// does) and treat an unknown ErrorCode as its HTTP status.
package api

import (
	"encoding/json"
	"strconv"
)

// IndexHeader is the response header that carries the index of the state
// an answer describes (Status.Index; for GET /v1/leases, Leases.Index).
const IndexHeader = "X-Leasehold-Index"

// The headers the forwarding proxy (LEASEHOLD_PROXY_ADDR) sets on each
// request it delivers to the app, for the app to stamp its writes with.
const (
	// FencingTokenHeader carries the token of the term the instance validly
	// led when it forwarded the request, in decimal (FencingToken.String).
	FencingTokenHeader = "X-Leasehold-Fencing-Token"
	// TermHeader carries, beside FencingTokenHeader, that term's number (the
	// Lease's leaseTransitions): for people, not a token.
	TermHeader = "X-Leasehold-Term"
)

// FencingTokenAnnotation is the Lease annotation on which the holder
// publishes its term's token (in decimal), so that every instance, kubectl
// and monitoring can read it from the Lease. The write that acquires a term
// removes it; the holder's next write publishes it. It is only a claim of
// whoever last wrote the Lease: the token of a term is the resourceVersion
// of the write that acquired it, which is smaller than the Lease's current
// resourceVersion once the annotation is published.
const FencingTokenAnnotation = "leasehold.io/fencing-token"

// FencingToken is a fencing token: the token of a term is larger than that
// of every earlier term of the same Lease, whoever held them, so storage that
// refuses a write whose token is smaller than the largest it has seen refuses
// every deposed leader. It is a JSON number. The zero FencingToken means "no
// token known" and is never the token of a term.
type FencingToken uint64

// String is the token in decimal, as it appears in the API's JSON and query
// strings (POST /v1/hold?token=).
func (t FencingToken) String() string { return strconv.FormatUint(uint64(t), 10) }

// Status is one Lease as this instance sees it: the body of GET /v1/status,
// GET /v1/leases/{lease}, GET /v1/leader, GET /v1/watch, and each element of
// Leases.Leases. Timestamps are RFC 3339 with nanoseconds, in UTC.
type Status struct {
	// Identity is this instance's holder identity.
	Identity string `json:"identity"`
	// Namespace and Lease name the Lease.
	Namespace string `json:"namespace"`
	Lease     string `json:"lease"`
	// Leader is true only while this instance holds a term and the term is
	// valid at the moment of answering.
	Leader bool `json:"leader"`
	// Holder is the Lease's holder: Identity when this instance leads, ""
	// when there is none or it is unknown.
	Holder string `json:"holder"`
	// Term is the Lease's leaseTransitions for the holder's term. It is for
	// people, not a fencing token.
	Term int32 `json:"term"`
	// FencingToken is the current term's token: this instance's own when it
	// leads, otherwise the holder's published one, or 0 when unknown.
	FencingToken FencingToken `json:"fencingToken"`
	// LeaderAddress is where the valid leader can be reached: see
	// LeaderAddress. Absent unless this sidecar has an advertised address.
	LeaderAddress LeaderAddress `json:"leaderAddress,omitzero"`
	// ValidUntil is when this instance's leadership stops being valid;
	// absent ("") when not leader.
	ValidUntil string `json:"validUntil,omitempty"`
	// ValidForMs is the validity left, in milliseconds, rounded down; 0 when
	// not leader.
	ValidForMs int64 `json:"validForMs"`
	// AcquiredAt and RenewedAt are the Lease's acquireTime and renewTime as
	// the holder wrote them; ObservedAt is when this instance last saw the
	// Lease change, by its own clock. Each is absent ("") when unknown.
	AcquiredAt string `json:"acquiredAt,omitempty"`
	RenewedAt  string `json:"renewedAt,omitempty"`
	ObservedAt string `json:"observedAt,omitempty"`
	// Index changes whenever Leader, Holder, Term, FencingToken or the
	// leader's advertised address does, and only then. It is opaque: compare it for equality only. A restarted
	// sidecar starts above any index its predecessor reached, and if an
	// index ever goes backwards (a clock set back), carry on with the new
	// one.
	Index uint64 `json:"index"`
	// Candidate is true while this instance campaigns or leads; false while
	// health-gated candidacy keeps it out, or after a release until its
	// stay-out ends.
	Candidate bool `json:"candidate"`
	// AppHealth is the app's health as last probed; nil unless health-gated
	// candidacy is on (LEASEHOLD_APP_HEALTH_URL).
	AppHealth *AppHealth `json:"appHealth,omitempty"`
	// Rank is data-aware failover's view; nil unless it is on
	// (LEASEHOLD_APP_RANK_URL).
	Rank *Rank `json:"rank,omitempty"`
	// LastError is why the election's last request on the Lease failed (a
	// missing namespace, a 403, a timeout); nil (JSON null) once it no
	// longer holds. LastErrorAt is when; absent when LastError is nil.
	LastError   *string `json:"lastError"`
	LastErrorAt string  `json:"lastErrorAt,omitempty"`
	// HolderClock is what the holder's renewals, as this instance observed
	// them, say about the holder's clock; nil (absent) while this instance
	// holds the Lease, there is no holder, or fewer than three renewals of
	// this holder were seen.
	HolderClock *HolderClock `json:"holderClock,omitempty"`
	// ApiserverClock bounds the apiserver's clock against this instance's;
	// nil (absent) before the first response that carried a Date header.
	ApiserverClock *ApiserverClock `json:"apiserverClock,omitempty"`
	// ApiserverVersion is the kube-apiserver's version as this sidecar read
	// it at start; nil (absent) until it has, and for good when it could not.
	ApiserverVersion *ApiserverVersion `json:"apiserverVersion,omitempty"`
}

// ApiserverVersion is the kube-apiserver's version, read once at start, and
// what it means for leasehold (docs/compatibility.md).
type ApiserverVersion struct {
	// GitVersion is the version as the apiserver reports it ("v1.37.2").
	GitVersion string `json:"gitVersion"`
	// ResourceVersionsComparable is true from Kubernetes 1.35 (KEP-5504):
	// the apiserver promises resourceVersions that only grow, so fencing
	// tokens (each the Lease resourceVersion of the write that started its
	// term) strictly increase. When false, leasehold logged a warning at
	// start: tokens then increase only as long as the apiserver serves
	// etcd's revisions as resourceVersions, which is not promised.
	ResourceVersionsComparable bool `json:"resourceVersionsComparable"`
	// NativeSidecars is true from Kubernetes 1.29: init containers with
	// restartPolicy: Always, which the chart runs leasehold as.
	NativeSidecars bool `json:"nativeSidecars"`
}

// ApiserverClock bounds the apiserver's wall clock minus this instance's,
// from the Date headers (whole seconds) of its newest responses and each
// request's round trip (docs/troubleshooting.md, "Clocks").
type ApiserverClock struct {
	// OffsetLowerMs and OffsetUpperMs bound the offset, in milliseconds
	// (rounded outwards): the apiserver answered between sending and
	// receiving, and its Date is its clock truncated to the second, so the
	// bounds need no assumption on delays; only that the two clocks drift
	// apart by at most 1000 ppm (NTP's slew limit on each) over the window.
	OffsetLowerMs int64 `json:"offsetLowerMs"`
	OffsetUpperMs int64 `json:"offsetUpperMs"`
	// Responses is how many of the newest responses (at most 64) the bounds
	// rest on, ObservedAt when the newest arrived.
	Responses  int    `json:"responses"`
	ObservedAt string `json:"observedAt"`
}

// HolderClock bounds the Lease holder's clock against this instance's,
// from the holder's renewTime against the local arrival of its renewals
// over the last five minutes (docs/troubleshooting.md, "Clocks").
type HolderClock struct {
	// Holder is the identity whose clock it describes.
	Holder string `json:"holder"`
	// Renewals is how many of its renewals the figures rest on, SpanMs the
	// local time they cover, and ObservedAt when the newest arrived.
	Renewals   int    `json:"renewals"`
	SpanMs     int64  `json:"spanMs"`
	ObservedAt string `json:"observedAt"`
	// OffsetLowerMs and OffsetUpperMs bound the holder's clock minus this
	// instance's, in milliseconds (rounded outwards). The lower bound is
	// certain (no record arrives before it is written); the upper one
	// holds if the least delayed recent renewal arrived within
	// DelayBoundMs.
	OffsetLowerMs int64 `json:"offsetLowerMs"`
	OffsetUpperMs int64 `json:"offsetUpperMs"`
	// RateLower and RateUpper bound the holder's clock rate over this
	// instance's (1: equal rates), under the same assumption; absent until
	// two renewals far enough apart bound it.
	RateLower *float64 `json:"rateLower,omitempty"`
	RateUpper *float64 `json:"rateUpper,omitempty"`
	// Level is how far the rate interval lies from 1: "none", or
	// "approaching" when all of it is more than half of Limit away, or
	// "beyond" when all of it is more than Limit away.
	Level string `json:"level"`
	// Limit is the rate difference under which leasehold's validity
	// guarantee holds: (leaseDuration − renewDeadline) / (leaseDuration +
	// renewDeadline).
	Limit float64 `json:"limit"`
	// DelayBoundMs is the delay assumption, in milliseconds: the
	// retryPeriod.
	DelayBoundMs int64 `json:"delayBoundMs"`
}

// AppHealth is health-gated candidacy's view of the app: healthy once a
// threshold of probes in a row pass (LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD,
// 1 by default: the first 2xx answer of its health URL) until a threshold
// of probes in a row fail (LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD), and so
// on.
type AppHealth struct {
	Healthy bool `json:"healthy"`
	// ConsecutiveFailures counts the failed probes since the last success
	// (or since start).
	ConsecutiveFailures int `json:"consecutiveFailures"`
	// ConsecutiveSuccesses counts the passed probes since the last failure
	// (or since start): while not healthy, how far the app is on its way
	// back.
	ConsecutiveSuccesses int `json:"consecutiveSuccesses"`
	// LastCheckAt is when the latest probe completed; absent before the
	// first.
	LastCheckAt string `json:"lastCheckAt,omitempty"`
	// LastSuccessAt is when the latest 2xx answer came; absent before the
	// first.
	LastSuccessAt string `json:"lastSuccessAt,omitempty"`
	// LastError is why the latest probe failed; absent after a success.
	LastError string `json:"lastError,omitempty"`
}

// Rank is data-aware failover's view of the Lease (LEASEHOLD_APP_RANK_URL):
// this instance's app's rank as last probed, the generation the Lease's
// last leader published, and the member that is the best candidate now.
type Rank struct {
	// Known is false before the app's first valid answer and after a
	// failed probe: this instance then ranks last.
	Known bool `json:"known"`
	// Generation and Position are the app's answer ("" and 0 when not
	// Known).
	Generation string `json:"generation"`
	Position   int64  `json:"position"`
	// ObservedAt is when the latest probe completed; absent before the
	// first.
	ObservedAt string `json:"observedAt,omitempty"`
	// LeaseGeneration is the generation last published on the Lease by its
	// holder, "" when none: candidates of that generation go first.
	LeaseGeneration string `json:"leaseGeneration"`
	// BestCandidate is the identity of the best-ranked live member (this
	// instance included), the one a failover now promotes; nil (JSON null)
	// until the membership is known, or when there is no member.
	BestCandidate *string `json:"bestCandidate"`
}

// Leases is the body of GET /v1/leases: every Lease's status, in configured
// order.
type Leases struct {
	// Index is the group's index: it changes whenever one of its Leases'
	// index does, or the member count does, and only then. With a single
	// Lease it is that Lease's index. Opaque, like Status.Index.
	Index uint64 `json:"index"`
	// Members is the number of live members of the group this instance
	// sees, itself included; nil (JSON null) when no membership is kept (a
	// single Lease, or an observer).
	Members *int `json:"members"`
	// Leases are the statuses, each exactly what GET /v1/leases/{lease}
	// answers for that Lease.
	Leases []Status `json:"leases"`
}

// Token is the body of GET /v1/token (200): this instance's term, while it
// is the valid leader.
type Token struct {
	// FencingToken is the term's token, never 0.
	FencingToken FencingToken `json:"fencingToken"`
	Term         int32        `json:"term"`
	// ValidUntil and ValidForMs are the term's validity, as in Status.
	ValidUntil string `json:"validUntil"`
	ValidForMs int64  `json:"validForMs"`
}

// Release is the body of POST /v1/release (200): the status after the
// release, and whether a release of the Lease was written (false when this
// instance did not hold it).
type Release struct {
	Released bool `json:"released"`
	Status
}

// Held is the first line of the body of POST /v1/hold when the hold is
// granted (200): Held is always true, and Status is the state at that
// moment. The answer then stays open for as long as the hold lasts.
type Held struct {
	Held bool `json:"held"`
	Status
}

// Name is the body of GET /, as the Kubernetes contrib leader-elector
// sidecar served it: the Lease holder's identity, "" when none.
type Name struct {
	Name string `json:"name"`
}

// Probe is the body of a passing GET /livez ("ok") or GET /readyz
// ("ready").
type Probe struct {
	Status string `json:"status"`
}

// Error is the body of every error answer. It is not a Go error: pkg/client
// returns a *client.Error that carries it.
type Error struct {
	// Message says what went wrong, for people. Its wording may change:
	// match on Code.
	Message string `json:"error"`
	// Code says what went wrong, for programs.
	Code ErrorCode `json:"code"`
}

// ErrorCode is the machine-readable code of an error answer. A code is never
// renamed or given another meaning; codes may be added, so a client treats
// an unknown code as its HTTP status.
type ErrorCode string

// The error codes, with the HTTP status that carries each.
const (
	// CodeBadParameter (400): a query parameter is missing, malformed or out
	// of range, or the query string is malformed.
	CodeBadParameter ErrorCode = "bad_parameter"
	// CodeNotFound (404): no route serves the path on this listener.
	CodeNotFound ErrorCode = "not_found"
	// CodeMethodNotAllowed (405): the path is served, with other methods
	// (listed in Allow).
	CodeMethodNotAllowed ErrorCode = "method_not_allowed"
	// CodeConflict (409): POST /v1/hold for a term this instance does not
	// lead, or that is being released.
	CodeConflict ErrorCode = "conflict"
	// CodeNotLeader (503): GET /v1/token while this instance is not the
	// valid leader.
	CodeNotLeader ErrorCode = "not_leader"
	// CodeNotReady (503): GET /readyz before the Lease (every Lease of a
	// group) has been observed.
	CodeNotReady ErrorCode = "not_ready"
	// CodeElectionStalled (503): GET /livez once an election loop has made no
	// progress for 2 × the lease duration.
	CodeElectionStalled ErrorCode = "election_stalled"
	// CodeShuttingDown (503): the sidecar is shutting down: GET /readyz, a
	// request that would block, a hold, or a release the stopped election
	// can no longer do. Ask again after Retry-After (another sidecar
	// process may answer).
	CodeShuttingDown ErrorCode = "shutting_down"
	// CodeReleaseFailed (503): POST /v1/release: the election could not read
	// or write the Lease.
	CodeReleaseFailed ErrorCode = "release_failed"
	// CodeLeaseGroup (409): an endpoint that names no Lease (/v1/status,
	// /v1/leader, /v1/token, /v1/watch, /v1/release, /v1/hold, GET /) on a
	// sidecar that serves a lease group: use /v1/leases/{lease}.
	CodeLeaseGroup ErrorCode = "lease_group"
	// CodeUnknownLease (404): /v1/leases/{lease} names no Lease this sidecar
	// serves.
	CodeUnknownLease ErrorCode = "unknown_lease"
	// CodeUnknownSuccessor (409): POST /v1/release?to= (or a Lease's) names
	// no live member other than this instance; nothing was released.
	CodeUnknownSuccessor ErrorCode = "unknown_successor"
	// CodeHandoverUnavailable (409): POST /v1/release?to= on a sidecar with
	// no membership to check the successor against (one Lease without
	// LEASEHOLD_HANDOVER=successor, or an observer); nothing was released.
	CodeHandoverUnavailable ErrorCode = "handover_unavailable"
	// CodeTooManyBlockingRequests (503): a request that would block (a
	// long-poll or leader wait that does not find its answer ready, an SSE
	// stream, a hold) on a listener that already serves its bound of
	// blocking requests (LEASEHOLD_MAX_BLOCKING_REQUESTS). Nothing was
	// started; ask again after Retry-After. Requests that do not block are
	// never refused this way.
	CodeTooManyBlockingRequests ErrorCode = "too_many_blocking_requests"
)

// LeaderAddress is a Status's leaderAddress. It is in an answer only when
// the sidecar has an advertised address (LEASEHOLD_ADVERTISE_ADDRESS), so
// answers without the feature stay as they were; Enabled says so. Address
// is the advertised address (host:port) of the instance that leads validly
// at the moment of answering, as the sidecar judges it: its own while it
// is leader, else the holder's until the holder's claim runs out. It is ""
// (JSON null) when no one leads validly or the leader advertises no
// address. A change of the address written on the Lease moves Index; the
// address turning null because a claim ran out (nothing was written) does
// not.
type LeaderAddress struct {
	Enabled bool
	Address string
}

// IsZero reports whether the field is left out of an answer: the sidecar
// has no advertised address.
func (a LeaderAddress) IsZero() bool { return !a.Enabled }

// MarshalJSON is the address as a JSON string, or null when there is none.
func (a LeaderAddress) MarshalJSON() ([]byte, error) {
	if a.Address == "" {
		return []byte("null"), nil
	}
	return json.Marshal(a.Address)
}

// UnmarshalJSON reads a JSON string or null; either means the field was
// present (Enabled).
func (a *LeaderAddress) UnmarshalJSON(b []byte) error {
	var address *string
	if err := json.Unmarshal(b, &address); err != nil {
		return err
	}
	*a = LeaderAddress{Enabled: true}
	if address != nil {
		a.Address = *address
	}
	return nil
}
