package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/httpapi"
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
		client, err := cf.client()
		if err != nil {
			return usageError(e, c, err.Error())
		}
		defer client.close()
		return waitLeader(e, client, cf.path("/v1/leader", "/leader"), *timeout, cf.output)
	}
	return c
}

// waitLeader asks GET path?wait= (/v1/leader, or a Lease's of a group)
// until this instance leads or timeout (0: none) has passed.
func waitLeader(e *env, client *sidecarClient, path string, timeout time.Duration, output string) int {
	start := e.now()
	remaining := func() time.Duration {
		if timeout == 0 {
			return maxLeaderWait
		}
		return timeout - e.now().Sub(start)
	}
	var (
		problem error // why the last request got no usable answer; nil after a status
		last    httpapi.Status
		backoff = minRetry
	)
	for {
		left := remaining()
		if left <= 0 {
			break
		}
		wait := min(left, maxLeaderWait).Truncate(time.Millisecond)
		q := url.Values{"wait": {wait.String()}}
		a, err := client.do(e.ctx, http.MethodGet, path, q, wait+waitSlack)
		if e.ctx.Err() != nil {
			return failed(e, "wait", e.ctx.Err())
		}
		var delay time.Duration
		switch {
		case err != nil:
			delay = backoff
		case a.code == http.StatusOK || (a.code == http.StatusServiceUnavailable && errorMessage(a.body) == ""):
			// A status: leading (200), or not leading when the wait ran out (503).
			var st httpapi.Status
			if jerr := json.Unmarshal(a.body, &st); jerr != nil {
				return failed(e, "wait", fmt.Errorf("GET %s: not a status: %v", client.url(path, q), jerr))
			}
			if st.Leader {
				if output == outputJSON {
					_, _ = e.stdout.Write(a.body)
				} else {
					fmt.Fprintf(e.stdout, "leading: term %d, fencing token %s, valid for %v (until %s)\n",
						st.Term, st.FencingToken, time.Duration(st.ValidForMs)*time.Millisecond, st.ValidUntil)
				}
				return exitDone
			}
			problem, last, backoff = nil, st, minRetry
			continue
		case a.code == http.StatusServiceUnavailable:
			// An error, such as "shutting down": ask again after its Retry-After.
			err = client.refused(http.MethodGet, path, a)
			delay = retryAfter(a.header.Get("Retry-After"), e.now(), backoff)
		default:
			return failed(e, "wait", client.refused(http.MethodGet, path, a))
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
	var d time.Duration
	if secs, err := strconv.ParseUint(header, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		d = time.Duration(min(secs, uint64(maxRetryAfter/time.Second))) * time.Second
	} else if at, err := http.ParseTime(header); err == nil {
		d = at.Sub(now)
	} else {
		return def
	}
	return min(max(d, minRetry), maxRetryAfter)
}
