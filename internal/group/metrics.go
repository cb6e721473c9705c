package group

import "github.com/prometheus/client_golang/prometheus"

// metrics are the group's own series; each election's carry a lease label.
type metrics struct {
	members   prometheus.Gauge
	moves     *prometheus.CounterVec
	collected prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leasehold_members",
			Help: "Live members of the lease group this instance sees, itself included; 0 for an observer.",
		}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_lease_moves_total",
			Help: "Leases of the group this instance started holding (direction=in) or stopped holding (direction=out).",
		}, []string{"direction"}),
		collected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_member_leases_collected_total",
			Help: "Member Leases of departed members (crashed, killed, their node lost) this instance deleted once they had stayed unchanged for three lease durations.",
		}),
	}
	m.moves.WithLabelValues("in")
	m.moves.WithLabelValues("out")
	if reg != nil {
		reg.MustRegister(m.members, m.moves, m.collected)
	}
	return m
}
