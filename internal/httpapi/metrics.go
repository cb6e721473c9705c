package httpapi

import (
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/elect"
)

// collector exports the election state as gauges, read from one Snapshot
// and one Clock.Now() per scrape, so that the gauges of a scrape agree with
// each other and with what the API would have answered at that moment.
//
// In single-Lease mode the election's gauges carry no label of their own
// (the sidecar's Registerer adds lease and namespace), and
// leader_election_master_status carries name, the Lease's name, as a
// constant label. In group mode they are read from one group Snapshot,
// and each of leasehold_leader, leasehold_candidate, leasehold_term,
// leasehold_fencing_token and leasehold_valid_seconds has one series per
// Lease of the group, labelled lease, as has leader_election_master_status
// (labelled name, as client-go's): the cardinality is bounded by the
// group's size. leasehold_watchers, leasehold_holds and
// leasehold_build_info are the process's, unlabelled, in both modes.
//
// The holder's clock (elect.Snapshot.HolderClock) is exported only while
// there is an estimate: leasehold_holder_clock_offset_seconds and, once the
// rate is bounded, leasehold_holder_clock_rate_ratio, each with a series
// per bound (bound="lower", bound="upper"), and
// leasehold_holder_clock_rate_limit, the rate difference the guarantee
// allows, for alerts to compare with.
type collector struct {
	s       *Server
	grouped bool

	leader, candidate, term, token, valid, watchers, holds, buildInfo, masterStatus *prometheus.Desc
	clockOffset, clockRate, clockLimit                                              *prometheus.Desc
}

func newCollector(s *Server, version string) *collector {
	perLease, masterLabels := []string(nil), []string(nil)
	var masterConst prometheus.Labels
	if s.grouped {
		perLease, masterLabels = []string{"lease"}, []string{"name"}
	} else {
		masterConst = prometheus.Labels{"name": s.election.Snapshot().Lease}
	}
	return &collector{
		s:       s,
		grouped: s.grouped,
		leader: prometheus.NewDesc("leasehold_leader",
			"1 while this instance is the valid leader (Snapshot.IsLeader at scrape time), else 0.", perLease, nil),
		candidate: prometheus.NewDesc("leasehold_candidate",
			"1 while this instance campaigns or leads, 0 while it is out of the election (health-gated candidacy, or after POST /v1/release).", perLease, nil),
		term: prometheus.NewDesc("leasehold_term",
			"The current term's number (the Lease's leaseTransitions); for people, not a fencing token.", perLease, nil),
		token: prometheus.NewDesc("leasehold_fencing_token",
			"The current term's fencing token: own when leading, else the holder's published one; 0 when unknown.", perLease, nil),
		valid: prometheus.NewDesc("leasehold_valid_seconds",
			"Remaining validity of this instance's leadership; 0 when not leader.", perLease, nil),
		watchers: prometheus.NewDesc("leasehold_watchers",
			"Open blocking requests: /v1/watch long-polls, /v1/leader waits and SSE streams.", nil, nil),
		holds: prometheus.NewDesc("leasehold_holds",
			"Open holds (POST /v1/hold): a voluntary release of the held term waits until they end, at most until its validity ends.", nil, nil),
		buildInfo: prometheus.NewDesc("leasehold_build_info",
			"Always 1; labelled with the leasehold version and the Go version it was built with.", nil,
			prometheus.Labels{"version": version, "goversion": runtime.Version()}),
		masterStatus: prometheus.NewDesc("leader_election_master_status",
			"1 while this instance is the valid leader, else 0 (client-go's gauge name, for existing dashboards); name is the Lease name.", masterLabels,
			masterConst),
		clockOffset: prometheus.NewDesc("leasehold_holder_clock_offset_seconds",
			"Bounds on the Lease holder's clock minus this instance's, from the holder's renewTime against the arrival of its renewals (lower: certain; upper: if the least delayed recent renewal arrived within a retryPeriod). Absent while this instance holds the Lease or has no estimate.",
			append(slices.Clone(perLease), "bound"), nil),
		clockRate: prometheus.NewDesc("leasehold_holder_clock_rate_ratio",
			"Bounds on the Lease holder's clock rate over this instance's (1: equal), over the renewals of the last 5 minutes. Absent until two renewals bound it.",
			append(slices.Clone(perLease), "bound"), nil),
		clockLimit: prometheus.NewDesc("leasehold_holder_clock_rate_limit",
			"The clock-rate difference under which the validity guarantee holds: (leaseDuration - renewDeadline) / (leaseDuration + renewDeadline). Exported next to leasehold_holder_clock_offset_seconds.",
			perLease, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.candidate, c.term, c.token, c.valid, c.watchers, c.holds, c.buildInfo, c.masterStatus, c.clockOffset, c.clockRate, c.clockLimit} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	now := c.s.clock.Now()
	if c.grouped {
		for _, el := range c.s.elections {
			snap := el.Snapshot()
			c.collectElection(gauge, snap, now, snap.Lease)
		}
	} else {
		c.collectElection(gauge, c.s.election.Snapshot(), now)
	}
	gauge(c.watchers, float64(c.s.watchers.Load()))
	gauge(c.holds, float64(c.s.holds.Load()))
	gauge(c.buildInfo, 1)
}

// collectElection collects the gauges of one election's snap, with labels
// (the Lease name in group mode, none in single-Lease mode).
func (c *collector) collectElection(gauge func(*prometheus.Desc, float64, ...string), snap *elect.Snapshot, now time.Time, labels ...string) {
	leader := boolGauge(snap.IsLeader(now))
	gauge(c.leader, leader, labels...)
	gauge(c.candidate, boolGauge(snap.Candidate), labels...)
	gauge(c.term, float64(snap.Term), labels...)
	gauge(c.token, float64(snap.Token), labels...)
	gauge(c.valid, snap.ValidFor(now).Seconds(), labels...)
	gauge(c.masterStatus, leader, labels...)
	if est := snap.HolderClock; est != nil {
		bound := func(d *prometheus.Desc, lower, upper float64) {
			gauge(d, lower, append(slices.Clone(labels), "lower")...)
			gauge(d, upper, append(slices.Clone(labels), "upper")...)
		}
		bound(c.clockOffset, est.OffsetLower.Seconds(), est.OffsetUpper.Seconds())
		if est.RateKnown {
			bound(c.clockRate, est.RateLower, est.RateUpper)
		}
		gauge(c.clockLimit, est.Limit, labels...)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
