package group

import (
	"context"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/group/member"
)

// driver is the thin I/O around a member's decision core: it is the only
// goroutine that touches the Machine. It feeds it, with the electors'
// latest states at every step, the member Leases' watch, the answers to
// its member Lease requests (one at a time, each on a goroutine of its
// own), a Tick when an elector notifies, the
// returns of its candidacy calls (one goroutine per call, at most one per
// elector), fitness changes and stay-outs from other goroutines, and
// timer ticks; and it carries out every Output. Without a Machine (an
// observer, or a group without membership) the driver only publishes what
// its electors report.
type driver struct {
	*Group
	stopElectors func()
	results      chan member.Result // capacity 1: a finished request never blocks
	calls        chan int           // capacity one per elector: a finished call never blocks
	events       chan member.Input  // the member watch's
	callCtx      context.Context    // ends with the loop: calls under way return
	endCalls     func()
	running      sync.WaitGroup // the request, the calls and the member watch
}

func newDriver(g *Group, stopElectors func()) *driver {
	ctx, cancel := context.WithCancel(context.Background())
	return &driver{Group: g, stopElectors: stopElectors, results: make(chan member.Result, 1), calls: make(chan int, len(g.electors)),
		events: make(chan member.Input), callCtx: ctx, endCalls: cancel}
}

// run feeds inputs until the Machine has stopped (after ctx ended), the
// shutdown bound passes, or an elector fails.
func (d *driver) run(ctx context.Context, failed <-chan error) error {
	defer d.endCalls()
	if d.machine == nil {
		return d.observe(ctx, failed)
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	d.running.Go(func() { d.watch(watchCtx) })

	now := d.clock.Now()
	snap := d.collect(now)
	d.snapshots.Publish(snap)
	out := d.machine.Step(now, states(snap), member.Start{})
	stop := ctx.Done()
	var shutdownBound <-chan time.Time
	timer := d.clock.NewTimer(0)
	timer.Stop()
	defer timer.Stop()
	for {
		d.apply(out)
		if out.Stopped {
			return nil
		}
		timer.Reset(max(out.Wake.Sub(d.clock.Now()), 0))
		var in member.Input
		var taken chan struct{}
		select {
		case <-stop:
			stop, in = nil, member.Stop{}
			shutdownBound = d.clock.After(2 * d.cfg.requestTimeout())
		case <-shutdownBound:
			d.log.Warn("member Lease delete on shutdown did not finish in time; the others see this member go when it expires")
			return nil
		case err := <-failed:
			return err
		case ev := <-d.events:
			in = ev
		case r := <-d.results:
			in = r
		case <-d.notify:
			d.snapshots.Publish(d.collect(d.clock.Now()))
			in = member.Tick{}
		case i := <-d.calls:
			in = member.CandidacyDone{Lease: i}
		case c := <-d.inputs:
			in, taken = c.in, c.taken
			if r, ok := in.(member.SetRank); ok {
				d.rank.Store(&r)
			}
		case <-timer.C():
			in = member.Tick{}
		}
		if !timer.Stop() {
			select { // fired, unread: stale once the loop turns
			case <-timer.C():
			default:
			}
		}
		now := d.clock.Now()
		out = d.machine.Step(now, states(d.collect(now)), in)
		if taken != nil {
			close(taken)
		}
	}
}

// observe is the loop without a Machine: it publishes what the electors
// report until ctx ends or an elector fails.
func (d *driver) observe(ctx context.Context, failed <-chan error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case <-d.notify:
			d.snapshots.Publish(d.collect(d.clock.Now()))
		}
	}
}

// apply carries out one Output, in the order Output documents.
func (d *driver) apply(out member.Output) {
	for _, l := range out.Logs {
		d.log.Log(context.Background(), l.Level, l.Msg, l.Args...)
	}
	d.metrics.moves.WithLabelValues("in").Add(float64(out.Moves.In))
	d.metrics.moves.WithLabelValues("out").Add(float64(out.Moves.Out))
	d.metrics.collected.Add(float64(out.Collected))
	if out.Writes != nil {
		writes := slices.Clone(out.Writes)
		d.writes.Store(&writes)
	}
	if out.Members != nil {
		d.members.Store(out.Members)
		d.snapshots.Publish(d.collect(d.clock.Now()))
	}
	if out.Heirs != nil {
		d.heirs.Store(&out.Heirs)
		d.stopElectors() // each hands its Lease to its heir (Config.Successor reads heirs)
	}
	for _, c := range out.Calls {
		d.call(c)
	}
	if out.Request != nil {
		d.send(*out.Request)
	}
}

// call makes one candidacy change of an elector on a goroutine of its own,
// and reports its return.
func (d *driver) call(c member.Call) {
	e, lease := d.electors[c.Lease], d.cfg.Leases[c.Lease]
	d.running.Go(func() {
		defer func() { d.calls <- c.Lease }()
		var err error
		if c.Leave {
			_, err = e.Leave(d.callCtx, c.Reason, elect.Heir{Identity: c.To.Identity, Witness: c.To.Witness})
		} else {
			_, err = e.SetCandidate(d.callCtx, c.Candidate, c.Reason)
		}
		if err != nil && d.callCtx.Err() == nil {
			d.log.Warn("candidacy change failed", "lease", lease, "candidate", c.Candidate, "err", err)
		}
	})
}

// send performs a member Lease request on a goroutine of its own, bounded
// by the request timeout, and delivers the answer to results.
func (d *driver) send(req member.Request) {
	d.running.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.requestTimeout())
		defer cancel()
		var l *coordinationv1.Lease
		var err error
		switch req.Verb {
		case member.Create:
			l, err = d.cfg.Client.Create(ctx, req.Lease, metav1.CreateOptions{})
		case member.Get:
			l, err = d.cfg.Client.Get(ctx, req.Name, metav1.GetOptions{})
		case member.Update:
			l, err = d.cfg.Client.Update(ctx, req.Lease, metav1.UpdateOptions{})
		case member.Delete:
			err = d.cfg.Client.Delete(ctx, req.Name, metav1.DeleteOptions{Preconditions: req.Preconditions})
		}
		if err != nil {
			l = nil
		}
		d.results <- member.Result{Lease: l, Err: err}
	})
}

// watch lists and watches the group's member Leases (elect.WatchLeases)
// until ctx ends, and feeds what it sees to the loop; it lists again after
// any error, with a backoff that doubles from the request timeout.
func (d *driver) watch(ctx context.Context) {
	feed := func(in member.Input) bool {
		select {
		case d.events <- in:
			return true
		case <-ctx.Done():
			return false
		}
	}
	timeout := d.cfg.requestTimeout()
	elect.WatchLeases(ctx, d.cfg.Client, d.watchOptions(), d.clock, timeout, timeout, elect.LeaseEvents{
		Listed: func(list *coordinationv1.LeaseList) bool { return feed(member.Listed{Items: list.Items}) },
		Changed: func(l *coordinationv1.Lease, deleted bool) bool {
			if deleted {
				return feed(member.Deleted{Name: l.Name})
			}
			return feed(member.Changed{Lease: l})
		},
		Down: func(err error) bool {
			d.log.Debug("member watch ended", "err", err)
			return true
		},
	})
}

// wait waits for the request, the calls and the member watch to end.
func (d *driver) wait() { d.running.Wait() }
