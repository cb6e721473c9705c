package group

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect"
)

// Group runs one instance of a lease group: an elect.Elector per Lease,
// the member Lease, and the loop that decides, from what the electors and
// the membership report, which Leases this instance campaigns for.
//
// Safety is each Elector's: the group only puts an Elector in or out of the
// election (SetCandidate), and taking it out releases its Lease safely. So
// every Lease of a group keeps every guarantee of a single Lease (its own
// fencing token, validity, immediate step-down, safe release, watch-driven
// takeover), whatever the membership view.
type Group struct {
	cfg      Config
	clock    clock.WithTicker
	log      *slog.Logger
	electors []*elect.Elector
	members  *membership
	declines *declines
	metrics  *metrics

	snapshots *Publisher
	notify    chan struct{} // electors and membership: something changed
	fitness   chan fitRequest
	started   atomic.Bool
	done      chan struct{}
}

type fitRequest struct {
	fit    bool
	reason string
	reply  chan struct{}
}

// New checks cfg and builds the group's electors; nothing runs before Run.
func New(cfg Config) (*Group, error) {
	if cfg.Client == nil {
		return nil, errors.New("group: Client is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Group{
		declines: &declines{},
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		notify:   make(chan struct{}, 1),
		fitness:  make(chan fitRequest),
		done:     make(chan struct{}),
	}
	if g.clock == nil {
		g.clock = clock.RealClock{}
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.metrics = newMetrics(cfg.Registerer)
	for _, name := range cfg.Leases {
		ec := cfg.Election
		ec.Name = name
		// A member campaigns only for what the plan gives it; an observer
		// never does; a greedy member campaigns for all once fit.
		ec.StartWithdrawn = !cfg.Candidate || cfg.Balance || cfg.Election.StartWithdrawn
		// A balanced member's planner decides what it keeps: a Lease handed
		// to it is taken even while its elector is withdrawn.
		ec.AcceptHandovers = cfg.Candidate && cfg.Balance
		reg := cfg.Registerer
		if reg != nil && !cfg.LeaseLabeled {
			reg = prometheus.WrapRegistererWith(prometheus.Labels{"lease": name}, cfg.Registerer)
		}
		var successor func() elect.Heir
		var witnessed func(string) (time.Time, bool)
		if cfg.Handover && cfg.Candidate {
			i := len(g.electors)
			successor = func() elect.Heir { return g.successorFor(i) }
		}
		if cfg.Candidate {
			witnessed = func(version string) (time.Time, bool) { return g.members.sentAt(version) }
		}
		e, err := elect.New(elect.Config{
			Config:    ec,
			Leases:    cfg.Client,
			Clock:     g.clock,
			Logger:    g.log,
			Metrics:   elect.NewMetrics(reg),
			Notify:    g.notify,
			Successor: successor,
			Witnessed: witnessed,
		})
		if err != nil {
			return nil, err
		}
		g.electors = append(g.electors, e)
	}
	if cfg.Candidate {
		g.members = &membership{
			group:    cfg.Name,
			identity: cfg.Election.Identity,
			name:     MemberLeaseName(cfg.Name, cfg.Election.Identity),
			ttl:      cfg.Election.LeaseDuration,
			leases:   cfg.Client,
			clock:    g.clock,
			log:      g.log.With("group", cfg.Name),
			timeout:  cfg.requestTimeout(),
			notify:   g.notify,
			wake:     make(chan struct{}, 1),
			records:  map[string]memberRecord{},
			declines: g.declines,
			info:     MemberInfo{Priority: cfg.Priority, StartedAt: cfg.StartedAt},
		}
		g.members.wanted.Store(!cfg.Election.StartWithdrawn)
	}
	g.snapshots = NewPublisher(g.collect(g.clock.Now()))
	return g, nil
}

// Snapshot returns the latest published group state.
func (g *Group) Snapshot() *Snapshot { return g.snapshots.Snapshot() }

// Elections returns the group's elections, in configured order, as the
// HTTP layer serves them (Election: a release with a stay-out is a decline
// the other members see).
func (g *Group) Elections() []Election {
	out := make([]Election, len(g.electors))
	for i, e := range g.electors {
		out[i] = Election{Elector: e, group: g}
	}
	return out
}

// Done is closed when Run has returned.
func (g *Group) Done() <-chan struct{} { return g.done }

// SetCandidate makes this instance a member of the group (true) or takes
// it out (false: it leaves the membership, so the others take its share,
// and releases every Lease it holds safely). It is how health-gated
// candidacy drives a group. It returns once the loop has taken the change;
// the releases follow. The bool is always false: releases are reported per
// Lease.
func (g *Group) SetCandidate(ctx context.Context, fit bool, reason string) (bool, error) {
	req := fitRequest{fit: fit, reason: reason, reply: make(chan struct{})}
	select {
	case g.fitness <- req:
	case <-g.done:
		return false, elect.ErrStopped
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case <-req.reply:
		return false, nil
	case <-g.done:
		return false, elect.ErrStopped
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Run runs the group until ctx ends. On the way out it leaves the
// membership (deletes its member Lease, so the others plan for this
// instance's Leases) and, at the same time, stops every elector, which
// releases what it holds (ReleaseOnStop), handed to its heir with
// Handover. It returns a non-nil error if an election cannot go on safely;
// the whole group then stops.
func (g *Group) Run(ctx context.Context) error {
	if !g.started.CompareAndSwap(false, true) {
		return errors.New("group: Run called twice")
	}
	defer close(g.done)

	electCtx, stopElectors := context.WithCancel(context.Background())
	defer stopElectors()
	var electors sync.WaitGroup
	failed := make(chan error, len(g.electors))
	for _, e := range g.electors {
		electors.Go(func() {
			if err := e.Run(electCtx); err != nil {
				failed <- err
			}
		})
	}
	memberCtx, stopMembers := context.WithCancel(context.Background())
	var membersDone sync.WaitGroup
	if g.members != nil {
		membersDone.Go(func() { g.members.run(memberCtx) })
	}

	l := &loop{Group: g, requested: make([]bool, len(g.electors)), left: make([]bool, len(g.electors)), inflight: make([]bool, len(g.electors)),
		results: make(chan int, len(g.electors)), fit: !g.cfg.Election.StartWithdrawn}
	for i := range l.requested {
		l.requested[i] = !g.cfg.Balance && g.cfg.Candidate && l.fit
	}
	err := l.run(ctx, failed)

	// Leave the membership and release every Lease at once: the others
	// take a released Lease when they have seen both, so doing one after
	// the other would only add a round trip to each handover.
	stopMembers()
	stopElectors()
	membersDone.Wait() // the member Lease is gone (or its delete failed)
	electors.Wait()
	l.calls.Wait()
	g.snapshots.Publish(g.collect(g.clock.Now()))
	return err
}

// collect is the group state now.
func (g *Group) collect(now time.Time) Snapshot {
	s := Snapshot{Name: g.cfg.Name, Leases: make([]*elect.Snapshot, len(g.electors)), Membership: g.members != nil}
	for i, e := range g.electors {
		s.Leases[i] = e.Snapshot()
	}
	if g.members != nil {
		if m := g.members.load(); m != nil {
			s.Members = len(m.Identities)
		}
	}
	if g.snapshots == nil {
		s.Index = uint64(max(now.UnixMicro(), 0))
	}
	g.metrics.members.Set(float64(s.Members))
	return s
}

// successorFor is whom this member hands Lease i to when it leaves, as its
// view says now (a zero Heir for anyone): in a balanced group, the heir
// the fair share among the others gives it (Heirs); otherwise the
// successor (Successor), by priority and start, among the members that do
// not decline it. Its witness is that member's member Lease as observed.
func (g *Group) successorFor(i int) elect.Heir {
	self, members := g.cfg.Election.Identity, g.members.load()
	var to string
	if !g.cfg.Balance {
		to = Successor(self, g.cfg.Leases[i], members)
	} else {
		states := make([]LeaseState, len(g.electors))
		for j, e := range g.electors {
			states[j] = leaseStateOf(e.Snapshot())
		}
		to = Heirs(self, g.clock.Now(), members, states)[i]
	}
	return heir(members, to)
}

// heir is the successor to, with the version of its member Lease in
// members as the witness of a handover in one write.
func heir(members *Members, to string) elect.Heir {
	if to == "" || members == nil {
		return elect.Heir{Identity: to}
	}
	return elect.Heir{Identity: to, Witness: members.Versions[to]}
}
