package apphealth

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the app-health prober's metrics.
type Metrics struct {
	healthy  prometheus.Gauge
	checks   *prometheus.CounterVec
	success  prometheus.Counter
	failure  prometheus.Counter
	duration prometheus.Histogram
}

// NewMetrics creates the app-health metrics and registers them with reg
// (nil: not registered). The gauge starts at 0 (not healthy until the first
// success) and both result series of the counter start at 0.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		healthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leasehold_app_healthy",
			Help: "1 while the app's health check passes (this instance may campaign): from successThreshold consecutive successes until failureThreshold consecutive failures; else 0.",
		}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_app_health_checks_total",
			Help: "App health checks completed, by result (success: a 2xx answer within the timeout).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leasehold_app_health_check_duration_seconds",
			Help:    "Duration of the app health checks, successful or not.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	m.success = m.checks.WithLabelValues("success")
	m.failure = m.checks.WithLabelValues("failure")
	if reg != nil {
		reg.MustRegister(m.healthy, m.checks, m.duration)
	}
	return m
}
