package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxBlockingRequests is the bound of blocking requests per listener
// when Options.MaxBlockingRequests is 0 (LEASEHOLD_MAX_BLOCKING_REQUESTS
// unset). It is sized so that both listeners full at once stay inside the
// chart's memory limit (64 MiB) with a single Lease and a quarter of the
// limit to spare: measured on the sidecar binary, a blocking request costs
// up to about 41 KiB of RSS (28 KiB while idle, the rest the garbage
// collector's headroom under load) and 5 KiB of kernel memory, so the
// 2 × 300 of both listeners add about 27 MiB to an idle RSS of 20 MiB.
// docs/using.md ("Bounded blocking requests") has the figures and the
// command; TestBlockingRequestsStayWithinTheChartMemoryLimit (cmd/sidecar)
// holds the binary to the limit.
const DefaultMaxBlockingRequests = 300

// tooManyRetryAfter is the Retry-After of a request refused because its
// listener serves its bound of blocking requests (code
// too_many_blocking_requests). A slot frees only when a wait ends (up to
// 10 minutes) or its client leaves, so asking again at once mostly finds
// the bound still full; meanwhile the requests that do not block answer as
// ever.
const tooManyRetryAfter = 5 * time.Second

// blockingLimit bounds the blocking requests open at once on one listener:
// long-polls and leader waits while they wait, SSE streams, holds. One
// exists per listener, owned by the Server; APIHandler and OpsHandler put
// theirs in each request's context (limitOf). A request whose answer is
// ready never takes a slot, so status, a leader question without wait, a
// long-poll whose index is not the current one, metrics and probes are
// never refused by it.
type blockingLimit struct {
	max     int64
	open    atomic.Int64 // slots taken; never above max
	refused prometheus.Counter
}

// acquire takes a slot and reports true, or, when every slot is taken,
// counts a refusal and reports false. A slot taken is given back with
// release.
func (l *blockingLimit) acquire() bool {
	for {
		n := l.open.Load()
		if n >= l.max {
			l.refused.Inc()
			return false
		}
		if l.open.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives back a slot taken by acquire.
func (l *blockingLimit) release() { l.open.Add(-1) }

// limitKey is the context key of a request's blockingLimit.
type limitKey struct{}

// withLimit serves h with l as the blockingLimit of its requests.
func withLimit(l *blockingLimit, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), limitKey{}, l)))
	})
}

// limitOf is the blockingLimit of the listener that serves ctx's request
// (set by APIHandler and OpsHandler, through which every request comes).
func limitOf(ctx context.Context) *blockingLimit {
	return ctx.Value(limitKey{}).(*blockingLimit)
}

// refuseTooMany answers a blocking request that found its listener's bound
// full: 503 with Retry-After and a JSON error (code
// too_many_blocking_requests), and the connection closed after the answer,
// so that a refused client keeps nothing of the sidecar's open.
func refuseTooMany(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	l := limitOf(r.Context())
	writeError(w, http.StatusServiceUnavailable, codeTooManyBlocking,
		"this listener already serves its "+strconv.FormatInt(l.max, 10)+
			" blocking requests (LEASEHOLD_MAX_BLOCKING_REQUESTS); requests that do not block still answer; retry after "+tooManyRetryAfter.String())
}

// newLimits returns the blocking limits of the API and OPS listeners, of max
// slots each, and registers their refusal counter in reg:
// leasehold_blocking_requests_refused_total{listener="api"|"ops"}.
func newLimits(max int, reg prometheus.Registerer) (api, ops *blockingLimit, err error) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leasehold_blocking_requests_refused_total",
		Help: "Blocking requests (long-polls and leader waits that would wait, SSE streams, holds) refused with 503 too_many_blocking_requests because their listener already served LEASEHOLD_MAX_BLOCKING_REQUESTS of them, by listener (api, ops).",
	}, []string{"listener"})
	if err := reg.Register(refused); err != nil {
		return nil, nil, err
	}
	api = &blockingLimit{max: int64(max), refused: refused.WithLabelValues("api")}
	ops = &blockingLimit{max: int64(max), refused: refused.WithLabelValues("ops")}
	return api, ops, nil
}
