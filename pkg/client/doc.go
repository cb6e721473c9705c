// Package client is a Go client of the leasehold sidecar's HTTP API
// (api/openapi.yaml), for apps written in Go that run next to the sidecar
// in the same pod. It imports the standard library and pkg/api only: no
// Kubernetes library, and nothing of leasehold's server.
//
//	lh, err := client.New("http://127.0.0.1:4040")
//	...
//	st, err := lh.WaitLeader(ctx)           // blocks until this pod leads
//	tok, err := lh.Token(ctx)               // before each write
//	if errors.Is(err, client.ErrNotLeader) { /* stop writing */ }
//	for st, err := range lh.Watch(ctx) { ... } // every change of state
//
// # Contract
//
//   - Every call is one or more requests to the sidecar, never a cached
//     answer: Token asked before a write says whether this pod leads at
//     that moment, and with which fencing token. Attach the token to the
//     write and let the storage refuse a smaller one (docs/using.md): an
//     answer may be stale by the time the write arrives.
//   - The client never uses a proxy (HTTP_PROXY and friends are ignored):
//     the sidecar is in the same pod. WithHTTPClient replaces that
//     transport with the caller's.
//   - An answer of the sidecar other than the one a call expects is a
//     *Error, with the HTTP status, the API's error code (api.ErrorCode)
//     and message. errors.Is matches it against ErrNotLeader, ErrConflict,
//     ErrShuttingDown, ErrLeaseGroup and ErrUnknownLease by code. No answer
//     (the sidecar is not listening, the connection broke, a timeout) is a
//     *url.Error, as net/http returns it. A 200 whose body is not what the
//     API defines is any other error.
//   - Requests that block (Poll, Leader with a wait, and the calls built on
//     them) are bounded by their wait plus the sidecar's jitter plus
//     RequestSlack; every other request by the client's timeout
//     (WithTimeout, DefaultTimeout by default); all by ctx.
//   - WaitLeader, WaitLeaderFor and Watch retry by themselves: an
//     unreachable sidecar after a backoff (100ms, doubling up to 1s), a 503
//     after its Retry-After (within [100ms, 30s]). They give up only on an
//     answer that asking again cannot change (a 4xx, such as a wrong Lease
//     name), when ctx ends, or when WaitLeaderFor's timeout passes. Backoff
//     is the same policy for a caller's own loop, on its own clock.
//   - ParseAddr reads an address as a person gives it (HOST:PORT, or an
//     http:// or https:// URL), for New.
//   - A Client is safe for concurrent use. Lease returns a Client for one
//     Lease of a lease group, sharing the connections.
package client
