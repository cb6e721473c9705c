package client

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
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
	return c.WaitLeaderFor(ctx, 0, nil)
}

// WaitLeaderFor is WaitLeader for at most timeout (0: as long as it
// takes). Each request asks the sidecar to block for what is left of
// timeout, at most DefaultWait, and it asks at least once, however short
// timeout is (a leader then answers at once). When timeout passes first,
// the error is a *TimeoutError.
//
// retrying, if not nil, is called with each failure that would be asked
// again after a backoff (no answer, an answer other than a status and not
// a 4xx), before the delay; first says whether it is the first failure
// since the start or since the last status. When it returns false,
// WaitLeaderFor gives up and returns err.
func (c *Client) WaitLeaderFor(ctx context.Context, timeout time.Duration, retrying func(err error, first bool) bool) (api.Status, error) {
	start := time.Now()
	left := func() time.Duration {
		if timeout == 0 {
			return DefaultWait
		}
		return timeout - time.Since(start)
	}
	var (
		r    retry
		last api.Status // the last status answered
	)
	for asked := false; ; asked = true {
		remaining := left()
		if remaining <= 0 && asked {
			return api.Status{}, &TimeoutError{Timeout: timeout, Status: last, Err: r.last}
		}
		wait := min(max(remaining, 0), DefaultWait).Truncate(time.Millisecond)
		st, err := c.leaderWithin(ctx, wait)
		switch {
		case ctx.Err() != nil:
			return api.Status{}, r.ended(ctx)
		case err == nil && st.Leader:
			return st, nil
		case err == nil:
			last = st
			r.succeeded()
			continue
		case permanent(err), retrying != nil && !retrying(err, r.last == nil):
			return api.Status{}, err
		}
		if !r.wait(ctx, err, left()) {
			return api.Status{}, r.ended(ctx)
		}
	}
}

// leaderWithin is Leader(ctx, wait), given up after blockingTimeout(wait)
// even when wait is 0 and the client has no timeout.
func (c *Client) leaderWithin(ctx context.Context, wait time.Duration) (api.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, blockingTimeout(wait))
	defer cancel()
	return c.Leader(ctx, wait)
}

// TimeoutError is WaitLeaderFor's error when its timeout passed before this
// instance led.
type TimeoutError struct {
	Timeout time.Duration
	// Status is the last status the sidecar answered; zero if none.
	Status api.Status
	// Err is the last request's failure; nil when it got a status (this
	// instance was not leading when the wait ran out).
	Err error
}

// Error is "not leading after TIMEOUT (holder: H)", or "gave up after
// TIMEOUT: ERR" when the last request failed.
func (e *TimeoutError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("gave up after %v: %v", e.Timeout, e.Err)
	}
	holder := e.Status.Holder
	if holder == "" {
		holder = "none"
	}
	return fmt.Sprintf("not leading after %v (holder: %s)", e.Timeout, holder)
}

// Unwrap is the last request's failure, if any.
func (e *TimeoutError) Unwrap() error { return e.Err }

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
				if ctx.Err() != nil || !yield(api.Status{}, err) || permanent(err) || !r.wait(ctx, err, MaxRetryAfter) {
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
				if ctx.Err() != nil || !yield(api.Leases{}, err) || permanent(err) || !r.wait(ctx, err, MaxRetryAfter) {
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
