package elect

import "sync/atomic"

// Publisher holds the current Snapshot and maintains its Index and Changed
// channel: Index advances, and the previous Changed channel closes, exactly
// when Leading, Holder, Term or Token differ from the previous snapshot.
// The election loop publishes through one; tests of code that reads
// snapshots can drive one by hand.
//
// Publish must be called from a single goroutine at a time; Load is safe
// from any goroutine.
type Publisher struct {
	current atomic.Pointer[Snapshot]
}

// NewPublisher returns a Publisher whose current snapshot is initial, with
// initial.Index as the first Index.
func NewPublisher(initial Snapshot) *Publisher {
	p := &Publisher{}
	initial.changed = make(chan struct{})
	p.current.Store(&initial)
	return p
}

// Publish makes s the current snapshot. It ignores s.Index and sets it.
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
