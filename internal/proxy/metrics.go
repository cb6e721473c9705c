package proxy

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's series (of one Lease, in a group).
type metrics struct {
	reg      prometheus.Registerer // where they are registered; nil: nowhere
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// byOutcome are duration's three series, made once.
	byOutcome map[outcome]prometheus.Observer
}

// newMetrics creates the proxy's metrics and registers them with reg (nil:
// not registered). The three duration series start empty.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_proxy_requests_total",
			Help: "Requests the forwarding proxy answered, by outcome (local: forwarded to the app beside this leader; forwarded: to the leader's proxy; rejected: answered by the proxy itself, not forwarded) and HTTP status code (the app's, or the proxy's own 502 and 503).",
		}, []string{"outcome", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leasehold_proxy_request_duration_seconds",
			Help:    "Time from a request's arrival at the forwarding proxy until its answer's status was known (the response headers of the app or of the leader's proxy, or the proxy's own error), by outcome; a streamed body is not included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"outcome"}),
		byOutcome: map[outcome]prometheus.Observer{},
	}
	for _, o := range []outcome{local, forwarded, rejected} {
		m.byOutcome[o] = m.duration.WithLabelValues(string(o))
	}
	if reg != nil {
		if err := reg.Register(m.requests); err != nil {
			return nil, fmt.Errorf("%s: registering metrics: %w", component, err)
		}
		if err := reg.Register(m.duration); err != nil {
			reg.Unregister(m.requests)
			return nil, fmt.Errorf("%s: registering metrics: %w", component, err)
		}
	}
	return m, nil
}

// unregister takes m's series out of the registerer they were registered
// with.
func (m *metrics) unregister() {
	if m.reg != nil {
		m.reg.Unregister(m.requests)
		m.reg.Unregister(m.duration)
	}
}

// observe counts one answer.
func (m *metrics) observe(o outcome, code int, took time.Duration) {
	m.requests.WithLabelValues(string(o), strconv.Itoa(code)).Inc()
	m.byOutcome[o].Observe(took.Seconds())
}
