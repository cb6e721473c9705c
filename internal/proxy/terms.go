package proxy

import (
	"mime"
	"net/http"
	"sync"

	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/fence"
)

// terms holds the long-lived exchanges this proxy forwarded to the local
// app for one Lease (longLived: upgraded connections, streamed answers), by
// the token of the Lease's term they were forwarded under, so that each is
// closed once its term has ended (CloseEndedTerms). It has its own lock: exchanges are added and
// removed by their requests' goroutines, and closed by whoever calls
// CloseEndedTerms.
type terms struct {
	mu   sync.Mutex
	open map[fence.Token]map[*exchange]struct{}
}

// add holds x, forwarded to the app under the term with x.token whose
// long-lived answer has just begun, until its request ends (remove) or its
// term does (closeEndedTerms). A term that has already ended (the View of
// x's Lease, read now under the lock, does not lead with that token)
// closes x at once.
func (t *terms) add(p *Proxy, x *exchange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := x.lease.view(p.clock.Now()); !v.Leading || v.Token != x.token {
		x.cancel()
		x.lease.log.Info("proxy: closed a long-lived connection whose term ended before the app answered", "fencingToken", x.token)
		return
	}
	held := t.open[x.token]
	if held == nil {
		held = map[*exchange]struct{}{}
		t.open[x.token] = held
	}
	held[x] = struct{}{}
	x.held = true
}

// remove forgets x once its request has ended. It is called on x's
// request's goroutine, as add is, so x.held needs no lock.
func (t *terms) remove(x *exchange) {
	if !x.held {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if held := t.open[x.token]; held != nil {
		delete(held, x)
		if len(held) == 0 {
			delete(t.open, x.token)
		}
	}
}

// CloseEndedTerms closes every long-lived exchange (an upgraded connection,
// such as a WebSocket, or an answer being streamed: see the package doc)
// that this proxy forwarded to the app under a term that has ended, as
// the View of its Lease says now: the app's side of it and the client's
// both close, so no traffic goes on under that term's token. A term that
// the View says this instance still leads keeps its exchanges. In a group,
// it checks every Lease. Call it whenever a term may
// have ended (the sidecar calls it at every change of the election's state
// and when the term's validity runs out); calling it at any other time is
// harmless. It does not block on the connections.
func (p *Proxy) CloseEndedTerms() {
	for _, l := range p.leases {
		l.closeEndedTerms(p.clock)
	}
}

// closeEndedTerms is CloseEndedTerms for l, its View read at clk's now.
func (l *served) closeEndedTerms(clk clock.PassiveClock) {
	l.terms.mu.Lock()
	defer l.terms.mu.Unlock()
	if len(l.terms.open) == 0 {
		return
	}
	v := l.view(clk.Now())
	for tok, held := range l.terms.open {
		if v.Leading && v.Token == tok {
			continue
		}
		for x := range held {
			x.cancel()
		}
		delete(l.terms.open, tok)
		l.log.Info("proxy: term ended: closed the long-lived connections forwarded under it", "fencingToken", tok, "closed", len(held))
	}
}

// longLived reports whether res, an answer of the app, opens an exchange
// that may last: a switch of protocols (101, e.g. WebSocket), or a body
// that is streamed (of unknown length, or an event stream: the answers the
// ReverseProxy flushes as they come).
func longLived(res *http.Response) bool {
	switch {
	case res.StatusCode == http.StatusSwitchingProtocols:
		return true
	case res.Request.Method == http.MethodHead, res.StatusCode == http.StatusNoContent, res.StatusCode == http.StatusNotModified:
		return false
	}
	ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return res.ContentLength < 0 || ct == "text/event-stream"
}
