package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
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

// waitLeader waits, through client.WaitLeaderFor, until this instance
// leads or timeout (0: none) has passed, asking at least once. It asks
// again after no answer or a 503 (saying so once on stderr for each run of
// failures), and gives up on any other answer that is not a status.
func waitLeader(e *env, sc *sidecarClient, timeout time.Duration, output string) int {
	st, err := sc.WaitLeaderFor(e.ctx, timeout, func(err error, first bool) bool {
		refused, isAnswer := errors.AsType[*client.Error](err)
		if isAnswer && refused.StatusCode != http.StatusServiceUnavailable {
			return false
		}
		if _, ok := errors.AsType[*url.Error](err); !ok && !isAnswer {
			return false // a 200 that is not a status
		}
		if first {
			fmt.Fprintf(e.stderr, "leasehold wait: %v; asking again\n", noAnswer(err, 0))
		}
		return true
	})
	if e.ctx.Err() != nil {
		return failed(e, "wait", e.ctx.Err())
	}
	if te, ok := errors.AsType[*client.TimeoutError](err); ok {
		if te.Err != nil {
			return failed(e, "wait", fmt.Errorf("gave up after %v: %w", timeout, noAnswer(te.Err, 0)))
		}
		fmt.Fprintf(e.stderr, "leasehold wait: %v\n", te)
		return exitNotLeader
	}
	if err != nil {
		return failed(e, "wait", noAnswer(err, 0))
	}
	if output == outputJSON {
		_, _ = e.stdout.Write(sc.last)
	} else {
		fmt.Fprintf(e.stdout, "leading: term %d, fencing token %s, valid for %v (until %s)\n",
			st.Term, st.FencingToken, time.Duration(st.ValidForMs)*time.Millisecond, st.ValidUntil)
	}
	return exitDone
}
