package elect

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// ErrStopped is returned by Release once Run has returned.
var ErrStopped = errors.New("elect: elector stopped")

// Elector campaigns for one Lease. Create it with New, start it with Run
// (once), and read its state with Snapshot from any goroutine.
type Elector struct {
	cfg     Config
	clock   clock.WithTicker
	log     *slog.Logger
	metrics *Metrics

	snapshots *Publisher
	releases  chan releaseRequest
	started   atomic.Bool
	done      chan struct{}
}

// releaseRequest asks the loop to step down and stay out for a while.
type releaseRequest struct {
	stayOut time.Duration
	reply   chan releaseResult // buffered: the loop never blocks on it
}

type releaseResult struct {
	released bool
	err      error
}

// New checks cfg and returns an Elector that has not started campaigning.
func New(cfg Config) (*Elector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Elector{
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		metrics:  cfg.Metrics,
		releases: make(chan releaseRequest),
		done:     make(chan struct{}),
	}
	if e.clock == nil {
		e.clock = clock.RealClock{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.metrics == nil {
		e.metrics = NewMetrics(nil)
	}
	e.log = e.log.With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	e.snapshots = NewPublisher(Snapshot{Identity: cfg.Identity, Namespace: cfg.Namespace, Lease: cfg.Name})
	return e, nil
}

// Run campaigns until ctx ends: acquire, renew, step down, campaign again.
// When ctx ends it stops reporting leadership at once, then, if
// ReleaseOnStop is set and this instance holds the Lease, releases it
// (bounded by RenewDeadline), and returns. It returns a non-nil error only
// if the election cannot go on safely. Run may be called once.
func (e *Elector) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("elect: Run called twice")
	}
	defer close(e.done)

	watchCtx, stopWatch := context.WithCancel(ctx)
	events := make(chan watchEvent)
	var watcher sync.WaitGroup
	watcher.Go(func() { e.watchLease(watchCtx, events) })
	defer func() {
		stopWatch()
		watcher.Wait()
	}()

	return newLoop(e).run(ctx, events)
}

// Done is closed when Run has returned.
func (e *Elector) Done() <-chan struct{} { return e.done }

// Snapshot returns the latest published state.
func (e *Elector) Snapshot() *Snapshot { return e.snapshots.Load() }

// Release steps down if this instance leads, releases the Lease (safely, as
// on shutdown), and keeps this instance out of the election for stayOut
// (whether or not it was leading, so an app that knows it is unfit can keep
// leadership away from itself). It reports whether a release was written.
// Calling it again is harmless.
func (e *Elector) Release(ctx context.Context, stayOut time.Duration) (bool, error) {
	req := releaseRequest{stayOut: stayOut, reply: make(chan releaseResult, 1)}
	select {
	case e.releases <- req:
	case <-e.done:
		return false, ErrStopped
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.released, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
