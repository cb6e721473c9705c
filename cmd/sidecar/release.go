package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
	"github.com/leasehold/leasehold/pkg/client"
)

// releaseTimeout bounds POST /v1/release: the sidecar answers once the
// release is written, which waits for open holds on the term (at most
// until its validity ends, renewDeadline after the last renewal) and one
// write to the apiserver.
const releaseTimeout = time.Minute

// releaseCommand is `leasehold release`: POST /v1/release[?for=D][&to=ID].
func releaseCommand() *command {
	c := &command{
		name:    "release",
		summary: "step down, release the Lease and stay out for a while (POST /v1/release)",
		usage:   "leasehold release [--for DURATION] [--to IDENTITY] [--addr HOST:PORT] [-o text|json]",
	}
	flags := func(getenv func(string) string) (*flag.FlagSet, *clientFlags, *time.Duration, *string) {
		fs, cf := clientCommandFlags(c.name, getenv, "text (one line) or json (the API's answer, verbatim)")
		stayOut := fs.Duration("for", 0, "stay out of the election for `DURATION` (default: the sidecar's lease duration; at most 1h)")
		to := fs.String("to", "", "hand the Lease to the member with this `IDENTITY` (a lease group, or LEASEHOLD_HANDOVER=successor); nothing is released if it is not a live member")
		return fs, cf, stayOut, to
	}
	c.help = func(w io.Writer, getenv func(string) string) {
		fs, _, _, _ := flags(getenv)
		printCommandHelp(w, c, `
If this instance leads, it stops claiming leadership at once and releases the
Lease, so that another candidate takes over within a round trip; leading or
not, it then stays out of the election for --for. With --to, the release is
handed to that member, which takes the Lease first. It exits 0 once the sidecar
has done so (idempotent: releasing again, or when not leading, also exits 0).
Open holds on the term (POST /v1/hold, 'leasehold run' while its command runs)
delay the release until they end, at most until the term's validity ends.

For a preStop hook on the leasehold container itself (no curl needed):
  lifecycle: {preStop: {exec: {command: ["/leasehold", "release", "--for", "1h"]}}}`, fs, clientExitStatuses)
	}
	c.run = func(args []string, e *env) int {
		fs, cf, stayOut, to := flags(e.getenv)
		if status, done := parseFlags(fs, c, args, e); done {
			return status
		}
		forDuration := client.DefaultStayOut // the sidecar's default: no ?for=
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "for" })
		if set {
			if *stayOut < 0 {
				return usageError(e, c, fmt.Sprintf("--for %v: must not be negative", *stayOut))
			}
			forDuration = *stayOut
		}
		sc, err := cf.client()
		if err != nil {
			return usageError(e, c, err.Error())
		}
		defer sc.close()
		var r api.Release
		err = call(e.ctx, releaseTimeout, func(ctx context.Context) (err error) {
			r, err = sc.ReleaseTo(ctx, forDuration, *to)
			return err
		})
		if err != nil {
			return failed(e, c.name, err)
		}
		if cf.output == outputJSON {
			_, _ = e.stdout.Write(sc.last)
			return exitDone
		}
		out := "the sidecar's lease duration"
		if set {
			out = stayOut.String()
		}
		lease := r.Namespace + "/" + r.Lease
		if r.Released {
			fmt.Fprintf(e.stdout, "released the Lease %s; out of the election for %s\n", lease, out)
		} else {
			fmt.Fprintf(e.stdout, "not holding the Lease %s: nothing to release; out of the election for %s\n", lease, out)
		}
		return exitDone
	}
	return c
}
