package elect

import "sync/atomic"

// Publisher holds the current Snapshot and maintains its Index and Changed
// channel: Index advances by one, and the previous Changed channel closes,
// exactly when Leading, Holder, Term, Token or LeaderAddress differ from the
// previous snapshot. The election loop publishes through one; tests of code that
// reads snapshots can drive one by hand.
//
// Publish must be called from a single goroutine at a time; Load is safe
// from any goroutine.
type Publisher struct {
	current atomic.Pointer[Snapshot]
}

// NewPublisher returns a Publisher whose current snapshot is initial, at
// initial.Index: Index starts there and only grows.
//
// Indices of different processes must never collide, or a client that kept
// an index across a sidecar restart would block on a state it never saw. So
// the elector starts each process at uint64(start.UnixMicro()), the
// process's start time in microseconds: a restarted process starts above any
// index its predecessor can have reached unless that one published more than
// one change per microsecond of its life, and the values stay below 2^53, so
// that JSON clients that read numbers as doubles (JavaScript) read them
// exactly.
func NewPublisher(initial Snapshot) *Publisher {
	p := &Publisher{}
	initial.changed = make(chan struct{})
	p.current.Store(&initial)
	return p
}

// Publish makes s the current snapshot. It ignores s.Index and sets it: the
// previous Index for a snapshot that changes none of Leading, Holder, Term,
// Token and LeaderAddress, else the previous Index plus one.
func (p *Publisher) Publish(s Snapshot) *Snapshot {
	prev := p.current.Load()
	if s.key() == prev.key() {
		s.Index, s.changed = prev.Index, prev.changed
		p.current.Store(&s)
		return &s
	}
	s.Index, s.changed = prev.Index+1, make(chan struct{})
	p.current.Store(&s)
	close(prev.changed)
	return &s
}

// Load returns the current snapshot.
func (p *Publisher) Load() *Snapshot { return p.current.Load() }
