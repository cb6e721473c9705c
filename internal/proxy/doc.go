// Package proxy is leasehold's forwarding proxy: an HTTP reverse proxy,
// built on net/http/httputil's ReverseProxy, that sends every request to
// the app of the instance that validly leads, so that clients can call any
// replica and only the leader's app answers.
//
// A Proxy (New, Config) decides per request, from one View of leadership
// (of the request's Lease, in a group: see "Lease groups"):
//
//   - Leading: the request goes to the local app (Config.Upstream) with
//     X-Leasehold-Fencing-Token (the term's fencing token, decimal) and
//     X-Leasehold-Term (its leaseTransitions), both from that View.
//   - Not leading, a valid leader known: the request goes to the leader's
//     advertised address (View.LeaderAddress), which is the leader's proxy;
//     that proxy takes its own View and sets the headers, so the token the
//     app sees is always the leader's own. The follower marks the request
//     with X-Leasehold-Forwarded (the loop guard; value: its Marker) and
//     X-Leasehold-Lease (the Lease it is for, namespace/name: Config.Lease).
//   - The request carries X-Leasehold-Forwarded and an X-Leasehold-Lease
//     that is not this proxy's Lease: 503, code wrong_lease, whether or
//     not this instance leads. The follower that sent it took an address
//     for its leader's that now belongs to a proxy of another Lease (a
//     dead leader's Pod IP given to a Pod of another app, with a proxy on
//     the same port); that proxy must not serve it under its own token. A
//     forwarded request without X-Leasehold-Lease comes from a proxy of an
//     earlier version and is served as before, so that a rolling update
//     refuses nothing.
//   - Not leading, and the request carries X-Leasehold-Forwarded: 503,
//     code forward_loop. A request is forwarded at most once; the leader
//     serves a request carrying the guard as any other.
//   - Not leading, no valid leader known: 503, code no_leader.
//
// # Lease groups
//
// A Proxy of a lease group (Config.Leases) serves each of its Leases as a
// Proxy of one Lease does, by that Lease's View, and a request names the
// Lease in X-Leasehold-Lease: namespace/name, or the name alone. The
// Lease is found before anything else (it needs no View); a request
// without the header, or with it more than once, is answered 400, code
// lease_required, and one naming another Lease 404, code unknown_lease,
// both listing the group's Leases; a request forwarded by another proxy
// (X-Leasehold-Forwarded) that names none of them is answered 503,
// wrong_lease, as above. None of them is forwarded. For the Lease named,
// the decision above holds with that Lease's View: its leader's app gets
// the request with that Lease's token and term, and X-Leasehold-Lease set
// to the Lease's name, so that the app knows whose token it is; a
// follower of that Lease forwards it to that Lease's leader's proxy,
// marked with the Lease; the long-lived exchanges are kept, and closed,
// by that Lease's terms. A Proxy of one Lease reads X-Leasehold-Lease only
// on forwarded requests, as above, and sets it only on the requests it
// forwards.
//
// Every request header named X-Leasehold-* (case-insensitively, "_"
// counting as "-", since CGI-style servers fold both into "_") is removed
// from what the client sent: a client cannot spoof a token or a Lease, and
// the app never sees the loop guard or the Lease mark. The proxy's own
// answers are JSON,
// {"error": "...", "code": "..."}, the shape of the sidecar API's errors
// (Code lists the codes); its 503s carry Retry-After (Config.RetryAfter,
// in whole seconds, at least 1).
//
// # Delivered at most once
//
// A request reaches at most one app, once. When the app (on the leader)
// or the leader's proxy (on a follower) gives no answer once the
// connection was made — reset, closed before answering — the request may
// have been received, so the proxy answers 502, code
// upstream_unavailable, and does not send it again, to the same target or
// to another; so it does when the app refuses the connection (on the
// leader: the app is down). (net/http's Transport itself re-sends a
// request in two cases only: on a kept-alive connection that turned out
// closed before any byte of the request was written, and, for a request
// without a body whose method is idempotent — GET, HEAD, OPTIONS, TRACE —
// on a kept-alive connection that broke before the answer. It never
// re-sends a request with a body.) An answer of the app or of the
// leader's proxy, whatever its status (a 503 of a leader that has just
// lost its term included), is passed to the client as it is.
//
// One failure is known to leave a request undelivered: on a follower, the
// leader's proxy refused the connection (a dial error: connection refused,
// no route, the 5 s connect timeout), before a byte of the request or its
// body was sent. That happens during a handover, when the old leader's
// proxy has closed and this follower has not yet seen the new leader. The
// follower then reads View once more and forwards the request, once, to
// the leader as now known: another leader's proxy, or its own app if this
// instance now leads. If View names the same proxy or no leader, or that
// second connection is refused too, it answers 503 with Retry-After (code
// leader_unreachable, or the View's no_leader), never 502.
//
// # When leadership is read, and what remains
//
// One View per request decides everything: the target, the headers, or
// the rejection. It is read in the ReverseProxy's Rewrite hook; the proxy
// reads View again only for a follower's request refused at connect (see
// above: a second decision, for a request that went nowhere), when a
// long-lived answer begins, and in CloseEndedTerms (see "Streaming and
// upgrades"). Rewrite is the last hook net/http gives before the
// request is handed to the Transport: ReverseProxy has by then copied the
// request and its headers in memory (nothing blocks, the body is not
// read), and after it only fills in an empty User-Agent and calls
// Transport.RoundTrip, which takes a kept-alive connection (or dials one)
// and writes the request. Rewrite cannot answer the client, so a rejection
// is answered through the Transport: Rewrite records it in the request's
// context, the Proxy's Transport wrapper returns it at once without
// sending anything, and the ErrorHandler writes the 503. (Deciding in
// ServeHTTP, before ReverseProxy runs, would read leadership earlier, by
// the request's copy, for no gain.)
//
// The residual window, honestly: the View is taken before the request
// reaches the app, not when the app acts on it. The app receives the
// request after the connection is taken or dialled and the headers
// written, reads a streamed body for as long as the client sends it, and
// may act later still; the proxy does not look at leadership again before
// the request reaches the app, nor when an ordinary answer comes back. So a request forwarded just before
// this instance's validity ends can reach the app, and be acted on, after
// it has ended, and (if the delay exceeds leaseDuration − renewDeadline,
// the margin before another instance can acquire) while another instance
// validly leads. The proxy only guarantees that the request was forwarded
// to the app at an instant this instance validly led, with that term's
// token. The fencing token is what protects storage: the app passes
// X-Leasehold-Fencing-Token with its writes, and storage that refuses a
// token smaller than the largest it has seen refuses the late request.
//
// # Streaming and upgrades
//
// Request bodies are streamed to the target as they arrive. A response of
// unknown length (chunked) or of type text/event-stream is flushed to the
// client after every write (ReverseProxy's detection, FlushInterval 0), so
// SSE events and chunks arrive as the app sends them; a response of known
// length passes through the server's buffer. A request with Upgrade (e.g.
// WebSocket) is forwarded as any other, and once the app answers 101 the
// two connections are joined, through both hops on a follower.
// Hop-by-hop headers and X-Forwarded-* are ReverseProxy's Rewrite
// handling: hop-by-hop headers are dropped; X-Forwarded-For gets the
// address the request came from appended to the inbound list; X-Forwarded-
// Host and -Proto are passed on when the request has them, else set (the
// Host, "http"). The client's Host header is kept, through both hops.
//
// An upgraded connection or a stream can outlast the term it was forwarded
// under, and the app would go on acting under that term's token. So the
// leader's proxy, the one that set the token, keeps every long-lived
// exchange it forwarded to its app — an upgraded connection (101), or an
// answer it streams: of unknown length, or an event stream — by the term's
// token, and closes it, the app's connection and the client's (through
// every hop), once that term has ended: at the next CloseEndedTerms that
// finds View no longer leading with that token. The sidecar calls
// CloseEndedTerms at every change of the election's state and when the
// term's validity runs out unrenewed, so a term given up (release,
// step-down, SIGTERM) or lost closes its connections within milliseconds.
// An answer that begins only after its term has ended is closed as soon as
// it begins. A request still waiting for the app's answer when its term
// ends is left to be answered: it is one request, under the token it
// carries, and cutting it would leave its outcome unknown; a stream or an
// upgrade it turns into is then closed at once. The client sees its
// connection close (or its stream end early) and reconnects, to the new
// leader.
//
// # Metrics
//
// leasehold_proxy_requests_total{outcome, code}: outcome is local (sent to
// the app beside this leader), forwarded (sent to the leader's proxy) or
// rejected (answered by the proxy itself: 503, or 400 when ReverseProxy
// refused the request); code is the HTTP status answered (the app's, the
// leader's proxy's, or the proxy's own 502 or 503).
// leasehold_proxy_request_duration_seconds{outcome} is the time from a
// request's arrival until its answer's status was known (not including a
// streamed body). A request counts once its status is known; an upgraded
// connection counts when it ends. In a group, both are per Lease, labelled
// lease (the Lease's name), and
// leasehold_proxy_unrouted_requests_total{code} counts the requests that
// named none of the group's Leases, with no lease label.
//
// # Goroutines
//
// The package starts none of its own (CloseEndedTerms runs on its
// caller's). net/http's server, Transport and
// ReverseProxy start theirs per connection (and two per upgraded
// connection), and end them with it; the idle kept-alive connections of the
// Transport end after its idle timeout, or at CloseIdleConnections.
package proxy
