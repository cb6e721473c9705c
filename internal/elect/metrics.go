package elect

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the counters only the election loop can see. Gauges derived
// from the current state (leader, term, token, validity) are read from
// Snapshots at scrape time by the HTTP layer.
type Metrics struct {
	transitions   prometheus.Counter
	renewDuration prometheus.Histogram
	renewFailures prometheus.Counter
	errors        prometheus.Counter
	watchUp       prometheus.Gauge
}

// NewMetrics creates the election metrics and registers them with reg
// (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		transitions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_transitions_total",
			Help: "Changes of the Lease holder observed by this instance.",
		}),
		renewDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leasehold_renew_duration_seconds",
			Help:    "Duration of the leader's renew writes, successful or not.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		renewFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_renew_failures_total",
			Help: "Renew writes by the leader that failed.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_lease_request_errors_total",
			Help: "Requests on the Lease that failed with an error other than a conflict (a missing namespace, a 403, a timeout); the last one is lastError in /v1/status.",
		}),
		watchUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leasehold_watch_up",
			Help: "1 while a watch on the Lease is open; 0 while this instance falls back to polling every retryPeriod.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.transitions, m.renewDuration, m.renewFailures, m.errors, m.watchUp)
	}
	return m
}
