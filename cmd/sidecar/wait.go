package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
	"github.com/leasehold/leasehold/pkg/client"
)

// Waiting for leadership: each request asks the sidecar to block at most
// maxLeaderWait (the API allows 10m), and is given up waitSlack after that.
const (
	maxLeaderWait = 5 * time.Minute
	waitSlack     = 5 * time.Second
)

// Retrying a sidecar that does not answer, or answers with an error (503
// while it shuts down): after minRetry, doubling up to maxRetry, or after
// its Retry-After, within [minRetry, maxRetryAfter].
const (
	minRetry      = 100 * time.Millisecond
	maxRetry      = time.Second
	maxRetryAfter = 30 * time.Second
)

// waitCommand is `leasehold wait`: block on GET /v1/leader?wait= until this
// instance leads.
func waitCommand() *command {
	c := &command{
		name:    "wait",
		summary: "wait until this instance leads (GET /v1/leader?wait=)",
		usage:   "leasehold wait [--timeout DURATION] [--addr HOST:PORT] [-o text|json]",
	}
	flags := func(getenv func(string) string) (*flag.FlagSet, *clientFlags, *time.Duration) {
		fs, cf := clientCommandFlags(c.name, getenv, "text (one line) or json (the API's status, verbatim)")
		timeout := fs.Duration("timeout", 0, "give up, with exit status 1, if this instance does not lead within `DURATION` (0: wait as long as it takes)")
		return fs, cf, timeout
	}
	c.help = func(w io.Writer, getenv func(string) string) {
		fs, _, _ := flags(getenv)
		printCommandHelp(w, c, `
Waits until this instance is the valid leader, then prints its term, fencing
token and validity and exits 0. It blocks on the sidecar (one request at a
time, no polling). While the sidecar does not answer, or answers with an
error (it is shutting down or restarting), it says so once on stderr and asks
again after a short backoff, until --timeout.

  leasehold wait --timeout 5m && run-the-leader-only-job`, fs, clientExitStatuses)
	}
	c.run = func(args []string, e *env) int {
		fs, cf, timeout := flags(e.getenv)
		if status, done := parseFlags(fs, c, args, e); done {
			return status
		}
		if *timeout < 0 {
			return usageError(e, c, fmt.Sprintf("--timeout %v: must not be negative", *timeout))
		}
		sc, err := cf.client()
		if err != nil {
			return usageError(e, c, err.Error())
		}
		defer sc.close()
		return waitLeader(e, sc, *timeout, cf.output)
	}
	return c
}

// waitLeader asks GET /v1/leader?wait= (or a Lease's of a group) until
// this instance leads or timeout (0: none) has passed, at least once.
func waitLeader(e *env, sc *sidecarClient, timeout time.Duration, output string) int {
	start := e.now()
	remaining := func() time.Duration {
		if timeout == 0 {
			return maxLeaderWait
		}
		return timeout - e.now().Sub(start)
	}
	var (
		problem error // why the last request got no usable answer; nil after a status
		last    api.Status
		backoff = minRetry
	)
	for asked := false; ; asked = true {
		left := remaining()
		if left <= 0 && asked {
			break
		}
		// Asked at least once, even when the timeout is spent before the
		// first request (a leader with --timeout 1ms exits 0).
		wait := max(min(left, maxLeaderWait), 0).Truncate(time.Millisecond)
		var st api.Status
		err := call(e.ctx, wait+waitSlack, func(ctx context.Context) (err error) {
			st, err = sc.Leader(ctx, wait)
			return err
		})
		if e.ctx.Err() != nil {
			return failed(e, "wait", e.ctx.Err())
		}
		refused, isAnswer := errors.AsType[*client.Error](err)
		_, unreachable := errors.AsType[*unreachableError](err)
		var delay time.Duration
		switch {
		case err == nil && st.Leader:
			if output == outputJSON {
				_, _ = e.stdout.Write(sc.last)
			} else {
				fmt.Fprintf(e.stdout, "leading: term %d, fencing token %s, valid for %v (until %s)\n",
					st.Term, st.FencingToken, time.Duration(st.ValidForMs)*time.Millisecond, st.ValidUntil)
			}
			return exitDone
		case err == nil:
			// Not leading when the wait ran out (503 with a status).
			problem, last, backoff = nil, st, minRetry
			continue
		case unreachable:
			delay = backoff
		case isAnswer && refused.StatusCode == http.StatusServiceUnavailable:
			// An error, such as "shutting down": ask again after its Retry-After.
			delay = retryAfter(refused.Header.Get("Retry-After"), e.now(), backoff)
		default:
			return failed(e, "wait", err) // another answer, or one that is not a status
		}
		if problem == nil {
			fmt.Fprintf(e.stderr, "leasehold wait: %v; asking again\n", err)
		}
		problem = err
		timer := time.NewTimer(min(delay, max(remaining(), 0)))
		select {
		case <-e.ctx.Done():
			timer.Stop()
			return failed(e, "wait", e.ctx.Err())
		case <-timer.C:
		}
		backoff = min(2*backoff, maxRetry)
	}
	if problem != nil {
		return failed(e, "wait", fmt.Errorf("gave up after %v: %w", timeout, problem))
	}
	holder := last.Holder
	if holder == "" {
		holder = "none"
	}
	fmt.Fprintf(e.stderr, "leasehold wait: not leading after %v (holder: %s)\n", timeout, holder)
	return exitNotLeader
}

// retryAfter is how long to wait for a Retry-After header (delta-seconds or
// an HTTP date, judged by now), within [minRetry, maxRetryAfter]; def when
// the header is absent or does not parse.
func retryAfter(header string, now time.Time, def time.Duration) time.Duration {
	d, ok := client.ParseRetryAfter(header, now)
	if !ok {
		return def
	}
	return min(max(d, minRetry), maxRetryAfter)
}
