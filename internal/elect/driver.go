package elect

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/clockskew"
	"github.com/leasehold/leasehold/internal/elect/decide"
)

// driver is the thin I/O around the decision core: it feeds the Machine
// every input with the local time, and carries out every Output. It is the
// only goroutine that touches the Machine. API requests run one at a time
// on a goroutine of their own, so that the loop keeps taking watch events,
// release requests and timer ticks while a request is in flight.
type driver struct {
	*Elector
	machine *decide.Machine
	leases  LeaseClient

	results  chan decide.Result // capacity 1: a finished request never blocks
	inflight sync.WaitGroup     // the request goroutine, if any
	nextID   uint64
	replies  map[uint64]chan decide.Reply
	cleared  <-chan struct{} // closed once the holds the Machine waits for have ended
	noticed  decide.Report   // the last report Config.Notify was told of

	clocks      *clockskew.Estimator // of the holder's clock, from the records this loop observes
	holderClock *clockskew.Estimate  // its latest estimate; nil when none
}

func newDriver(e *Elector, m *decide.Machine) *driver {
	return &driver{
		Elector: e,
		machine: m,
		leases:  e.cfg.Leases,
		results: make(chan decide.Result, 1),
		replies: map[uint64]chan decide.Reply{},
		clocks:  newClockEstimator(e.cfg),
	}
}

// run feeds inputs until the Machine has stopped (after ctx ended), the
// shutdown bound passes, or the election cannot go on safely.
func (d *driver) run(ctx context.Context, events <-chan decide.Input) error {
	d.metrics.watchUp.Set(0)
	out := d.machine.Step(d.clock.Now(), decide.Start{})
	stop := ctx.Done()
	var shutdownBound <-chan time.Time
	// One timer for the whole run, set before each wait and stopped after
	// it: a renewal takes three turns of the loop, and in a CPU profile of a
	// sidecar holding 256 Leases making a new timer each turn took 3 % of
	// the samples.
	timer := d.clock.NewTimer(0)
	timer.Stop()
	defer timer.Stop()
	for {
		if err := d.apply(out); err != nil || out.Stopped {
			return err
		}
		timer.Reset(max(out.Wake.Sub(d.clock.Now()), 0))
		var in decide.Input
		select {
		case <-stop:
			var to Heir
			if d.cfg.Successor != nil {
				to = d.cfg.Successor()
			}
			stop, in = nil, decide.Stop{To: to.Identity, Witness: to.Witness}
			shutdownBound = d.clock.After(d.cfg.shutdownTimeout())
		case <-shutdownBound:
			d.log.Warn("release on shutdown did not finish in time; others take over when the Lease expires")
			return nil
		case ev := <-events:
			in = d.dated(ev)
			d.watchEvent(ev)
		case req := <-d.requests:
			in = d.accept(req)
		case r := <-d.results:
			in = r
		case <-d.cleared:
			d.cleared, in = nil, decide.HoldsCleared{}
		case <-timer.C():
			in = decide.Tick{}
		}
		if !timer.Stop() {
			select { // fired, unread: stale once the loop turns
			case <-timer.C():
			default:
			}
		}
		now := d.clock.Now()
		d.observeClock(in, now)
		out = d.machine.Step(now, in)
	}
}

// apply carries out one Output, in the order Output documents.
func (d *driver) apply(out decide.Output) error {
	for _, l := range out.Logs {
		d.log.Log(context.Background(), l.Level, l.Msg, l.Args...)
	}
	d.metrics.transitions.Add(float64(out.Counts.HolderChanges))
	d.metrics.renewFailures.Add(float64(out.Counts.RenewFailures))
	d.metrics.errors.Add(float64(out.Counts.Errors))
	for _, r := range out.Replies {
		if reply, ok := d.replies[r.ID]; ok {
			delete(d.replies, r.ID)
			reply <- r
		}
	}
	d.publish(out.Report)
	if d.cfg.Notify != nil && Noticeable(d.noticed, out.Report) {
		d.noticed = out.Report
		select {
		case d.cfg.Notify <- struct{}{}:
		default: // a notice is pending: the reader loads the latest snapshot
		}
	}
	if out.AwaitHolds != 0 {
		d.cleared = d.holds.drain(out.AwaitHolds)
	}
	if out.Request != nil {
		d.send(*out.Request)
	}
	return out.Fatal
}

// Noticeable reports whether report differs from the last one Notify was
// told of in what a reader of notices acts on (see Config.Notify): a
// change of Index (LeaderAddress included), of Observed, Candidate,
// Leading or ReservedFor, or FreeAt becoming zero or not zero. A renewal,
// or another holder's (which moves FreeAt later), is not noticeable.
func Noticeable(last, report decide.Report) bool {
	return last.Leading != report.Leading || last.Holder != report.Holder || last.Term != report.Term ||
		last.Token != report.Token || last.LeaderAddress != report.LeaderAddress || last.Observed != report.Observed || last.Candidate != report.Candidate ||
		last.FreeAt.IsZero() != report.FreeAt.IsZero() || last.ReservedFor != report.ReservedFor
}

// accept turns a caller's request into an input, with an ID for its reply
// (a SetGeneration has none).
func (d *driver) accept(req request) decide.Input {
	if req.generation != nil {
		return *req.generation // no reply: the caller does not wait
	}
	d.nextID++
	d.replies[d.nextID] = req.reply
	if req.release != nil {
		in := *req.release
		in.ID = d.nextID
		return in
	}
	in := *req.candidacy
	in.ID = d.nextID
	return in
}

// dated gives an observation of a record handed to this instance
// (decide.HandedOverAnnotation) the send time of the write it names, when
// this instance made it (Config.Witnessed).
func (d *driver) dated(ev decide.Input) decide.Input {
	o, ok := ev.(decide.Observed)
	if !ok || d.cfg.Witnessed == nil || o.Lease == nil || o.Lease.Spec.HolderIdentity == nil || *o.Lease.Spec.HolderIdentity != d.cfg.Identity {
		return ev
	}
	if witness := o.Lease.Annotations[decide.HandedOverAnnotation]; witness != "" {
		o.WitnessSentAt, _ = d.cfg.Witnessed(witness)
	}
	return o
}

// watchEvent keeps the watch gauge in step with the watcher's reports.
func (d *driver) watchEvent(ev decide.Input) {
	switch ev.(type) {
	case decide.WatchUp:
		d.metrics.watchUp.Set(1)
	case decide.WatchDown:
		d.metrics.watchUp.Set(0)
	}
}

// send performs req on a goroutine of its own, bounded by the request
// timeout, and delivers the answer to results.
func (d *driver) send(req decide.Request) {
	d.inflight.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.requestTimeout())
		defer cancel()
		started := d.clock.Now()
		var lease *coordinationv1.Lease
		var err error
		switch req.Verb {
		case decide.Get:
			lease, err = d.leases.Get(ctx, d.cfg.Name, metav1.GetOptions{})
		case decide.Create:
			lease, err = d.leases.Create(ctx, req.Lease, metav1.CreateOptions{})
		case decide.Update:
			lease, err = d.leases.Update(ctx, req.Lease, metav1.UpdateOptions{})
		}
		if req.Purpose == decide.Renew {
			d.metrics.renewDuration.Observe(d.clock.Since(started).Seconds())
		}
		if err != nil {
			lease = nil
		}
		d.results <- decide.Result{Lease: lease, Err: err}
	})
}

// wait waits for the request in flight, if any, to end.
func (d *driver) wait() { d.inflight.Wait() }

// publish makes r the current Snapshot.
func (d *driver) publish(r decide.Report) {
	d.snapshots.Publish(Snapshot{
		Identity:      d.cfg.Identity,
		Namespace:     d.cfg.Namespace,
		Lease:         d.cfg.Name,
		Leading:       r.Leading,
		ValidUntil:    r.ValidUntil,
		Holder:        r.Holder,
		Term:          r.Term,
		Token:         r.Token,
		LeaderAddress: r.LeaderAddress,
		Generation:    r.Generation,
		ReservedFor:   r.ReservedFor,
		HandedOver:    r.HandedOver,
		AcquiredAt:    r.AcquiredAt,
		RenewedAt:     r.RenewedAt,
		ObservedAt:    r.ObservedAt,
		FreeAt:        r.FreeAt,
		Observed:      r.Observed,
		WatchUp:       r.WatchUp,
		Candidate:     r.Candidate,
		Heartbeat:     r.Heartbeat,
		LastError:     r.LastError,
		LastErrorAt:   r.LastErrorAt,
		HolderClock:   d.holderClock,
	})
}
