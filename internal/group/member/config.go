package member

import (
	"errors"
	"time"
)

// Config describes one member of a lease group, as its Machine needs it.
// Package group builds it from its own Config, which checks every rule a
// user can break; New checks only what the Machine relies on.
type Config struct {
	// Group is the group's name (Label's value on every member Lease).
	Group string
	// Identity is this member's, unique per process.
	Identity string
	// Leases are the group's Leases as this member runs them, in
	// configured order: the electors' order, by which Calls and Heirs
	// index them.
	Leases []string
	// TTL is the member Lease's duration: the elections' leaseDuration.
	// The member Lease is renewed every third of it.
	TTL time.Duration
	// Settle is how long after a member joined the others wait before they
	// give Leases up to rebalance (balanced).
	Settle time.Duration
	// RequestTimeout bounds each member Lease request (the driver's), and
	// is the wait before a failed write is tried again.
	RequestTimeout time.Duration
	// Balance spreads the Leases fairly over the live members (balanced);
	// false campaigns for every Lease (greedy).
	Balance bool
	// Handover hands this member's Leases to a chosen member when it
	// leaves (shutdown, or SetFit(false)): its heir in the fair share when
	// balanced (heirs), else the best Successor. Off, to anyone.
	Handover bool
	// Info is what this member publishes for the others' choice of a
	// successor; a zero StartedAt is not published.
	Info Info
	// Ranked turns on data-aware failover: this member publishes the rank
	// SetRank gives it (RankAnnotation), its successor is chosen by rank
	// first, and it defers to better-ranked live members when the Lease
	// becomes free (Deferral). RankPeriod is its prober's period, published
	// with the rank so that the others can judge it stale.
	Ranked     bool
	RankPeriod time.Duration
	// StartUnfit: not a member until SetFit{Fit: true} (health-gated
	// candidacy).
	StartUnfit bool
}

func (c *Config) validate() error {
	switch {
	case c.Group == "" || c.Identity == "":
		return errors.New("member: Group and Identity are required")
	case len(c.Leases) == 0:
		return errors.New("member: no Leases")
	case c.TTL < time.Second || c.Settle < 0 || c.RequestTimeout <= 0:
		return errors.New("member: TTL must be at least 1s, Settle not negative, RequestTimeout positive")
	case c.Ranked && (c.Balance || c.RankPeriod <= 0):
		return errors.New("member: Ranked needs a greedy member (not Balance) and a positive RankPeriod")
	}
	return nil
}
