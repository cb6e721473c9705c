package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
)

// Retrying: an unreachable sidecar after minBackoff, doubling up to
// maxBackoff; a 503 after its Retry-After, within [minBackoff,
// maxRetryAfter].
const (
	minBackoff    = 100 * time.Millisecond
	maxBackoff    = time.Second
	maxRetryAfter = 30 * time.Second
)

// WaitLeader blocks until this instance is the valid leader, and returns
// that status. It asks GET /v1/leader?wait= (for a Lease of a group, GET
// /v1/leases/{lease}/leader?wait=), one blocking request at a time, never
// polling. While the sidecar does not answer, or answers 503 with an error
// (it is shutting down or restarting), it asks again after a backoff or the
// Retry-After. It returns an error when ctx ends (wrapping ctx's error, and
// naming the last failure if the last request failed), or for an answer
// that asking again cannot change (a 4xx, such as ErrLeaseGroup).
//
// The status says leader at the moment the sidecar answered: ask Token
// before each write.
func (c *Client) WaitLeader(ctx context.Context) (api.Status, error) {
	var r retry
	for {
		st, err := c.Leader(ctx, DefaultWait)
		switch {
		case ctx.Err() != nil:
			return api.Status{}, r.ended(ctx)
		case err == nil && st.Leader:
			return st, nil
		case err == nil:
			r.succeeded()
			continue
		case permanent(err):
			return api.Status{}, err
		}
		if !r.wait(ctx, err) {
			return api.Status{}, r.ended(ctx)
		}
	}
}

// Watch follows the state of the Lease with blocking queries (Poll, with
// DefaultWait): it yields the current status at once, then each status
// whose Index differs from the last one yielded, so every change of leader,
// holder, term or fencing token, and nothing else. An Index that goes
// backwards (a restarted sidecar, a clock set back) is a change: the watch
// carries on from it. A sidecar that does not answer, or answers with an
// error, is yielded as (zero Status, error), and asked again after a
// backoff or the 503's Retry-After; an answer that asking again cannot
// change (a 4xx, ErrUnknownLease) is yielded and ends the sequence. The
// sequence ends when ctx ends (without yielding ctx's error) or the loop
// breaks. Each range over it starts a watch of its own.
//
// For a Lease of a group it follows GET /v1/leases, and still yields only
// when that Lease's own Index changes.
func (c *Client) Watch(ctx context.Context) iter.Seq2[api.Status, error] {
	return func(yield func(api.Status, error) bool) {
		var (
			r       retry
			index   uint64 // what the next Poll blocks on; 0: answer at once
			last    uint64 // the Index last yielded
			yielded bool
		)
		for ctx.Err() == nil {
			st, next, err := c.Poll(ctx, index, DefaultWait)
			if err != nil {
				if ctx.Err() != nil || !yield(api.Status{}, err) || permanent(err) || !r.wait(ctx, err) {
					return
				}
				continue
			}
			r.succeeded()
			index = next
			if !yielded || st.Index != last {
				yielded, last = true, st.Index
				if !yield(st, nil) {
					return
				}
			}
		}
	}
}

// WatchLeases follows GET /v1/leases as Watch follows a Lease: it yields
// the group's Leases at once, then whenever the group's Index changes (any
// Lease's state, or the member count), with the same retries and ending.
func (c *Client) WatchLeases(ctx context.Context) iter.Seq2[api.Leases, error] {
	return func(yield func(api.Leases, error) bool) {
		var (
			r       retry
			index   uint64
			yielded bool
		)
		for ctx.Err() == nil {
			all, err := c.pollLeases(ctx, index, DefaultWait)
			if err != nil {
				if ctx.Err() != nil || !yield(api.Leases{}, err) || permanent(err) || !r.wait(ctx, err) {
					return
				}
				continue
			}
			r.succeeded()
			if !yielded || all.Index != index {
				yielded, index = true, all.Index
				if !yield(all, nil) {
					return
				}
			}
		}
	}
}

// retry paces the requests of a loop after failures.
type retry struct {
	backoff time.Duration // the next backoff; 0: minBackoff
	last    error         // the last failure; nil after a success
}

// succeeded notes an answer: the next failure starts the backoff over.
func (r *retry) succeeded() { r.backoff, r.last = 0, nil }

// wait sleeps before asking again after err (delay), and reports false if
// ctx ended first.
func (r *retry) wait(ctx context.Context, err error) bool {
	timer := time.NewTimer(r.delay(err, time.Now()))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// delay notes the failure err and returns how long to wait before asking
// again: its Retry-After, judged at now, for a 503 that has one (within
// [minBackoff, maxRetryAfter]), else the backoff, which then doubles up to
// maxBackoff.
func (r *retry) delay(err error, now time.Time) time.Duration {
	r.last = err
	r.backoff = max(r.backoff, minBackoff)
	d := r.backoff
	if e, ok := errors.AsType[*Error](err); ok && e.StatusCode == http.StatusServiceUnavailable {
		if ra, ok := e.RetryAfter(now); ok {
			d = min(max(ra, minBackoff), maxRetryAfter)
		}
	}
	r.backoff = min(2*r.backoff, maxBackoff)
	return d
}

// ended is the error of a loop that ctx ended: ctx's, with the last
// failure if the last request failed.
func (r *retry) ended(ctx context.Context) error {
	if r.last != nil {
		return fmt.Errorf("%w (the last request failed: %v)", ctx.Err(), r.last)
	}
	return ctx.Err()
}
