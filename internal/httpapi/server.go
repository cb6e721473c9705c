// Package httpapi serves leasehold's two HTTP listeners.
//
// The API listener (APIHandler, on loopback) answers the questions an app
// asks before a write: am I the leader and until when (GET /v1/status,
// GET /v1/leader), what is my fencing token (GET /v1/token), tell me when
// that changes (GET /v1/watch, long-poll or Server-Sent Events), lets it
// step down (POST /v1/release), and lets it hold its term so that a
// release waits for its work to stop (POST /v1/hold). It is the only
// listener that changes state.
//
// GET /v1/leases serves every election as one group (its status in
// configured order, long-poll or Server-Sent Events on the group's Index),
// and /v1/leases/{lease}[/leader|/token|/release|/hold] the unnamed
// endpoints' answers for one named Lease, in every mode. A Server runs in
// one of two modes. Single-Lease mode (Options.Group nil) serves one
// Election, and /v1/leases presents it as a group of one. Group mode
// (Options.Group set) serves a lease group: the unnamed endpoints, which
// cannot tell which Lease they are about, answer 409 with code lease_group
// and point at /v1/leases/{lease}.
// The OPS listener (OpsHandler) serves kubelet probes, Prometheus metrics
// and read-only status. api/openapi.yaml documents both.
//
// # Contract
//
//   - Leadership is never cached: every answer computes
//     Snapshot.IsLeader(now) with the injected clock at the moment it is
//     written, from the latest Snapshot.
//   - Every response carries X-Leasehold-Index, the Index of the Snapshot
//     its body describes (or, for bodies without status, of the latest
//     Snapshot when the request arrived): the group's for GET /v1/leases
//     and, in group mode, for routes that name no Lease; the named Lease's
//     on /v1/leases/{lease} routes.
//   - Blocking requests (long-polls, /v1/leader?wait, SSE streams) wait on
//     Snapshot.Changed, never poll, and end at the latest when their wait
//     ends, the client goes away, or EndBlockingRequests is called. A hold
//     (POST /v1/hold) has no wait: it lasts until the client goes away or
//     EndBlockingRequests is called; a release of the held term waits for
//     it, at most until the term's validity ends (Election.Hold).
//   - Shutdown has two steps. BeginShutdown makes /readyz fail and changes
//     nothing else, so blocking requests still deliver the changes the
//     election publishes while it steps down and releases (leader:false
//     first). EndBlockingRequests, called once the election has stopped,
//     ends every blocking request promptly; from then on a request that
//     would wait is answered at once with 503, Retry-After (whole seconds)
//     and {"error": ..., "code": "shutting_down"}, while one whose answer
//     is ready (the client has not seen the current state) still gets that
//     answer: no client misses a change. Non-blocking requests answer as
//     before throughout.
//   - Client input never produces a 5xx: bad parameters are 400, unknown
//     paths 404, unknown Lease names 404 (unknown_lease), wrong methods 405
//     with Allow, routes that name no Lease in group mode 409
//     (lease_group), all with a JSON body
//     {"error": "<message>", "code": "<code>"} (errors.go lists the codes).
//     The only 5xx are 503s that report server state: not leader, not
//     ready, not live, shutting down, or a failed release; every 503
//     carries Retry-After.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/apphealth"
	"github.com/leasehold/leasehold/internal/clockskew"
	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/internal/serverversion"
	"github.com/leasehold/leasehold/pkg/api"
)

// Election is what the HTTP layer needs from the elector. *elect.Elector
// satisfies it.
type Election interface {
	// Snapshot returns the latest published state; it never returns nil.
	Snapshot() *elect.Snapshot
	// Release steps down if leading, releases the Lease, and stays out of
	// the election for stayOut. It reports whether a release was written.
	Release(ctx context.Context, stayOut time.Duration) (bool, error)
	// Hold holds the term with token if this instance leads it now and it
	// is not being released: a voluntary release of that term then waits
	// until the hold ends (end, idempotent), at most until the term's
	// validity ends. ok is false, and there is no hold, otherwise.
	Hold(token fence.Token) (end func(), ok bool)
}

// Handover is implemented by the elections that can hand their Lease to a
// chosen successor: those with a membership to check it against
// (group.Election). POST /v1/release?to= uses it.
type Handover interface {
	// HandOver releases as Release does, signed for the member with
	// identity to, which takes it first. It returns an error wrapping
	// group.ErrUnknownSuccessor, having released nothing, when to is not a
	// live member other than this instance.
	HandOver(ctx context.Context, stayOut time.Duration, to string) (bool, error)
}

// Group is what the HTTP layer needs from a lease group's runtime: its
// latest published state. *group.Publisher satisfies it.
type Group interface {
	// Snapshot returns the latest published state; it never returns nil.
	// Its Leases are the Elections' Snapshots as the group last collected
	// them, in configured order: the HTTP layer takes its Index and member
	// count from it, and reads leadership from each Election itself, which
	// may have published since.
	Snapshot() *group.Snapshot
}

// Options configure a Server.
type Options struct {
	// Election is the elector whose state is served in single-Lease mode
	// (Group nil); required then. In group mode it is ignored and may be
	// nil.
	Election Election
	// Group, when not nil, selects group mode: GET /v1/leases serves its
	// Snapshots, and the unnamed endpoints (/v1/status, /v1/leader,
	// /v1/token, /v1/watch, /v1/release, /v1/hold, GET /) answer 409
	// (lease_group). Elections are then required.
	Group Group
	// Elections are the group's elections, in configured order, each named
	// by its Snapshot().Lease; the names are distinct and are those of
	// Group.Snapshot().Leases, in the same order. /v1/leases/{lease}
	// routes act on them. Only in group mode: must be empty when Group is
	// nil (the single Election is then the only Lease).
	Elections []Election
	// Clock tells the time at which leadership validity is judged
	// (Snapshot.IsLeader(Clock.Now())) and liveness is measured; nil means
	// the real clock. Waits (?wait=, heartbeats) always run on real time.
	Clock clock.PassiveClock
	// LeaseDuration is the default stay-out of POST /v1/release, and /livez
	// fails once Snapshot.Heartbeat has not advanced for 2 × LeaseDuration.
	// Required (> 0).
	LeaseDuration time.Duration
	// Registry is the registry /metrics serves, as is: other packages
	// register their collectors in it too. Required.
	Registry *prometheus.Registry
	// Registerer is where New registers the HTTP layer's gauges; nil means
	// Registry. The sidecar passes Registry wrapped with the Lease's
	// constant labels (prometheus.WrapRegistererWith). In group mode the
	// per-Lease gauges carry a variable label lease (see collector), so
	// Registerer must not add a constant label of that name.
	Registerer prometheus.Registerer
	// Version is reported by leasehold_build_info.
	Version string
	// Logger receives the HTTP layer's log lines; nil discards them.
	Logger *slog.Logger
	// AppHealth, when not nil, is reported in every status (health-gated
	// candidacy; *apphealth.Prober satisfies it).
	AppHealth AppHealthSource
	// ApiserverVersion, when not nil, is reported in every status once it knows
	// the apiserver's version (*serverversion.Checker satisfies it).
	ApiserverVersion ApiserverVersionSource
	// Rank, when not nil, is reported in every status of the one Lease
	// (data-aware failover; group.Group.Rank of it).
	Rank func() group.RankStatus
	// ServerClock, when not nil, bounds the apiserver's clock offset in
	// every status (kubeclient.ServerClock.Offset).
	ServerClock func() (clockskew.ServerOffset, bool)
	// Advertises puts leaderAddress in every status (api.LeaderAddress):
	// the sidecar has an advertised address (LEASEHOLD_ADVERTISE_ADDRESS).
	// Without it, answers stay as they were before the field existed.
	Advertises bool
	// MaxBlockingRequests bounds the blocking requests open at once on
	// each listener, the API's and the OPS', separately
	// (LEASEHOLD_MAX_BLOCKING_REQUESTS); 0 means DefaultMaxBlockingRequests.
	// Must not be negative.
	MaxBlockingRequests int
}

// AppHealthSource reports the app's health as last probed.
type AppHealthSource interface {
	Status() apphealth.Status
}

// ApiserverVersionSource reports the apiserver's version as read at start, and
// whether it is known.
type ApiserverVersionSource interface {
	Assessment() (serverversion.Assessment, bool)
}

// Wait limits of the blocking endpoints, and the stay-out limit of
// POST /v1/release.
const (
	maxWait          = 10 * time.Minute
	defaultWatchWait = 5 * time.Minute
	maxStayOut       = time.Hour
)

// defaultHeartbeat is the interval of SSE heartbeat comments.
const defaultHeartbeat = 15 * time.Second

// indexHeader carries the Index on every response.
const indexHeader = api.IndexHeader

// Server serves the API and OPS listeners for one Election, or for the
// Elections of a lease group.
type Server struct {
	election  Election            // the single Lease's; nil in group mode
	group     Group               // group mode: Options.Group; single-Lease mode: group.Single{election}
	grouped   bool                // group mode
	elections []Election          // every election, in configured order (single-Lease mode: election only)
	byName    map[string]Election // elections by Lease name
	names     []string            // the Lease names, in configured order

	appHealth        AppHealthSource                       // nil when health-gated candidacy is off
	apiserverVersion ApiserverVersionSource                // nil: statuses carry no apiserverVersion
	rank             func() group.RankStatus               // nil when data-aware failover is off
	serverClock      func() (clockskew.ServerOffset, bool) // nil: not reported
	advertises       bool                                  // statuses carry leaderAddress (Options.Advertises)
	clock            clock.PassiveClock
	leaseDuration    time.Duration
	log              *slog.Logger
	started          time.Time // liveness is measured from here until the first Heartbeat

	heartbeat time.Duration // SSE heartbeat interval; tests shorten it

	watchers atomic.Int64 // open blocking requests: long-polls, leader waits, SSE streams
	holds    atomic.Int64 // open holds (POST /v1/hold)

	apiLimit, opsLimit *blockingLimit // each listener's bound of blocking requests

	shutdownOnce sync.Once
	shutdown     chan struct{} // closed by BeginShutdown: /readyz fails
	endOnce      sync.Once
	ended        chan struct{} // closed by EndBlockingRequests: blocking requests end

	api, ops *mux.Router
}

// New checks opts, registers the HTTP layer's metrics in opts.Registerer
// (else opts.Registry) and builds both routers.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Group == nil && opts.Election == nil:
		return nil, errors.New("httpapi: Election is required (or Group, with Elections)")
	case opts.Group == nil && len(opts.Elections) > 0:
		return nil, errors.New("httpapi: Elections are only for group mode (with Group)")
	case opts.Group != nil && len(opts.Elections) == 0:
		return nil, errors.New("httpapi: Group requires its Elections")
	case opts.Registry == nil:
		return nil, errors.New("httpapi: Registry is required")
	case opts.LeaseDuration <= 0:
		return nil, errors.New("httpapi: LeaseDuration must be positive")
	case opts.MaxBlockingRequests < 0:
		return nil, errors.New("httpapi: MaxBlockingRequests must not be negative")
	}
	s := &Server{
		appHealth:        opts.AppHealth,
		apiserverVersion: opts.ApiserverVersion,
		rank:             opts.Rank,
		serverClock:      opts.ServerClock,
		advertises:       opts.Advertises,
		clock:            opts.Clock,
		leaseDuration:    opts.LeaseDuration,
		log:              opts.Logger,
		heartbeat:        defaultHeartbeat,
		shutdown:         make(chan struct{}),
		ended:            make(chan struct{}),
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.setElections(opts); err != nil {
		return nil, err
	}
	s.started = s.clock.Now()
	reg := opts.Registerer
	if reg == nil {
		reg = opts.Registry
	}
	if err := reg.Register(newCollector(s, opts.Version)); err != nil {
		return nil, err
	}
	maxBlocking := opts.MaxBlockingRequests
	if maxBlocking == 0 {
		maxBlocking = DefaultMaxBlockingRequests
	}
	var err error
	if s.apiLimit, s.opsLimit, err = newLimits(maxBlocking, reg); err != nil {
		return nil, err
	}
	s.api = s.apiRouter()
	s.ops = s.opsRouter(opts.Registry)
	return s, nil
}

// APIHandler is the handler of the API listener (LEASEHOLD_API_ADDR). It is
// the only one that changes state, so it belongs on loopback. Its blocking
// requests share one bound (Options.MaxBlockingRequests), whichever
// http.Server serves it: serve it on one listener.
func (s *Server) APIHandler() http.Handler { return withLimit(s.apiLimit, s.withIndex(s.api)) }

// OpsHandler is the read-only handler of the OPS listener
// (LEASEHOLD_OPS_ADDR): probes, metrics, status. Its blocking requests have
// a bound of their own, apart from the API listener's. The listener is
// reachable from other pods, so serve it with keep-alives off
// (http.Server.SetKeepAlivesEnabled(false)): a connection then holds
// nothing of the sidecar's once its answer is sent, unless it is one of
// the bounded blocking requests.
func (s *Server) OpsHandler() http.Handler { return withLimit(s.opsLimit, s.withIndex(s.ops)) }

// NewHTTPServer returns an http.Server for h with read, header and idle
// timeouts and a header size limit. It sets no WriteTimeout: long-polls and
// SSE streams are bounded by their wait and by EndBlockingRequests instead.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// setElections sets the Server's mode and elections from opts, checking
// that the group's Leases and the Elections agree.
func (s *Server) setElections(opts Options) error {
	if opts.Group == nil {
		s.election, s.group = opts.Election, group.Single{Election: opts.Election}
		s.elections = []Election{opts.Election}
	} else {
		s.group, s.grouped = opts.Group, true
		s.elections = slices.Clone(opts.Elections)
	}
	s.byName = make(map[string]Election, len(s.elections))
	for i, el := range s.elections {
		if el == nil {
			return fmt.Errorf("httpapi: Elections[%d] is nil", i)
		}
		name := el.Snapshot().Lease
		if _, dup := s.byName[name]; dup {
			return fmt.Errorf("httpapi: two Elections of Lease %q", name)
		}
		s.byName[name] = el
		s.names = append(s.names, name)
	}
	var leases []string
	for _, l := range s.group.Snapshot().Leases {
		leases = append(leases, l.Lease)
	}
	if !slices.Equal(leases, s.names) {
		return fmt.Errorf("httpapi: the group's Leases %q are not the Elections' %q", leases, s.names)
	}
	return nil
}

// withIndex sets X-Leasehold-Index to the latest Index (the group's, in
// group mode) before h runs; handlers that answer with a particular
// Snapshot set it again to that Snapshot's Index.
func (s *Server) withIndex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.grouped {
			setIndexOf(w, s.group.Snapshot().Index)
		} else {
			setIndex(w, s.election.Snapshot())
		}
		h.ServeHTTP(w, r)
	})
}

// setIndex sets X-Leasehold-Index to snap's Index.
func setIndex(w http.ResponseWriter, snap *elect.Snapshot) { setIndexOf(w, snap.Index) }

// setIndexOf sets X-Leasehold-Index to index.
func setIndexOf(w http.ResponseWriter, index uint64) {
	w.Header().Set(indexHeader, strconv.FormatUint(index, 10))
}

// newRouter returns a router whose unmatched requests get JSON 404s and
// 405s (with Allow).
func newRouter() *mux.Router {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(notFound)
	r.MethodNotAllowedHandler = methodNotAllowed(r)
	return r
}
