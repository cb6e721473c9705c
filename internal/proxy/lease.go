package proxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lease is one Lease of a lease group the proxy serves (Config.Leases).
type Lease struct {
	// Name is the Lease as namespace/name. A request names it in
	// HeaderLease as namespace/name or by its name alone.
	Name string
	// View tells whether this instance leads this Lease at now, with the
	// contract of Config.View.
	View func(now time.Time) View
}

// served is one Lease the proxy serves, with what the proxy keeps for it:
// its series and the long-lived exchanges forwarded under its terms.
type served struct {
	lease   string // namespace/name: the value of HeaderLease on the requests forwarded to its leader's proxy
	name    string // the name alone: the value of HeaderLease on the requests to the app, in a group
	view    func(time.Time) View
	log     *slog.Logger
	metrics *metrics
	terms   terms
}

// groupRouting is what a proxy of a lease group keeps to find the Lease a
// request names: by namespace/name and by name alone.
type groupRouting struct {
	byName map[string]*served
	// expected lists the Leases, for the messages of the requests that
	// name none of them.
	expected string
	// unrouted counts the requests answered without a Lease (by status).
	unrouted *prometheus.CounterVec
}

// newGroupRouting indexes leases, and registers its series with reg (nil:
// not registered).
func newGroupRouting(leases []*served, reg prometheus.Registerer) (*groupRouting, error) {
	g := &groupRouting{byName: map[string]*served{}}
	names := make([]string, len(leases))
	for i, l := range leases {
		g.byName[l.lease], g.byName[l.name] = l, l
		names[i] = l.lease
	}
	g.expected = strings.Join(names, ", ")
	g.unrouted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leasehold_proxy_unrouted_requests_total",
		Help: "Requests the forwarding proxy of a lease group answered itself because they named none of its Leases in X-Leasehold-Lease (400 lease_required, 404 unknown_lease, 503 wrong_lease for a forwarded one), by HTTP status code.",
	}, []string{"code"})
	if reg != nil {
		if err := reg.Register(g.unrouted); err != nil {
			return nil, fmt.Errorf("%s: registering metrics: %w", component, err)
		}
	}
	return g, nil
}

// pick returns the Lease h names in HeaderLease (namespace/name or the
// name alone), or the rejection to answer when it names none of the
// group's: 400 (CodeLeaseRequired) without one, or with several; 404
// (CodeUnknownLease) for another; and for a request forwarded by another
// proxy (looped), 503 (CodeWrongLease) for all three, as a proxy of one
// Lease answers a request forwarded for another.
func (g *groupRouting) pick(h http.Header, looped bool) (*served, *rejection) {
	named := h[HeaderLease]
	if len(named) == 1 {
		if l := g.byName[named[0]]; l != nil {
			return l, nil
		}
	}
	switch {
	case looped:
		return nil, &rejection{status: http.StatusServiceUnavailable, code: CodeWrongLease,
			msg: fmt.Sprintf("this proxy serves the Leases %s, and the request was forwarded for %q (%s: %s): the address its sender took for its leader's is no longer that; try again",
				g.expected, strings.Join(named, ", "), HeaderForwarded, h.Get(HeaderForwarded))}
	case len(named) == 0:
		return nil, &rejection{status: http.StatusBadRequest, code: CodeLeaseRequired,
			msg: fmt.Sprintf("this proxy serves a lease group: name the request's Lease in the header %s, as <namespace>/<name> or <name>, one of %s", HeaderLease, g.expected)}
	case len(named) > 1:
		return nil, &rejection{status: http.StatusBadRequest, code: CodeLeaseRequired,
			msg: fmt.Sprintf("the header %s is given %d times (%s): name one Lease, as <namespace>/<name> or <name>, one of %s", HeaderLease, len(named), strings.Join(named, ", "), g.expected)}
	}
	return nil, &rejection{status: http.StatusNotFound, code: CodeUnknownLease,
		msg: fmt.Sprintf("%s: %q is not a Lease of this proxy's group: name one of %s, as <namespace>/<name> or <name>", HeaderLease, named[0], g.expected)}
}

// refuse answers rej to a request that named no Lease of the group, and
// counts it.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, rej *rejection) {
	p.log.Debug("proxy: request names no Lease of the group", "code", rej.code, "method", r.Method, "path", r.URL.Path)
	p.group.unrouted.WithLabelValues(strconv.Itoa(rej.status)).Inc()
	if rej.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", p.retryAfter)
	}
	writeError(w, rej.status, rej.code, rej.msg)
}
