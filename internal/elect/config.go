package elect

import (
	"context"
	"errors"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect/decide"
)

// Config describes one candidate for one Lease: the decision core's
// settings (the Lease, this candidate's identity, the timings, release on
// stop, starting withdrawn; every instance of one Lease must use the same
// timings), plus what the driver needs.
type Config struct {
	decide.Config

	// Leases reads and writes the Leases of the Lease's namespace: client-go's
	// typed LeaseInterface, or kubeclient.NewLeaseClient's lean one.
	Leases LeaseClient
	// Clock is the time source; nil means the real clock. Tests step a fake.
	Clock clock.WithTicker
	// Logger receives the election's log lines; nil discards them.
	Logger *slog.Logger
	// Metrics receives the election's counters; nil means unregistered ones.
	Metrics *Metrics
	// Notify, when not nil, receives a value, without blocking, after a
	// Snapshot that differs from the last one it was told of in Leading,
	// Holder, Term, Token, LeaderAddress (what moves Index), Observed,
	// Candidate, ReservedFor, or in whether FreeAt is zero: a lease group reads its Leases' snapshots
	// when told. Renewals are not told, nor FreeAt moving later (a reader
	// that waits for FreeAt finds it later when it looks). Give it a
	// capacity of 1: notices that find it full are coalesced.
	Notify chan<- struct{}
	// Successor, when not nil, is asked when Run's context ends for the
	// successor to hand the release on shutdown to (a zero Heir for
	// anyone); see Elector.ReleaseTo. It must not block.
	Successor func() Heir
	// Witnessed, when not nil, says when this instance sent the write of
	// another object (its member Lease) that got resourceVersion version:
	// the local time before it sent it, and false when it made no such
	// write or no longer remembers it. The driver asks it for a record
	// handed to this instance (decide.Observed.WitnessSentAt). It must not
	// block, and is called from the election's goroutine.
	Witnessed func(version string) (sentAt time.Time, ok bool)
}

// LeaseClient is what the elector needs of a client of the Leases of one
// namespace. client-go's typed LeaseInterface satisfies it; it is declared
// here so that the elector does not import client-go's typed clients, whose
// package registers every API group in client-go's scheme.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
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
