package group

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect/decide"
)

// MaxLeases bounds the size of a group.
const MaxLeases = 1024

// Config describes one instance of a lease group.
type Config struct {
	// Name is the group's name: the value of MemberLabel on its members'
	// Leases, and the prefix of their names. Every replica of the group
	// uses the same.
	Name string
	// Leases are the names of the group's Leases, in configured order.
	Leases []string
	// Election holds the settings every Lease's election shares: the
	// namespace, identity, timings, ReleaseOnStop and StartWithdrawn (not a
	// member until SetCandidate(true), for health-gated candidacy); its
	// Name is ignored.
	Election decide.Config

	// Candidate is false for an observer: it follows every Lease and
	// reports, never campaigns, and is not a member.
	Candidate bool
	// Balance spreads the Leases fairly over the live members (Assign);
	// false campaigns for every Lease (greedy, as one client-go
	// LeaderElector per Lease does).
	Balance bool

	// Leases reads and writes the Leases of the namespace.
	Client LeaseClient
	// Clock is the time source; nil means the real clock.
	Clock clock.WithTicker
	// Logger receives log lines; nil discards them.
	Logger *slog.Logger
	// Registerer receives the group's metrics and, wrapped with a lease
	// label per Lease, each election's; nil registers none.
	Registerer prometheus.Registerer
}

// validate checks c.
func (c *Config) validate() error {
	switch {
	case c.Name == "":
		return errors.New("group: Name is required")
	case len(c.Leases) == 0 || len(c.Leases) > MaxLeases:
		return fmt.Errorf("group: %d Leases; want 1 to %d", len(c.Leases), MaxLeases)
	case c.Client == nil:
		return errors.New("group: Client is required")
	}
	seen := map[string]bool{}
	for _, l := range c.Leases {
		if seen[l] {
			return fmt.Errorf("group: Lease %q is listed twice", l)
		}
		seen[l] = true
	}
	e := c.Election
	e.Name = c.Leases[0]
	return e.Validate()
}

// settleTime is how long after a member joined the others wait before they
// give Leases up to rebalance: members of one scale-up join within it, and
// each Lease then moves once.
func (c *Config) settleTime() time.Duration { return 2 * c.Election.RetryPeriod }

// requestTimeout bounds each membership request, as elect bounds its own.
func (c *Config) requestTimeout() time.Duration { return max(c.Election.RetryPeriod, time.Second) }
