package group

import (
	"sync/atomic"

	"github.com/leasehold/leasehold/internal/elect"
)

// Snapshot is a lease group's state at one moment, as published by the
// group's loop. It is immutable: readers may keep and share it freely.
type Snapshot struct {
	// Name is the group's name (the membership label's value), "" for a
	// single Lease.
	Name string
	// Leases are the snapshots of the group's elections, in configured
	// order.
	Leases []*elect.Snapshot
	// Members is the number of live members this instance sees, itself
	// included; meaningful only when Membership is true (a group of
	// candidates). A single Lease, and an observer, keep no membership.
	Members    int
	Membership bool
	// Index increases whenever the Index of one of Leases changes, or
	// Members does, and only then. It starts at the process's start time
	// in microseconds, as an election's does (elect.NewPublisher).
	Index uint64

	changed <-chan struct{} // closed when a snapshot with a larger Index is published
}

// Changed returns a channel that is closed once a snapshot with a larger
// Index has been published.
func (s *Snapshot) Changed() <-chan struct{} { return s.changed }

// Lease returns the snapshot of the named Lease, nil when it is not in the
// group.
func (s *Snapshot) Lease(name string) *elect.Snapshot {
	for _, l := range s.Leases {
		if l.Lease == name {
			return l
		}
	}
	return nil
}

// Publisher holds a group's current Snapshot and moves its Index. The
// group's loop publishes through one; tests of code that reads group
// snapshots can drive one by hand. Publish must be called from a single
// goroutine at a time; Snapshot is safe from any goroutine.
type Publisher struct {
	current atomic.Pointer[Snapshot]
	changed chan struct{} // the current snapshot's Changed
}

// NewPublisher returns a Publisher whose current snapshot is initial, at
// initial.Index.
func NewPublisher(initial Snapshot) *Publisher {
	p := &Publisher{changed: make(chan struct{})}
	initial.changed = p.changed
	p.current.Store(&initial)
	return p
}

// Publish makes s current: with the previous Index when no Lease's Index
// and no member count differs from the previous snapshot's, else with the
// previous Index plus one.
func (p *Publisher) Publish(s Snapshot) {
	prev := p.current.Load()
	if sameIndices(prev, &s) {
		s.Index, s.changed = prev.Index, prev.changed
		p.current.Store(&s)
		return
	}
	closing := p.changed
	p.changed = make(chan struct{})
	s.Index, s.changed = prev.Index+1, p.changed
	p.current.Store(&s)
	close(closing)
}

// Snapshot returns the current snapshot.
func (p *Publisher) Snapshot() *Snapshot { return p.current.Load() }

func sameIndices(a, b *Snapshot) bool {
	if a.Members != b.Members || a.Membership != b.Membership || len(a.Leases) != len(b.Leases) {
		return false
	}
	for i := range a.Leases {
		if a.Leases[i].Index != b.Leases[i].Index {
			return false
		}
	}
	return true
}

// Single presents one election as a group of one, without membership, so
// that the HTTP layer serves GET /v1/leases in single-Lease mode too. Its
// Index is the election's.
type Single struct {
	Election interface{ Snapshot() *elect.Snapshot }
}

// Snapshot returns the group snapshot of the election's latest Snapshot.
func (s Single) Snapshot() *Snapshot {
	snap := s.Election.Snapshot()
	return &Snapshot{Leases: []*elect.Snapshot{snap}, Index: snap.Index, changed: snap.Changed()}
}
