package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
)

// forward sends req to the leader's proxy at x.target. When that proxy
// refused the connection (a dial error: nothing of the request was sent,
// and no byte of its body read), the request was delivered to no one, so it
// goes once more where the leader is known to be now, by a View read now:
// to another leader's proxy, or to the local app if this instance leads
// now. When that View names the same proxy, or no leader, or the second
// attempt is refused at connect too, the answer is 503 (CodeLeaderUnreachable,
// or the View's own rejection) with Retry-After: never a 502 for a request
// that no one received. Any other failure is returned as it is (502).
func (p *Proxy) forward(x *exchange, req *http.Request) (*http.Response, error) {
	first, body := track(req)
	res, err := p.base.RoundTrip(first)
	if err == nil || !refusedAtConnect(err) || body.touched() {
		return res, err
	}
	refusedBy := x.target
	again := req.Clone(req.Context())
	if body != nil {
		again.Body = body
	}
	p.route(x, again, x.lease.view(p.clock.Now()), func(u *url.URL) { again.URL.Scheme, again.URL.Host = u.Scheme, u.Host })
	switch {
	case x.reject != nil:
		x.lease.log.Debug("proxy: the leader's proxy refused the connection, and no leader is known now", "refusedBy", refusedBy, "err", err, "code", x.reject.code)
		return nil, x.reject
	case x.outcome == forwarded && x.target == refusedBy:
		return nil, p.unreachable(x, refusedBy, err)
	}
	x.lease.log.Debug("proxy: the leader's proxy refused the connection; forwarding once more to the leader as now known", "refusedBy", refusedBy, "err", err, "outcome", x.outcome, "target", x.target)
	res, err = p.base.RoundTrip(again)
	if err != nil && x.outcome == forwarded && refusedAtConnect(err) && !body.touched() {
		return nil, p.unreachable(x, x.target, err)
	}
	return res, err
}

// unreachable rejects x: the leader's proxy at addr refused the connection
// (err), and no other is known.
func (p *Proxy) unreachable(x *exchange, addr string, err error) *rejection {
	x.outcome = rejected
	x.reject = &rejection{status: http.StatusServiceUnavailable, code: CodeLeaderUnreachable,
		msg: "the leader's proxy at " + addr + " refused the connection (" + err.Error() + "): it is stopping or gone, and no other leader is known yet; the request was delivered to no one, try again"}
	return x.reject
}

// refusedAtConnect reports whether err, from a RoundTrip, is a failure to
// connect: refused, timed out, no route. Nothing was written then.
func refusedAtConnect(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// trackedBody is a request body that records whether it was ever read, and
// that the transport cannot close: a transport closes the body of a
// request it failed to send, and this one may be sent once more. The
// ReverseProxy closes the body it wraps once the request is over.
type trackedBody struct {
	io.ReadCloser
	read atomic.Bool
}

// Close does nothing (see trackedBody).
func (b *trackedBody) Close() error { return nil }

// track returns a shallow copy of req whose body (if any) records reads,
// and that body (nil without one; touched on nil is false).
func track(req *http.Request) (*http.Request, *trackedBody) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	b := &trackedBody{ReadCloser: req.Body}
	first := req.WithContext(req.Context())
	first.Body = b
	return first, b
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

// touched reports whether anything read the body.
func (b *trackedBody) touched() bool { return b != nil && b.read.Load() }
