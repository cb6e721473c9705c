package httpapi

import (
	"net/http"
	"time"
)

// retryAfter is the Retry-After of the 503 that blocking requests get once
// EndBlockingRequests has been called. The sidecar calls it just before it
// closes its servers, and gives the requests still open at most 2 s to
// finish (cmd/sidecar httpShutdownTimeout); by 2 s later this process's
// listeners are closed, so a client that honours the header meets a
// restarted sidecar or a refused connection, never this dying process
// again, and one of a restarted container is back within a couple of
// seconds. It is whole seconds (the header's delta-seconds form), ≥ 1.
const retryAfter = 2 * time.Second

// BeginShutdown is the first step of a shutdown: /readyz fails from now on.
// Nothing else changes: blocking requests go on waiting and are woken by
// every change, so that clients see the changes the election publishes
// while it steps down and releases the Lease (leader:false first of all).
// Call EndBlockingRequests once the election has stopped. It is idempotent.
func (s *Server) BeginShutdown() {
	s.shutdownOnce.Do(func() { close(s.shutdown) })
}

// EndBlockingRequests is the second step of a shutdown, for after the
// election has stopped: it implies BeginShutdown, and it ends every open
// blocking request promptly, so that http.Server.Shutdown is not held up by
// them. From then on:
//
//   - a request whose answer is ready, because the client has not seen the
//     current state (a long-poll without index or with another index, an
//     SSE stream without Last-Event-ID or with another one, a leader wait
//     while leading), is answered with it as before; an SSE stream then
//     ends after that one event. No client misses a change this way.
//   - a request that would wait (a long-poll at the current index, an SSE
//     stream that has seen the current state, a leader wait while not
//     leading) is answered at once with 503, Retry-After and a JSON error
//     saying that the sidecar is shutting down. Open long-polls and leader
//     waits end with the same 503, unless the state changed since the
//     client's index (they then answer 200 with it); open SSE streams send
//     any change they have not sent yet and end.
//   - open holds (POST /v1/hold) end: the election that waited for them
//     has stopped, so they protect nothing any more. A new hold is
//     answered 503 with Retry-After.
//
// Non-blocking requests answer as before. It is idempotent.
func (s *Server) EndBlockingRequests() {
	s.BeginShutdown()
	s.endOnce.Do(func() { close(s.ended) })
}

// shuttingDown reports whether BeginShutdown has been called.
func (s *Server) shuttingDown() bool { return closed(s.shutdown) }

// blockingEnded reports whether EndBlockingRequests has been called.
func (s *Server) blockingEnded() bool { return closed(s.ended) }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// refuseBlocking answers a blocking request after EndBlockingRequests: 503
// with Retry-After and a JSON error (code shutting_down). X-Leasehold-Index is the latest Index
// (set by withIndex).
func refuseBlocking(w http.ResponseWriter) {
	writeError(w, http.StatusServiceUnavailable, codeShuttingDown,
		"shutting down: this sidecar no longer serves blocking requests; retry after "+retryAfter.String())
}
