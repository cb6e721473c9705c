package elect

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
)

// Config describes one candidate for one Lease.
type Config struct {
	// Leases reads and writes the Lease (a typed client-go client).
	Leases coordinationv1client.LeasesGetter
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity is this candidate's holderIdentity. It must be unique among
	// all candidates, across restarts (see package config for the default).
	Identity string

	// LeaseDuration is how long others wait, after observing the last
	// renewal, before they take the Lease. Whole seconds.
	LeaseDuration time.Duration
	// RenewDeadline is how long a term stays valid after the send time of
	// its last successful write.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between renewals, and between polls when
	// the watch is unavailable.
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

// validate applies client-go's timing rules plus the one client-go omits,
// renewDeadline + retryPeriod < leaseDuration, which is what keeps a leader
// from believing it leads after the others judged its lease expired.
func (c *Config) validate() error {
	switch {
	case c.Leases == nil:
		return errors.New("elect: Leases client is required")
	case c.Namespace == "" || c.Name == "":
		return errors.New("elect: Lease namespace and name are required")
	case c.Identity == "":
		return errors.New("elect: Identity is required")
	case c.LeaseDuration < time.Second || c.LeaseDuration%time.Second != 0:
		return fmt.Errorf("elect: leaseDuration %s must be whole seconds, at least 1s", c.LeaseDuration)
	case c.RetryPeriod <= 0:
		return fmt.Errorf("elect: retryPeriod %s must be positive", c.RetryPeriod)
	case 5*c.RenewDeadline <= 6*c.RetryPeriod:
		return fmt.Errorf("elect: renewDeadline %s must exceed 1.2 × retryPeriod %s", c.RenewDeadline, c.RetryPeriod)
	case c.RenewDeadline+c.RetryPeriod >= c.LeaseDuration:
		return fmt.Errorf("elect: renewDeadline %s + retryPeriod %s must be less than leaseDuration %s", c.RenewDeadline, c.RetryPeriod, c.LeaseDuration)
	}
	return nil
}

// requestTimeout bounds every API request the loop makes, so that a
// black-holed apiserver cannot stall the loop for longer than one period.
func (c *Config) requestTimeout() time.Duration {
	return max(c.RetryPeriod, time.Second)
}
