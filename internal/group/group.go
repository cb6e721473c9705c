package group

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/group/member"
)

// Rank is an app's rank for data-aware failover (member.Rank).
type Rank = member.Rank

// MemberLabel marks a member Lease with the name of its group.
const MemberLabel = member.Label

// MemberLeaseName is the name of identity's member Lease in group (see
// member.LeaseName).
func MemberLeaseName(group, identity string) string { return member.LeaseName(group, identity) }

// Group runs one instance of a lease group: an elect.Elector per Lease,
// and, for a member, the decision core of its membership and plan
// (member.Machine), which decides from what the electors and the member
// Leases show which Leases this instance campaigns for.
//
// Safety is each Elector's: the group only puts an Elector in or out of the
// election (SetCandidate, Leave), and taking it out releases its Lease
// safely. So every Lease of a group keeps every guarantee of a single Lease
// (its own fencing token, validity, immediate step-down, safe release,
// watch-driven takeover), whatever the membership view.
//
// A single Lease is a group of one: without membership (Config.Name "")
// when nothing needs it, so that its elector campaigns on its own, or with
// it, for a handover to a chosen successor or data-aware failover.
type Group struct {
	cfg      Config
	clock    clock.WithTicker
	log      *slog.Logger
	electors []*elect.Elector
	machine  *member.Machine // nil for an observer, and without membership
	metrics  *metrics

	snapshots *Publisher
	notify    chan struct{}  // electors: something the plan may act on changed
	inputs    chan groupCall // SetCandidate and Election.decline, to the loop
	// Published by the loop, read by electors and HTTP handlers.
	members atomic.Pointer[member.Members]
	writes  atomic.Pointer[[]member.Write]
	heirs   atomic.Pointer[[]member.Heir]
	rank    atomic.Pointer[member.SetRank] // as the loop last applied it (Rank)
	started atomic.Bool
	done    chan struct{}
}

// groupCall is an input from another goroutine; taken is closed once the
// loop has applied it.
type groupCall struct {
	in    member.Input
	taken chan struct{}
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
		cfg:    cfg,
		clock:  cfg.Clock,
		log:    cfg.Logger,
		notify: make(chan struct{}, 1),
		inputs: make(chan groupCall),
		done:   make(chan struct{}),
	}
	if cfg.membership() {
		g.metrics = newMetrics(cfg.Registerer)
	} else {
		g.metrics = newMetrics(nil)
	}
	if g.clock == nil {
		g.clock = clock.RealClock{}
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if cfg.membership() {
		g.log = g.log.With("group", cfg.Name)
	}
	if cfg.Candidate && cfg.membership() {
		m, err := member.New(cfg.memberConfig())
		if err != nil {
			return nil, err
		}
		g.machine = m
	}
	for i, name := range cfg.Leases {
		ec := cfg.electionConfig(name)
		reg := cfg.Registerer
		if reg != nil && !cfg.LeaseLabeled {
			reg = prometheus.WrapRegistererWith(prometheus.Labels{"lease": name}, cfg.Registerer)
		}
		var successor func() elect.Heir
		var witnessed func(string) (time.Time, bool)
		if g.machine != nil && cfg.Handover {
			successor = func() elect.Heir { return g.heirOf(i) }
		}
		if g.machine != nil {
			witnessed = func(version string) (time.Time, bool) {
				if w := g.writes.Load(); w != nil {
					return member.SentAt(*w, version)
				}
				return time.Time{}, false
			}
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
	g.snapshots = NewPublisher(g.collect(g.clock.Now()))
	return g, nil
}

// heirOf is whom election i hands its Lease to as it stops: the heir the
// Machine named on Stop (member.Output.Heirs), a zero Heir before.
func (g *Group) heirOf(i int) elect.Heir {
	heirs := g.heirs.Load()
	if heirs == nil {
		return elect.Heir{}
	}
	h := (*heirs)[i]
	return elect.Heir{Identity: h.Identity, Witness: h.Witness}
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
// Lease. Without membership (Config.Name "") it is the one elector's
// SetCandidate, with its answer.
func (g *Group) SetCandidate(ctx context.Context, fit bool, reason string) (bool, error) {
	if !g.cfg.membership() {
		return g.electors[0].SetCandidate(ctx, fit, reason)
	}
	if g.machine == nil {
		return false, nil // an observer is never a member
	}
	return false, g.input(ctx, member.SetFit{Fit: fit, Reason: reason})
}

// SetRank gives this member's app's rank as probed at observedAt (the
// zero Rank: the app did not answer) to the membership, which publishes it
// (Config.Rank), and its generation to every elector, whose leader
// publishes it on its Lease. It returns once both have it.
func (g *Group) SetRank(ctx context.Context, rank member.Rank, observedAt time.Time) error {
	if g.machine == nil || !g.cfg.Rank {
		return nil
	}
	for _, e := range g.electors {
		if err := e.SetGeneration(ctx, rank.Generation); err != nil {
			return err
		}
	}
	return g.input(ctx, member.SetRank{Rank: rank, ObservedAt: observedAt})
}

// RankStatus is data-aware failover's view of one Lease: this member's
// rank, the generation last published on the Lease, and the best
// candidate for it now.
type RankStatus struct {
	Own        member.Rank
	ObservedAt time.Time // when Own was probed; zero before the first probe
	// LeaseGeneration is the generation last published on the Lease ("":
	// none), the reference of the order.
	LeaseGeneration string
	// Best is the best-ranked live member that serves the Lease and does
	// not decline it, this one included (member.Best); "" when there is
	// none or the membership is not listed yet (Listed false).
	Best   string
	Listed bool
}

// Rank is the RankStatus of election i as published at the moment of
// asking (the membership view, the election's snapshot and the rank the
// loop last applied, each immutable).
func (g *Group) Rank(i int) RankStatus {
	var st RankStatus
	if r := g.rank.Load(); r != nil {
		st.Own, st.ObservedAt = r.Rank, r.ObservedAt
	}
	st.LeaseGeneration = g.electors[i].Snapshot().Generation
	members := g.members.Load()
	if members == nil || !members.Listed {
		return st
	}
	st.Listed = true
	self := g.cfg.Election.Identity
	st.Best = member.Best(self, st.Own, slices.Contains(members.Identities, self), g.cfg.Leases[i], st.LeaseGeneration, members)
	return st
}

// input hands in to the loop and waits until it has been applied.
func (g *Group) input(ctx context.Context, in member.Input) error {
	call := groupCall{in: in, taken: make(chan struct{})}
	select {
	case g.inputs <- call:
	case <-g.done:
		return elect.ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-call.taken:
		return nil
	case <-g.done:
		return elect.ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs the group until ctx ends. On the way out the member leaves the
// membership (deletes its member Lease, so the others plan for this
// instance's Leases) and, at the same time, every elector stops, which
// releases what it holds (ReleaseOnStop), handed to its heir with
// Handover. It returns a non-nil error if an election cannot go on
// safely; the whole group then stops.
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
	d := newDriver(g, stopElectors)
	err := d.run(ctx, failed)
	stopElectors()
	electors.Wait()
	d.wait()
	g.snapshots.Publish(g.collect(g.clock.Now()))
	return err
}

// collect is the group state now.
func (g *Group) collect(now time.Time) Snapshot {
	s := Snapshot{Name: g.cfg.Name, Leases: make([]*elect.Snapshot, len(g.electors)), Membership: g.machine != nil}
	for i, e := range g.electors {
		s.Leases[i] = e.Snapshot()
	}
	s.Members = len(g.members.Load().IDs())
	if g.snapshots == nil {
		s.Index = uint64(max(now.UnixMicro(), 0))
	}
	g.metrics.members.Set(float64(s.Members))
	return s
}

// states are what the plan needs of the elections in s.
func states(s Snapshot) []member.LeaseState {
	out := make([]member.LeaseState, len(s.Leases))
	for i, e := range s.Leases {
		out[i] = member.LeaseState{Name: e.Lease, Observed: e.Observed, Leading: e.Leading, Holder: e.Holder, FreeAt: e.FreeAt,
			ReservedFor: e.ReservedFor, HandedOver: e.HandedOver, Generation: e.Generation}
	}
	return out
}

// watchOptions select the group's member Leases.
func (g *Group) watchOptions() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: member.Label + "=" + g.cfg.Name}
}

// LeaseClient is what a group needs of a client of the Leases of its
// namespace: an election's needs, plus Delete for member Leases.
type LeaseClient interface {
	elect.LeaseClient
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}
