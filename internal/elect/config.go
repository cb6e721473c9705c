package elect

import (
	"errors"
	"log/slog"
	"time"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect/decide"
)

// Config describes one candidate for one Lease: the decision core's
// settings (the Lease, this candidate's identity, the timings, release on
// stop, starting withdrawn; every instance of one Lease must use the same
// timings), plus what the driver needs.
type Config struct {
	decide.Config

	// Leases reads and writes the Lease (a typed client-go client).
	Leases coordinationv1client.LeasesGetter
	// Clock is the time source; nil means the real clock. Tests step a fake.
	Clock clock.WithTicker
	// Logger receives the election's log lines; nil discards them.
	Logger *slog.Logger
	// Metrics receives the election's counters; nil means unregistered ones.
	Metrics *Metrics
}

// validate checks c; the timing rules are the decision core's.
func (c *Config) validate() error {
	if c.Leases == nil {
		return errors.New("elect: Leases client is required")
	}
	return c.Config.Validate()
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
