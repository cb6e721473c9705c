package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/elect"
)

// handleWatch serves GET /v1/watch?index=N&wait=D, a Consul-style blocking
// query: when the current Index differs from N (or N is absent) it answers
// at once; otherwise it blocks until the Index changes or D (default 5m,
// ≤ 10m) plus up to D/16 of random jitter has passed. It answers 200 with
// the current status either way: a return does not promise a change. Once
// EndBlockingRequests has been called, a request that would block is
// answered 503 instead (see EndBlockingRequests).
//
// With Accept: text/event-stream it serves Server-Sent Events instead (see
// stream).
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	q, err := queryOf(r)
	if err != nil {
		badParameter(w, err)
		return
	}
	wait, err := q.duration("wait", defaultWatchWait, maxWait)
	if err != nil {
		badParameter(w, err)
		return
	}
	index, hasIndex, err := q.index("index")
	if err != nil {
		badParameter(w, err)
		return
	}
	wait += jitter(wait)

	if acceptsEventStream(r) {
		if id, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64); err == nil {
			index, hasIndex = id, true
		}
		s.stream(w, r, wait, index, hasIndex)
		return
	}

	snap := s.election.Snapshot()
	if hasIndex {
		var ok bool
		if snap, ok = s.block(w, r, snap, wait, func(snap *elect.Snapshot) bool {
			return snap.Index != index
		}); !ok {
			return
		}
	}
	respond(w, http.StatusOK, snap, s.statusOf(snap))
}

// sseRetry is the reconnection time that every SSE stream sends first
// (the retry field). A stream ends after its wait, and the client then
// reconnects with Last-Event-ID and misses no change, only sees it up to
// sseRetry late; or when the sidecar shuts down, and a restarted one is
// back within a couple of seconds. One second keeps the first case prompt
// without making a client of a dead sidecar reconnect in a tight loop.
const sseRetry = time.Second

// jitter is a random duration in [0, wait/16], which spreads the returns,
// and so the reconnects, of watchers that started together.
func jitter(wait time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(wait/16) + 1))
}

// waitEnd is how a wait of await ended.
type waitEnd int

const (
	// answered: done holds for the Snapshot returned, or the wait ran out.
	// Answer with the Snapshot.
	answered waitEnd = iota
	// blockingEnded: EndBlockingRequests was called (before or during the
	// wait) and done does not hold. Answer with refuseBlocking.
	blockingEnded
	// clientGone: the request's context ended. Answer nothing.
	clientGone
)

// await blocks until done holds for the latest Snapshot (checked first with
// snap, then after each change), wait has passed, or EndBlockingRequests is
// called, and returns the latest Snapshot and how the wait ended. Once
// EndBlockingRequests has been called it never blocks: it answers with a
// Snapshot for which done holds, or ends with blockingEnded. It returns at
// once when ctx ends. It waits on Snapshot.Changed: it never polls.
func (s *Server) await(ctx context.Context, snap *elect.Snapshot, wait time.Duration, done func(*elect.Snapshot) bool) (*elect.Snapshot, waitEnd) {
	if done(snap) {
		return snap, answered
	}
	if s.blockingEnded() {
		return snap, blockingEnded
	}
	s.watchers.Add(1)
	defer s.watchers.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for !done(snap) {
		select {
		case <-snap.Changed():
			snap = s.election.Snapshot()
		case <-timer.C:
			return s.election.Snapshot(), answered
		case <-s.ended:
			// A change published meanwhile is still delivered: no client
			// misses one (leader:false first of all) because of the end.
			if snap = s.election.Snapshot(); done(snap) {
				return snap, answered
			}
			return snap, blockingEnded
		case <-ctx.Done():
			return nil, clientGone
		}
	}
	return snap, answered
}

// block awaits done for a handler (see await). It returns false when the
// handler must not answer any more: the client left, or blocking requests
// have ended, and then it has answered 503 with Retry-After itself.
func (s *Server) block(w http.ResponseWriter, r *http.Request, snap *elect.Snapshot, wait time.Duration, done func(*elect.Snapshot) bool) (*elect.Snapshot, bool) {
	snap, end := s.await(r.Context(), snap, wait, done)
	switch end {
	case clientGone:
		return nil, false
	case blockingEnded:
		refuseBlocking(w)
		return nil, false
	}
	return snap, true
}

// stream serves Server-Sent Events: first a retry field (sseRetry, in
// milliseconds) on its own, which sets an EventSource's reconnection time
// and dispatches no event; then the current state, unless the client has
// seen it (Last-Event-ID, or else the index parameter, equals the current
// Index); then one event per change of Index:
//
//	id: <index>
//	event: status
//	data: <status JSON>
//
// The event is named status, so a browser's EventSource delivers it to
// addEventListener("status", ...), never to onmessage (which receives only
// unnamed events).
// and a comment line every heartbeat interval. Changes that follow each
// other faster than the client reads are coalesced into the latest state.
// The stream ends after wait, when the client leaves, or on
// EndBlockingRequests (after sending any change it has not sent yet); an
// EventSource then reconnects with Last-Event-ID. Once EndBlockingRequests
// has been called, a client that has seen the current state is answered
// 503 (refuseBlocking), and one that has not gets it as the stream's only
// event.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, wait time.Duration, seen uint64, hasSeen bool) {
	rc := http.NewResponseController(w)
	snap := s.election.Snapshot()
	if s.blockingEnded() && hasSeen && seen == snap.Index {
		refuseBlocking(w)
		return
	}
	setIndex(w, snap)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // tell proxies not to buffer
	w.WriteHeader(http.StatusOK)

	s.watchers.Add(1)
	defer s.watchers.Add(-1)

	_, err := fmt.Fprintf(w, "retry: %d\n\n", sseRetry.Milliseconds())
	if err == nil {
		if hasSeen && seen == snap.Index {
			err = rc.Flush() // send the headers and retry: the stream is open
		} else {
			err = s.sendEvent(w, rc, snap)
		}
	}
	if s.blockingEnded() {
		return // the state the client had not seen, and no waiting
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	heartbeat := time.NewTicker(s.heartbeat)
	defer heartbeat.Stop()
	for err == nil {
		select {
		case <-snap.Changed():
			snap = s.election.Snapshot()
			err = s.sendEvent(w, rc, snap)
		case <-heartbeat.C:
			if _, err = fmt.Fprint(w, ": heartbeat\n\n"); err == nil {
				err = rc.Flush()
			}
		case <-timer.C:
			return
		case <-s.ended:
			if latest := s.election.Snapshot(); latest.Index != snap.Index {
				_ = s.sendEvent(w, rc, latest) // a change not sent yet: no client misses one
			}
			return
		case <-r.Context().Done():
			return
		}
	}
	s.log.Debug("event stream ended", "err", err)
}

// sendEvent writes and flushes one status event for snap, judged now.
func (s *Server) sendEvent(w http.ResponseWriter, rc *http.ResponseController, snap *elect.Snapshot) error {
	data, err := json.Marshal(s.statusOf(snap))
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "id: %d\nevent: status\ndata: %s\n\n", snap.Index, data); err != nil {
		return err
	}
	return rc.Flush()
}

// acceptsEventStream reports whether r's Accept header lists
// text/event-stream.
func acceptsEventStream(r *http.Request) bool {
	for _, accept := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(accept, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}
