package decide

import (
	"errors"
	"fmt"
	"time"
)

// Config describes one candidate for one Lease.
type Config struct {
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity is this candidate's holderIdentity. It must be unique among
	// all candidates and across restarts: a record naming it is taken to be
	// this instance's own write.
	Identity string

	// LeaseDuration is how long others wait, after first observing a
	// version of the record, before they take it. Whole seconds.
	LeaseDuration time.Duration
	// RenewDeadline is how long a term stays valid after the send time of
	// its last successful write.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between renewals, between polls when the
	// watch is unavailable, and the first backoff after an error.
	RetryPeriod time.Duration

	// ReleaseOnStop releases the Lease on Stop when this instance holds it.
	ReleaseOnStop bool
	// StartWithdrawn starts out of the election, until SetCandidate(true).
	StartWithdrawn bool
}

// Validate applies client-go's timing rules plus the one client-go omits,
// renewDeadline + retryPeriod < leaseDuration, which keeps a leader from
// believing it leads after the others judged its lease expired.
func (c *Config) Validate() error {
	switch {
	case c.Namespace == "" || c.Name == "":
		return errors.New("decide: Lease namespace and name are required")
	case c.Identity == "":
		return errors.New("decide: Identity is required")
	case c.LeaseDuration < time.Second || c.LeaseDuration%time.Second != 0:
		return fmt.Errorf("decide: leaseDuration %s must be whole seconds, at least 1s", c.LeaseDuration)
	case c.RetryPeriod <= 0:
		return fmt.Errorf("decide: retryPeriod %s must be positive", c.RetryPeriod)
	case 5*c.RenewDeadline <= 6*c.RetryPeriod:
		return fmt.Errorf("decide: renewDeadline %s must exceed 1.2 × retryPeriod %s", c.RenewDeadline, c.RetryPeriod)
	case c.RenewDeadline+c.RetryPeriod >= c.LeaseDuration:
		return fmt.Errorf("decide: renewDeadline %s + retryPeriod %s must be less than leaseDuration %s", c.RenewDeadline, c.RetryPeriod, c.LeaseDuration)
	}
	return nil
}

// maxBackoff caps the delay before a candidate retries after an error:
// long enough that a persistent error (a missing namespace, a 403) costs
// one request every few seconds, short enough that a healed partition is
// noticed within a few retry periods.
func (c *Config) maxBackoff() time.Duration {
	return min(c.LeaseDuration, 4*c.RetryPeriod)
}
