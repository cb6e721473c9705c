// Package kubeclient builds the rest.Config the sidecar talks to the
// apiserver with, counts the HTTP requests sent through it, and bounds the
// apiserver's clock offset from their responses.
package kubeclient

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client-side throttling limits set by New. They are far above what one
// lease holder needs, so the token bucket never delays a renewal.
const (
	qps   = 50
	burst = 100
)

// Options for New.
type Options struct {
	// Kubeconfig is the path of a kubeconfig file; "" means the in-cluster
	// config (rest.InClusterConfig). cmd passes os.Getenv("KUBECONFIG").
	Kubeconfig string
	// UserAgent is sent with every request, e.g. "leasehold/<version>";
	// "" keeps client-go's default.
	UserAgent string
	// Requests, when not nil, counts every HTTP request sent with the config.
	Requests *RequestMetrics
	// ServerClock, when not nil, bounds the apiserver's clock offset from
	// every response to a request sent with the config.
	ServerClock *ServerClock
	// Steady is the request rate, per second, that the sidecar needs at
	// steady state (a lease group's renewals: one per Lease held per retry
	// period, plus its membership): QPS is raised to twice that when it is
	// above the default, so that the token bucket never delays a renewal
	// of a large group either. 0 for one Lease.
	Steady float64
}

// New returns a rest.Config for the sidecar: from the kubeconfig file when
// opts.Kubeconfig is set (honouring the file's current context), else the
// in-cluster config. It speaks protobuf. The config has QPS 50 and Burst 100 (more for a large
// lease group: Options.Steady), so client-side throttling never delays a
// renewal, and Timeout 0: callers bound each
// request with a context. When opts.Requests is not nil the transport is
// wrapped to count requests in it. The error says which source failed; the
// in-cluster one also points at KUBECONFIG.
func New(opts Options) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if opts.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeclient: loading kubeconfig %q: %w", opts.Kubeconfig, err)
		}
	} else {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeclient: in-cluster config unavailable (not running in a pod? set KUBECONFIG to a kubeconfig file instead): %w", err)
		}
	}
	cfg.QPS, cfg.Burst = qps, burst
	if need := float32(2 * opts.Steady); need > cfg.QPS {
		cfg.QPS, cfg.Burst = need, int(2*need)
	}
	cfg.Timeout = 0
	// Protobuf, as Kubernetes' own components speak to the apiserver: a
	// Lease write costs both ends less CPU than in JSON, which shows when
	// a group member hands many Leases over at once.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if opts.UserAgent != "" {
		cfg.UserAgent = opts.UserAgent
	}
	if opts.Requests != nil {
		cfg.Wrap(opts.Requests.Wrap)
	}
	if opts.ServerClock != nil {
		cfg.Wrap(opts.ServerClock.Wrap)
	}
	return cfg, nil
}

// RequestMetrics counts the HTTP requests a client sends to the apiserver in
// the Prometheus counter leasehold_kube_requests_total{verb,code}. It is
// safe for concurrent use.
type RequestMetrics struct {
	requests *prometheus.CounterVec
}

// NewRequestMetrics creates the counter and registers it with reg (nil: not
// registered). Like prometheus.Registerer.MustRegister it panics when reg
// already holds a collector of that name.
func NewRequestMetrics(reg prometheus.Registerer) *RequestMetrics {
	m := &RequestMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leasehold_kube_requests_total",
		Help: "HTTP requests sent to the Kubernetes apiserver, by Kubernetes verb and HTTP status code (\"error\" when no response was received).",
	}, []string{"verb", "code"})}
	if reg != nil {
		reg.MustRegister(m.requests)
	}
	return m
}

// Wrap returns a RoundTripper that sends each request through rt and then
// counts it once, labelled with verb (see requestVerb) and code: the
// response's HTTP status code, or "error" when rt returned an error
// (network failure, timeout, cancellation). A watch is counted when its
// response headers arrive. Its signature fits rest.Config.Wrap.
func (m *RequestMetrics) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &countingRoundTripper{requests: m.requests, next: rt}
}

// countingRoundTripper is the RoundTripper returned by RequestMetrics.Wrap.
type countingRoundTripper struct {
	requests *prometheus.CounterVec
	next     http.RoundTripper
}

// It unwraps like client-go's own wrappers, so utilities that look for the
// underlying transport (TLS config, dialer, idle connections) still find it.
var _ utilnet.RoundTripperWrapper = (*countingRoundTripper)(nil)

func (c *countingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	c.requests.WithLabelValues(requestVerb(req.Method, req.URL), code).Inc()
	return resp, err
}

// WrappedRoundTripper returns the RoundTripper beneath the counter.
func (c *countingRoundTripper) WrappedRoundTripper() http.RoundTripper { return c.next }

// Count returns the number of requests counted so far with the given verb
// and code; an empty verb or code matches any value, so Count("", "") is
// the total. It reads the Prometheus counter itself and creates no series.
func (m *RequestMetrics) Count(verb, code string) float64 {
	ch := make(chan prometheus.Metric)
	go func() {
		m.requests.Collect(ch)
		close(ch)
	}()
	var total float64
	for metric := range ch {
		var d dto.Metric
		if err := metric.Write(&d); err != nil {
			continue // a counter's Write does not fail; skip it if it ever does
		}
		if labelMatches(&d, "verb", verb) && labelMatches(&d, "code", code) {
			total += d.GetCounter().GetValue()
		}
	}
	return total
}

// labelMatches reports whether want is "" or d's label name has value want.
func labelMatches(d *dto.Metric, name, want string) bool {
	if want == "" {
		return true
	}
	for _, l := range d.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == want
		}
	}
	return false
}

// requestVerb derives the Kubernetes verb of an HTTP request: POST create,
// PUT update, PATCH patch, DELETE delete; GET is watch when the query has a
// true watch parameter, list when the path names a resource collection,
// and get otherwise (a named object or subresource, or a non-resource path
// like /readyz, /version or discovery). Other methods map to their lower
// case name.
func requestVerb(method string, u *url.URL) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	case http.MethodGet:
		if watch, err := strconv.ParseBool(u.Query().Get("watch")); err == nil && watch {
			return "watch"
		}
		if isCollection(u.Path) {
			return "list"
		}
		return "get"
	default:
		return strings.ToLower(method)
	}
}

// isCollection reports whether path names a resource collection:
// /api/{v}/{resource}, /apis/{g}/{v}/{resource}, or either prefix followed
// by namespaces/{ns}/{resource}. /api/v1/namespaces itself is the
// collection of namespaces and /api/v1/namespaces/{ns} a named namespace.
func isCollection(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case parts[0] == "api" && len(parts) > 2:
		rest = parts[2:]
	case parts[0] == "apis" && len(parts) > 3:
		rest = parts[3:]
	default:
		return false // not a resource path: root, discovery, /healthz, ...
	}
	if rest[0] == "namespaces" && len(rest) > 2 {
		rest = rest[2:] // {resource}[/{name}[/{subresource}]] within the namespace
	}
	return len(rest) == 1
}
