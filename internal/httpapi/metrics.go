package httpapi

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports the election state as gauges, read from one Snapshot
// and one Clock.Now() per scrape, so that the gauges of a scrape agree with
// each other and with what the API would have answered at that moment.
type collector struct {
	s *Server

	leader, candidate, term, token, valid, watchers, holds, buildInfo, masterStatus *prometheus.Desc
}

func newCollector(s *Server, version string) *collector {
	lease := s.election.Snapshot().Lease
	return &collector{
		s: s,
		leader: prometheus.NewDesc("leasehold_leader",
			"1 while this instance is the valid leader (Snapshot.IsLeader at scrape time), else 0.", nil, nil),
		candidate: prometheus.NewDesc("leasehold_candidate",
			"1 while this instance campaigns or leads, 0 while it is out of the election (health-gated candidacy, or after POST /v1/release).", nil, nil),
		term: prometheus.NewDesc("leasehold_term",
			"The current term's number (the Lease's leaseTransitions); for people, not a fencing token.", nil, nil),
		token: prometheus.NewDesc("leasehold_fencing_token",
			"The current term's fencing token: own when leading, else the holder's published one; 0 when unknown.", nil, nil),
		valid: prometheus.NewDesc("leasehold_valid_seconds",
			"Remaining validity of this instance's leadership; 0 when not leader.", nil, nil),
		watchers: prometheus.NewDesc("leasehold_watchers",
			"Open blocking requests: /v1/watch long-polls, /v1/leader waits and SSE streams.", nil, nil),
		holds: prometheus.NewDesc("leasehold_holds",
			"Open holds (POST /v1/hold): a voluntary release of the held term waits until they end, at most until its validity ends.", nil, nil),
		buildInfo: prometheus.NewDesc("leasehold_build_info",
			"Always 1; labelled with the leasehold version and the Go version it was built with.", nil,
			prometheus.Labels{"version": version, "goversion": runtime.Version()}),
		masterStatus: prometheus.NewDesc("leader_election_master_status",
			"1 while this instance is the valid leader, else 0 (client-go's gauge name, for existing dashboards); name is the Lease name.", nil,
			prometheus.Labels{"name": lease}),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.candidate, c.term, c.token, c.valid, c.watchers, c.holds, c.buildInfo, c.masterStatus} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.election.Snapshot()
	now := c.s.clock.Now()
	leader := boolGauge(snap.IsLeader(now))
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(c.leader, leader)
	gauge(c.candidate, boolGauge(snap.Candidate))
	gauge(c.term, float64(snap.Term))
	gauge(c.token, float64(snap.Token))
	gauge(c.valid, snap.ValidFor(now).Seconds())
	gauge(c.watchers, float64(c.s.watchers.Load()))
	gauge(c.holds, float64(c.s.holds.Load()))
	gauge(c.buildInfo, 1)
	gauge(c.masterStatus, leader)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
