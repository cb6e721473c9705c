package elect

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/fence"
)

// ReleasedByAnnotation names, on a released Lease, the holder that released
// it (see package decide).
const ReleasedByAnnotation = decide.ReleasedByAnnotation

// ErrStopped is returned by Release and SetCandidate once Run has returned.
var ErrStopped = errors.New("elect: elector stopped")

// Elector campaigns for one Lease. Create it with New, start it with Run
// (once), and read its state with Snapshot from any goroutine.
type Elector struct {
	cfg     Config
	clock   clock.WithTicker
	log     *slog.Logger
	metrics *Metrics

	snapshots *Publisher
	holds     *holds
	requests  chan request
	started   atomic.Bool
	done      chan struct{}
}

// request asks the loop to feed input (a Release or SetCandidate, whose ID
// the loop assigns) to the decision core, and to send its Reply to reply.
type request struct {
	release    *decide.Release
	candidacy  *decide.SetCandidate
	generation *decide.SetGeneration // no reply
	reply      chan decide.Reply     // buffered: the loop never blocks on it
}

// New checks cfg and returns an Elector that has not started campaigning.
// Its Snapshot's Index starts at the clock's reading in microseconds, so
// that indices of different processes never collide: a client that kept an
// index across a restart gets an answer at once.
func New(cfg Config) (*Elector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Elector{
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		metrics:  cfg.Metrics,
		holds:    newHolds(),
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
	e.snapshots = NewPublisher(Snapshot{
		Identity: cfg.Identity, Namespace: cfg.Namespace, Lease: cfg.Name,
		Index: uint64(max(e.clock.Now().UnixMicro(), 0)),
	})
	return e, nil
}

// Run campaigns until ctx ends: acquire, renew, step down, campaign again.
// When ctx ends it stops reporting leadership at once, then, if
// ReleaseOnStop is set and this instance holds the Lease, releases it,
// handed to Config.Successor's choice when set (after
// the holds on the term, bounded by the term's validity and the whole by
// RenewDeadline plus two request timeouts), and returns. It returns a
// non-nil error only if the election cannot go on safely. Run may be called
// once.
func (e *Elector) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("elect: Run called twice")
	}
	defer close(e.done)
	machine, err := decide.New(e.cfg.Config, rand.Uint64())
	if err != nil {
		return err
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	events := make(chan decide.Input)
	var watcher sync.WaitGroup
	watcher.Go(func() { e.watchLease(watchCtx, events) })
	defer func() {
		stopWatch()
		watcher.Wait()
	}()

	d := newDriver(e, machine)
	defer d.wait()
	return d.run(ctx, events)
}

// Done is closed when Run has returned.
func (e *Elector) Done() <-chan struct{} { return e.done }

// Snapshot returns the latest published state.
func (e *Elector) Snapshot() *Snapshot { return e.snapshots.Load() }

// Release steps down if this instance leads, releases the Lease (safely, as
// on shutdown, after the holds on the term), and keeps this instance out of
// the election for stayOut (whether or not it was leading, so an app that
// knows it is unfit can keep leadership away from itself). It reports
// whether a release was written. Calling it again is harmless.
func (e *Elector) Release(ctx context.Context, stayOut time.Duration) (bool, error) {
	return e.ReleaseTo(ctx, stayOut, Heir{})
}

// Heir is the successor a release is handed to.
type Heir struct {
	// Identity is the successor's; "" hands the release to anyone.
	Identity string
	// Witness, when set, is the resourceVersion of a write of the
	// successor's (its member Lease) that this instance has observed: the
	// release is then one write that makes the successor the holder, and
	// the successor leads on it without writing (see
	// decide.HandedOverAnnotation). Without it, the release is signed for
	// the successor, which then acquires the Lease.
	Witness string
}

// ReleaseTo is Release, handing the Lease to the successor to: in one
// write when to.Witness is set (see Heir), else signed for it, so it takes
// the Lease at once while every other candidate leaves it alone for
// RenewDeadline (see decide.ReleasedForAnnotation). Whether to is a live
// candidate is the caller's to check: if it does not take the Lease,
// anyone may once it has expired (leaseDuration after the handover) or
// that window has passed (the signed release).
func (e *Elector) ReleaseTo(ctx context.Context, stayOut time.Duration, to Heir) (bool, error) {
	return e.call(ctx, request{release: &decide.Release{StayOut: stayOut, To: to.Identity, Witness: to.Witness}})
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
	return e.call(ctx, request{candidacy: &decide.SetCandidate{Candidate: candidate, Reason: reason}})
}

// Leave is SetCandidate(false) for an instance that is out of the
// election altogether (a group member whose app is unhealthy), not merely
// outside its group's share: it hands the Lease to the successor to, if
// set, as ReleaseTo does, and until it is a candidate again it refuses a
// Lease handed to it even with decide.Config.AcceptHandovers
// (decide.SetCandidate.RefuseHandovers).
func (e *Elector) Leave(ctx context.Context, reason string, to Heir) (bool, error) {
	return e.call(ctx, request{candidacy: &decide.SetCandidate{Reason: reason, To: to.Identity, Witness: to.Witness, RefuseHandovers: true}})
}

// SetGeneration gives the generation of the app's data (its rank probe's;
// "" when unknown), which a leader with decide.Config.PublishGeneration
// writes on the Lease with its next acquire or renewal. It returns once
// the loop has it.
func (e *Elector) SetGeneration(ctx context.Context, generation string) error {
	req := request{generation: &decide.SetGeneration{Generation: generation}}
	select {
	case e.requests <- req:
		return nil
	case <-e.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hold holds the term with token, if this instance leads it now: a
// voluntary release of that term (Release, SetCandidate(false), shutdown)
// then waits until every hold on it has ended, but never past the term's
// validity. It returns false, and no hold, when this instance does not lead
// with token or the term is already being released. Calling the returned
// func ends the hold; it is idempotent.
func (e *Elector) Hold(token fence.Token) (end func(), ok bool) {
	return e.holds.take(token, func() bool {
		s := e.Snapshot()
		return s.Token == token && s.IsLeader(e.clock.Now())
	})
}

// call hands req to the loop and waits for its reply.
func (e *Elector) call(ctx context.Context, req request) (bool, error) {
	req.reply = make(chan decide.Reply, 1)
	select {
	case e.requests <- req:
	case <-e.done:
		return false, ErrStopped
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.Released, r.Err
	case <-e.done:
		return false, ErrStopped
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
