package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The retry policy of every loop that asks the sidecar again after a
// failure (WaitLeader, WaitLeaderFor, Watch, WatchLeases, and Backoff's
// users): an unreachable sidecar, or an answer without a usable
// Retry-After, after MinBackoff, doubling with each failure in a row up to
// MaxBackoff; a 503 after its Retry-After, within [MinBackoff,
// MaxRetryAfter].
const (
	MinBackoff    = 100 * time.Millisecond
	MaxBackoff    = time.Second
	MaxRetryAfter = 30 * time.Second
)

// Backoff paces the requests of a loop after failures, by the policy
// above, on the caller's clock: Delay says how long to wait after a
// failure, Reset notes an answer. The zero Backoff is ready for use; it is
// not safe for concurrent use.
type Backoff struct {
	next time.Duration // the next backoff; 0: MinBackoff
}

// Delay notes the failure err and returns how long to wait before asking
// again, judged at now: for a 503 (an *Error) with a Retry-After, that
// delay within [MinBackoff, MaxRetryAfter] (retryAfter is true); else the
// backoff. Either way the backoff then doubles, up to MaxBackoff.
func (b *Backoff) Delay(err error, now time.Time) (d time.Duration, retryAfter bool) {
	b.next = max(b.next, MinBackoff)
	d = b.next
	if e, ok := errors.AsType[*Error](err); ok && e.StatusCode == http.StatusServiceUnavailable {
		if ra, ok := e.RetryAfter(now); ok {
			d, retryAfter = min(max(ra, MinBackoff), MaxRetryAfter), true
		}
	}
	b.next = min(2*b.next, MaxBackoff)
	return d, retryAfter
}

// Reset notes an answer: the next failure waits MinBackoff (or its
// Retry-After) again.
func (b *Backoff) Reset() { b.next = 0 }

// retry is the Backoff of the package's own loops, on the real clock, with
// the last failure for the error of a loop that ctx ends.
type retry struct {
	Backoff
	last error // the last failure; nil after a success
}

// succeeded notes an answer: the next failure starts the backoff over.
func (r *retry) succeeded() { r.Reset(); r.last = nil }

// wait sleeps before asking again after err (Delay), at most limit, and
// reports false if ctx ended first.
func (r *retry) wait(ctx context.Context, err error, limit time.Duration) bool {
	r.last = err
	d, _ := r.Delay(err, time.Now())
	timer := time.NewTimer(max(min(d, limit), 0))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// ended is the error of a loop that ctx ended: ctx's, with the last
// failure if the last request failed.
func (r *retry) ended(ctx context.Context) error {
	if r.last != nil {
		return fmt.Errorf("%w (the last request failed: %v)", ctx.Err(), r.last)
	}
	return ctx.Err()
}
