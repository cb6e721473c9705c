package podlabel

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Labeler's gauge and counters.
type Metrics struct {
	leader   prometheus.Gauge
	failures prometheus.Counter
	cleared  prometheus.Counter
}

// NewMetrics creates the pod label metrics and registers them with reg
// (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leasehold_pod_label_leader",
			Help: "1 when the last successful write of the leader label on this sidecar's own Pod was true, else 0.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_pod_label_failures_total",
			Help: "Failed requests of the pod labeler: patches of the own Pod, lists and patches of stale labels.",
		}),
		cleared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_pod_label_cleared_total",
			Help: "Stale true leader labels on other Pods of this election (the same Lease) that this instance set to false while leading.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.leader, m.failures, m.cleared)
	}
	return m
}
