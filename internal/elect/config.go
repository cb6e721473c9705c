package elect

import (
	"errors"
	"log/slog"
	"time"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect/decide"
)

// Config describes one candidate for one Lease.
type Config struct {
	// Leases reads and writes the Lease (a typed client-go client).
	Leases coordinationv1client.LeasesGetter
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity is this candidate's holderIdentity. It must be unique among
	// all candidates and across restarts (see package config for the
	// default): a record naming it is taken to be this process's own write.
	Identity string

	// LeaseDuration is how long others wait, after first observing a
	// version of the record, before they take it. Whole seconds. Every
	// instance of one Lease must use the same timings.
	LeaseDuration time.Duration
	// RenewDeadline is how long a term stays valid after the send time of
	// its last successful write.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between renewals, between polls when the
	// watch is unavailable, and the first backoff after an error.
	RetryPeriod time.Duration

	// ReleaseOnStop releases the Lease when Run's context ends while this
	// instance holds it.
	ReleaseOnStop bool

	// StartWithdrawn starts the elector out of the election: it follows the
	// Lease but does not campaign until SetCandidate(true). Health-gated
	// candidacy sets it, so that no term starts before the app was seen
	// healthy.
	StartWithdrawn bool

	// Clock is the time source; nil means the real clock. Tests step a fake.
	Clock clock.WithTicker
	// Logger receives the election's log lines; nil discards them.
	Logger *slog.Logger
	// Metrics receives the election's counters; nil means unregistered ones.
	Metrics *Metrics
}

// decideConfig is the decision core's part of c.
func (c *Config) decideConfig(seed uint64) decide.Config {
	return decide.Config{
		Namespace: c.Namespace, Name: c.Name, Identity: c.Identity,
		LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod,
		ReleaseOnStop: c.ReleaseOnStop, StartWithdrawn: c.StartWithdrawn,
		Seed: seed,
	}
}

// validate checks c; the timing rules are the decision core's.
func (c *Config) validate() error {
	if c.Leases == nil {
		return errors.New("elect: Leases client is required")
	}
	dc := c.decideConfig(0)
	return dc.Validate()
}

// requestTimeout bounds every API request the elector makes, so that a
// black-holed apiserver cannot stall the election for longer than one
// period.
func (c *Config) requestTimeout() time.Duration {
	return max(c.RetryPeriod, time.Second)
}

// shutdownTimeout bounds the release on shutdown: the wait for holds on the
// ended term (at most its validity, ≤ RenewDeadline) plus a read and a write.
func (c *Config) shutdownTimeout() time.Duration {
	return c.RenewDeadline + 2*c.requestTimeout()
}
