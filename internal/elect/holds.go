package elect

import (
	"sync"

	"github.com/leasehold/leasehold/internal/fence"
)

// holds counts the holds taken on this instance's terms (Elector.Hold). A
// voluntary release of a term waits until no hold on it remains, at most
// until the term's validity ends: that is how `leasehold run` makes sure its
// command has stopped before a successor can start.
//
// It has its own lock: holds are taken by HTTP handlers and drained by the
// election loop.
type holds struct {
	mu          sync.Mutex
	count       map[fence.Token]int
	drainedUpTo fence.Token   // no hold is taken on a term at or below it
	waiting     fence.Token   // the term being drained, 0 when none
	cleared     chan struct{} // closed when waiting's last hold ends
}

func newHolds() *holds { return &holds{count: map[fence.Token]int{}} }

// take holds the term with token if leading reports (under the lock, so no
// drain can slip in between) that this instance leads it, and that term is
// not being released. The returned func ends the hold; it is idempotent.
func (h *holds) take(token fence.Token, leading func() bool) (func(), bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if token == 0 || token <= h.drainedUpTo || !leading() {
		return nil, false
	}
	h.count[token]++
	var once sync.Once
	return func() { once.Do(func() { h.end(token) }) }, true
}

func (h *holds) end(token fence.Token) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count[token]--; h.count[token] > 0 {
		return
	}
	delete(h.count, token)
	if token == h.waiting {
		close(h.cleared)
		h.waiting, h.cleared = 0, nil
	}
}

// drain stops new holds on the term with token and returns a channel that
// is closed once none remains. The caller has already published that the
// term ended.
func (h *holds) drain(token fence.Token) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drainedUpTo = max(h.drainedUpTo, token)
	cleared := make(chan struct{})
	if h.count[token] == 0 {
		close(cleared)
		return cleared
	}
	if h.cleared != nil { // an older drain nobody waits for any more
		close(h.cleared)
	}
	h.waiting, h.cleared = token, cleared
	return cleared
}
