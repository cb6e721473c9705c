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
	requests  chan request
	started   atomic.Bool
	done      chan struct{}
}

// request asks the loop to run do on its own goroutine, the only one that
// may touch the election state, and to send the result to reply.
type request struct {
	do    func(ctx context.Context, l *loop) releaseResult
	reply chan releaseResult // buffered: the loop never blocks on it
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
		requests: make(chan request),
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
	e.snapshots = NewPublisher(Snapshot{Identity: cfg.Identity, Namespace: cfg.Namespace, Lease: cfg.Name, Index: uint64(e.clock.Now().UnixMicro())})
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
	return e.call(ctx, func(ctx context.Context, l *loop) releaseResult {
		l.stayOutUntil = l.clock.Now().Add(stayOut)
		return l.leave(ctx, "release requested")
	})
}

// SetCandidate takes this instance out of the election (false) or puts it
// back (true); reason is logged. Taking it out ends a term at once: no
// Snapshot published from then on, nor any while the release is written,
// says Leading. It then releases the Lease safely if this instance holds
// it, so another candidate takes over without waiting out the lease, and
// reports whether a release was written. While out, the instance keeps
// following the Lease but never tries to acquire it. Calls that do not
// change candidacy are harmless; a stay-out asked by Release still applies
// after SetCandidate(true).
func (e *Elector) SetCandidate(ctx context.Context, candidate bool, reason string) (bool, error) {
	return e.call(ctx, func(ctx context.Context, l *loop) releaseResult {
		if candidate {
			if l.withdrawn {
				l.log.Info("back in the election", "reason", reason)
			}
			l.withdrawn = false
			return releaseResult{}
		}
		if !l.withdrawn {
			l.log.Warn("withdrawn from the election", "reason", reason)
		}
		l.withdrawn = true
		return l.leave(ctx, "withdrawn from the election: "+reason)
	})
}

// call runs do on the loop's goroutine and returns its result.
func (e *Elector) call(ctx context.Context, do func(ctx context.Context, l *loop) releaseResult) (bool, error) {
	req := request{do: do, reply: make(chan releaseResult, 1)}
	select {
	case e.requests <- req:
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
