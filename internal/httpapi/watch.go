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
	"github.com/leasehold/leasehold/internal/group"
)

// handleWatch serves GET /v1/watch?index=N&wait=D, a Consul-style blocking
// query on el: when the current Index differs from N (or N is absent) it
// answers at once; otherwise it blocks until the Index changes or D
// (default 5m, ≤ 10m) plus up to D/16 of random jitter has passed. It
// answers 200 with the current status either way: a return does not
// promise a change. Once EndBlockingRequests has been called, a request
// that would block is answered 503 instead (see EndBlockingRequests).
//
// With Accept: text/event-stream it serves Server-Sent Events instead (see
// stream).
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, el Election) {
	watch(s, w, r, s.electionSource(el))
}

// snapshot is what a blocking request waits on: an immutable state whose
// Changed channel is closed once a state with a larger Index has been
// published. *elect.Snapshot and *group.Snapshot are both.
type snapshot interface {
	Changed() <-chan struct{}
}

// source is a publisher of snapshots S that blocking requests watch, and
// how to present them.
type source[S snapshot] struct {
	latest func() S       // the latest published snapshot; never nil
	index  func(S) uint64 // its Index
	event  string         // the name of its SSE events
	body   func(S) any    // its JSON body, judged now (by the Server's clock)
}

// electionSource watches el; its body is the Status and its SSE event
// status.
func (s *Server) electionSource(el Election) source[*elect.Snapshot] {
	return source[*elect.Snapshot]{
		latest: el.Snapshot,
		index:  func(snap *elect.Snapshot) uint64 { return snap.Index },
		event:  "status",
		body:   func(snap *elect.Snapshot) any { return s.statusOf(snap) },
	}
}

// groupSource watches the group; its body is Leases and its SSE event
// leases.
func (s *Server) groupSource() source[*group.Snapshot] {
	return source[*group.Snapshot]{
		latest: s.group.Snapshot,
		index:  func(snap *group.Snapshot) uint64 { return snap.Index },
		event:  "leases",
		body:   func(snap *group.Snapshot) any { return s.leasesOf(snap) },
	}
}

// watch serves a blocking query on src, long-poll or (with Accept:
// text/event-stream) Server-Sent Events: see handleWatch.
func watch[S snapshot](s *Server, w http.ResponseWriter, r *http.Request, src source[S]) {
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
		stream(s, w, r, src, wait, index, hasIndex)
		return
	}

	snap := src.latest()
	if hasIndex {
		var ok bool
		if snap, ok = block(s, w, r, src, snap, wait, func(snap S) bool {
			return src.index(snap) != index
		}); !ok {
			return
		}
	}
	setIndexOf(w, src.index(snap))
	writeJSON(w, http.StatusOK, src.body(snap))
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
	// tooMany: done does not hold, and the listener already serves its
	// bound of blocking requests (blockingLimit). Answer with
	// refuseTooMany.
	tooMany
)

// await blocks until done holds for src's latest snapshot (checked first
// with snap, then after each change), wait has passed, or
// EndBlockingRequests is called, and returns the latest snapshot and how
// the wait ended. Once EndBlockingRequests has been called it never
// blocks: it answers with a snapshot for which done holds, or ends with
// blockingEnded. It waits only with a slot of the listener's blockingLimit
// (ctx's), and ends with tooMany when none is free; done holding at once
// needs none. It returns at once when ctx ends. It waits on the
// snapshots' Changed: it never polls.
func await[S snapshot](s *Server, ctx context.Context, src source[S], snap S, wait time.Duration, done func(S) bool) (S, waitEnd) {
	if done(snap) {
		return snap, answered
	}
	if s.blockingEnded() {
		return snap, blockingEnded
	}
	limit := limitOf(ctx)
	if !limit.acquire() {
		return snap, tooMany
	}
	defer limit.release()
	s.watchers.Add(1)
	defer s.watchers.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for !done(snap) {
		select {
		case <-snap.Changed():
			snap = src.latest()
		case <-timer.C:
			return src.latest(), answered
		case <-s.ended:
			// A change published meanwhile is still delivered: no client
			// misses one (leader:false first of all) because of the end.
			if snap = src.latest(); done(snap) {
				return snap, answered
			}
			return snap, blockingEnded
		case <-ctx.Done():
			var none S
			return none, clientGone
		}
	}
	return snap, answered
}

// block awaits done for a handler (see await). It returns false when the
// handler must not answer any more: the client left, or blocking requests
// have ended or the listener's bound is full, and then it has answered 503
// with Retry-After itself.
func block[S snapshot](s *Server, w http.ResponseWriter, r *http.Request, src source[S], snap S, wait time.Duration, done func(S) bool) (S, bool) {
	snap, end := await(s, r.Context(), src, snap, wait, done)
	var none S
	switch end {
	case clientGone:
		return none, false
	case blockingEnded:
		refuseBlocking(w)
		return none, false
	case tooMany:
		refuseTooMany(w, r)
		return none, false
	}
	return snap, true
}

// stream serves Server-Sent Events of src: first a retry field (sseRetry,
// in milliseconds) on its own, which sets an EventSource's reconnection
// time and dispatches no event; then the current state, unless the client
// has seen it (Last-Event-ID, or else the index parameter, equals the
// current Index); then one event per change of Index:
//
//	id: <index>
//	event: <src.event: status of an election, leases of the group>
//	data: <src.body JSON: the status, or the group's Leases>
//
// The event is named, so a browser's EventSource delivers it to
// addEventListener("status", ...) (or "leases"), never to onmessage (which
// receives only unnamed events);
// and a comment line every heartbeat interval. Changes that follow each
// other faster than the client reads are coalesced into the latest state.
// The stream ends after wait, when the client leaves, or on
// EndBlockingRequests (after sending any change it has not sent yet); an
// EventSource then reconnects with Last-Event-ID. Once EndBlockingRequests
// has been called, a client that has seen the current state is answered
// 503 (refuseBlocking), and one that has not gets it as the stream's only
// event. Before that, every stream waits, so it needs a slot of the
// listener's blockingLimit: without a free one it is answered 503
// (refuseTooMany) before anything is sent.
func stream[S snapshot](s *Server, w http.ResponseWriter, r *http.Request, src source[S], wait time.Duration, seen uint64, hasSeen bool) {
	rc := http.NewResponseController(w)
	snap := src.latest()
	ended := s.blockingEnded()
	if ended && hasSeen && seen == src.index(snap) {
		refuseBlocking(w)
		return
	}
	if !ended {
		limit := limitOf(r.Context())
		if !limit.acquire() {
			refuseTooMany(w, r)
			return
		}
		defer limit.release()
	}
	setIndexOf(w, src.index(snap))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // tell proxies not to buffer
	w.WriteHeader(http.StatusOK)

	s.watchers.Add(1)
	defer s.watchers.Add(-1)

	_, err := fmt.Fprintf(w, "retry: %d\n\n", sseRetry.Milliseconds())
	if err == nil {
		if hasSeen && seen == src.index(snap) {
			err = rc.Flush() // send the headers and retry: the stream is open
		} else {
			err = sendEvent(w, rc, src, snap)
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
			snap = src.latest()
			err = sendEvent(w, rc, src, snap)
		case <-heartbeat.C:
			if _, err = fmt.Fprint(w, ": heartbeat\n\n"); err == nil {
				err = rc.Flush()
			}
		case <-timer.C:
			return
		case <-s.ended:
			if latest := src.latest(); src.index(latest) != src.index(snap) {
				_ = sendEvent(w, rc, src, latest) // a change not sent yet: no client misses one
			}
			return
		case <-r.Context().Done():
			return
		}
	}
	s.log.Debug("event stream ended", "err", err)
}

// sendEvent writes and flushes one event of src for snap, judged now.
func sendEvent[S snapshot](w http.ResponseWriter, rc *http.ResponseController, src source[S], snap S) error {
	data, err := json.Marshal(src.body(snap))
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", src.index(snap), src.event, data); err != nil {
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
