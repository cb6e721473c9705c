package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/kubeclient"
)

// election is what the sidecar campaigns with: a lease group, of one
// Lease or several. A single Lease is a group of one, with membership only
// when a handover to a chosen successor or data-aware failover needs it
// (config.Election.MemberGroup), and is served as one Lease.
type election struct {
	// members is the group: its Run, its candidacy (for health-gated
	// candidacy) and its membership's view (Rank).
	members *group.Group
	// one is the single Lease's election, served as one Lease; zero for a
	// group.
	one group.Election
	// elector is the single Lease's elector, which the leader label and the
	// proxy follow; nil for a group.
	elector *elect.Elector
}

// newElection builds the group cfg describes, on clk (nil: the real
// clock), with its metrics registered in reg (labelled with the Lease, or
// the group).
func newElection(cfg config.Config, leases *kubeclient.LeaseClient, clk clock.WithTicker, reg prometheus.Registerer, log *slog.Logger) (*election, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	gc := cfg.GroupConfig()
	gc.Client, gc.Clock, gc.Registerer, gc.StartedAt = leases, clk, reg, clk.Now()
	gc.Logger = log // a group with membership adds its name to each line
	gc.LeaseLabeled = !cfg.Grouped()
	g, err := group.New(gc)
	if err != nil {
		return nil, err
	}
	e := &election{members: g}
	if !cfg.Grouped() {
		e.one = g.Elections()[0]
		e.elector = e.one.Elector
	}
	return e, nil
}

// run runs the election until ctx ends (group.Group.Run).
func (e *election) run(ctx context.Context) error { return e.members.Run(ctx) }

// apiOptions sets the election's part of the HTTP layer's options: the
// single Lease, or the group and its elections.
func (e *election) apiOptions(opts *httpapi.Options) {
	if e.elector != nil {
		opts.Election = e.one
		return
	}
	opts.Group = e.members
	for _, el := range e.members.Elections() {
		opts.Elections = append(opts.Elections, el)
	}
}

// metricLabels are the constant labels of every leasehold_* series: the
// Lease, or the group (each election's series add their lease), and the
// namespace.
func metricLabels(cfg config.Config) prometheus.Labels {
	if cfg.Grouped() {
		return prometheus.Labels{"group": cfg.Group, "namespace": cfg.LeaseNamespace}
	}
	return prometheus.Labels{"lease": cfg.LeaseName, "namespace": cfg.LeaseNamespace}
}

// steadyRequestRate is the most requests per second this instance makes at
// steady state: a renewal per Lease per retry period, were it to hold every
// Lease of its group (greedy, or the last member standing), plus its member
// Lease's renewal.
func steadyRequestRate(cfg config.Config) float64 {
	return float64(len(cfg.Leases)+1) / cfg.RetryPeriod.Seconds()
}
