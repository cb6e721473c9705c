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

// election is what the sidecar campaigns with: one elector, or a lease
// group of them. One Lease handed to a successor on leaving
// (LEASEHOLD_HANDOVER=successor) runs as a group of that one Lease, for its
// membership, and is served as one Lease.
type election struct {
	run func(context.Context) error
	// candidacy puts this instance in the election or takes it out (for
	// health-gated candidacy): the elector's, or the group's membership.
	candidacy interface {
		SetCandidate(ctx context.Context, candidate bool, reason string) (bool, error)
	}
	elector *elect.Elector   // the one Lease's elector; nil for a group
	served  httpapi.Election // what the HTTP layer serves for the one Lease
	group   *group.Group     // nil for one Lease
	// members is the group of the one Lease kept for its membership
	// (Handover, Ranked); nil otherwise.
	members *group.Group
}

// newElection builds the elector or the group that cfg describes, on clk
// (nil: the real clock), with its metrics registered in reg (labelled with
// the Lease, or the group).
func newElection(cfg config.Config, leases *kubeclient.LeaseClient, clk clock.WithTicker, reg prometheus.Registerer, log *slog.Logger) (*election, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if cfg.MemberGroup() == "" {
		elector, err := elect.New(elect.Config{
			Config:  cfg.ElectionConfig(),
			Leases:  leases,
			Clock:   clk,
			Logger:  log,
			Metrics: elect.NewMetrics(reg),
		})
		if err != nil {
			return nil, err
		}
		return &election{run: elector.Run, candidacy: elector, elector: elector, served: elector}, nil
	}
	gc := cfg.GroupConfig()
	gc.Client, gc.Clock, gc.Registerer, gc.StartedAt = leases, clk, reg, clk.Now()
	gc.Logger = log // the group adds its name to each line
	gc.LeaseLabeled = !cfg.Grouped()
	g, err := group.New(gc)
	if err != nil {
		return nil, err
	}
	if !cfg.Grouped() {
		one := g.Elections()[0]
		return &election{run: g.Run, candidacy: g, elector: one.Elector, served: one, members: g}, nil
	}
	return &election{run: g.Run, candidacy: g, group: g}, nil
}

// apiOptions sets the election's part of the HTTP layer's options.
func (e *election) apiOptions(opts *httpapi.Options) {
	if e.group == nil {
		opts.Election = e.served
		return
	}
	opts.Group = e.group
	for _, el := range e.group.Elections() {
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
