package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
)

// requestTimeout bounds a request of status and token.
const requestTimeout = 10 * time.Second

// statusCommand is `leasehold status`: GET /v1/status, as a table or as
// the API's JSON.
func statusCommand() *command {
	c := &command{
		name:    "status",
		summary: "show this instance's view of the election (GET /v1/status)",
		usage:   "leasehold status [--addr HOST:PORT] [-o text|json]",
	}
	flags := func(getenv func(string) string) (*flag.FlagSet, *clientFlags) {
		return clientCommandFlags(c.name, getenv, "text (a table) or json (the API's answer, verbatim)")
	}
	c.help = func(w io.Writer, getenv func(string) string) {
		fs, _ := flags(getenv)
		printCommandHelp(w, c, `
Shows what the sidecar knows: the Lease, this instance's identity, whether it
leads and for how long, the holder, the term and fencing token, whether it is
a candidate, when the Lease was acquired, renewed and last observed, the last
error of the election (a 403, a missing namespace), the app's health when
health-gated candidacy is on, and what the holder's renewals say about its
clock against this instance's (docs/troubleshooting.md, "Clocks"). It exits 0 whenever the sidecar answers, leader
or not: use 'leasehold token' or 'leasehold wait' to test leadership.`, fs, clientExitStatuses)
	}
	c.run = func(args []string, e *env) int {
		fs, cf := flags(e.getenv)
		if status, done := parseFlags(fs, c, args, e); done {
			return status
		}
		sc, err := cf.client()
		if err != nil {
			return usageError(e, c, err.Error())
		}
		defer sc.close()
		var st api.Status
		err = call(e.ctx, requestTimeout, func(ctx context.Context) (err error) {
			st, err = sc.Status(ctx)
			return err
		})
		if err != nil {
			return failed(e, c.name, err)
		}
		if cf.output == outputJSON {
			_, _ = e.stdout.Write(sc.last)
			return exitDone
		}
		printStatus(e.stdout, st, e.now())
		return exitDone
	}
	return c
}

// printStatus writes st as a two-column table, times also relative to now.
func printStatus(w io.Writer, st api.Status, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("lease", st.Namespace+"/"+st.Lease)
	row("identity", st.Identity)
	if st.Leader {
		row("leader", fmt.Sprintf("yes, valid for %v (until %s)", time.Duration(st.ValidForMs)*time.Millisecond, st.ValidUntil))
	} else {
		row("leader", "no")
	}
	switch {
	case st.Holder == "":
		row("holder", "none")
	case st.Holder == st.Identity:
		row("holder", st.Holder+" (this instance)")
	default:
		row("holder", st.Holder)
	}
	row("term", strconv.FormatInt(int64(st.Term), 10))
	row("fencing token", st.FencingToken.String())
	if st.Candidate {
		row("candidate", "yes")
	} else {
		row("candidate", "no (out of the election: released, or the app is unhealthy)")
	}
	row("acquired", when(st.AcquiredAt, now))
	row("renewed", when(st.RenewedAt, now))
	row("observed", when(st.ObservedAt, now))
	if st.LastError == nil {
		row("last error", "none")
	} else {
		row("last error", fmt.Sprintf("%s (%s)", *st.LastError, when(st.LastErrorAt, now)))
	}
	if h := st.AppHealth; h != nil {
		switch {
		case h.Healthy:
			row("app health", fmt.Sprintf("healthy (last checked %s)", when(h.LastCheckAt, now)))
		case h.ConsecutiveSuccesses > 0:
			row("app health", fmt.Sprintf("not healthy yet: %d passed probes in a row, fewer than LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD (last checked %s)",
				h.ConsecutiveSuccesses, when(h.LastCheckAt, now)))
		default:
			row("app health", fmt.Sprintf("unhealthy: %d failed probes in a row, last: %s (last success %s)",
				h.ConsecutiveFailures, h.LastError, when(h.LastSuccessAt, now)))
		}
	}
	if r := st.Rank; r != nil {
		if r.Known {
			row("rank", fmt.Sprintf("generation %q, position %d (probed %s)", r.Generation, r.Position, when(r.ObservedAt, now)))
		} else {
			row("rank", fmt.Sprintf("unknown: ranks last (probed %s)", when(r.ObservedAt, now)))
		}
		row("lease gen", fmt.Sprintf("%q", r.LeaseGeneration))
		if r.BestCandidate != nil {
			row("best member", *r.BestCandidate)
		} else {
			row("best member", "unknown (membership not listed yet)")
		}
	}
	if c := st.HolderClock; c != nil {
		printHolderClock(row, c, now)
	}
	if v := st.ApiserverVersion; v != nil {
		tokens := "resourceVersions comparable: fencing tokens strictly increase"
		if !v.ResourceVersionsComparable {
			tokens = "resourceVersions not promised comparable (before 1.35): see docs/compatibility.md"
		}
		row("apiserver", v.GitVersion+", "+tokens)
	}
	if c := st.ApiserverClock; c != nil {
		row("server clock", fmt.Sprintf("%+dms to %+dms (the apiserver's clock minus this one's, from %d responses, newest %s)",
			c.OffsetLowerMs, c.OffsetUpperMs, c.Responses, when(c.ObservedAt, now)))
	}
	row("index", strconv.FormatUint(st.Index, 10))
	_ = tw.Flush()
}

// printHolderClock writes the rows of the holder's clock as this instance
// measures it (docs/troubleshooting.md, "Clocks"): the offset interval,
// the rate interval once known, and how far that lies from the limit.
func printHolderClock(row func(k, v string), c *api.HolderClock, now time.Time) {
	row("holder clock", fmt.Sprintf("%s, from %d renewals over %v (newest %s)",
		c.Holder, c.Renewals, time.Duration(c.SpanMs)*time.Millisecond, when(c.ObservedAt, now)))
	row("clock offset", fmt.Sprintf("%+dms to %+dms (the holder's clock minus this one's; the upper bound assumes a renewal arrived within %v)",
		c.OffsetLowerMs, c.OffsetUpperMs, time.Duration(c.DelayBoundMs)*time.Millisecond))
	if c.RateLower == nil || c.RateUpper == nil {
		row("clock rate", fmt.Sprintf("not bounded yet (limit ±%.3g)", c.Limit))
		return
	}
	verdict := map[string]string{
		"approaching": "beyond half the limit",
		"beyond":      "BEYOND the limit: a second leader is possible",
	}[c.Level]
	if verdict == "" {
		verdict = "within half the limit"
	}
	row("clock rate", fmt.Sprintf("%.4f to %.4f of this one's (limit 1±%.3g): %s", *c.RateLower, *c.RateUpper, c.Limit, verdict))
}

// when formats an RFC 3339 timestamp of the API with how long ago it was
// (or how far ahead): "-" when absent, the raw value when it does not
// parse.
func when(ts string, now time.Time) string {
	if ts == "" {
		return "-"
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	d := now.Sub(t).Round(time.Millisecond)
	if d < 0 {
		return fmt.Sprintf("%s (in %v)", ts, -d)
	}
	return fmt.Sprintf("%s (%v ago)", ts, d)
}
