package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"

	"github.com/leasehold/leasehold/pkg/api"
	"github.com/leasehold/leasehold/pkg/client"
)

// tokenCommand is `leasehold token`: GET /v1/token; the fencing token on
// stdout while this instance leads, exit 1 when it does not.
func tokenCommand() *command {
	c := &command{
		name:    "token",
		summary: "print the fencing token while this instance leads (GET /v1/token)",
		usage:   "leasehold token [--addr HOST:PORT] [-o text|json]",
	}
	flags := func(getenv func(string) string) (*flag.FlagSet, *clientFlags) {
		return clientCommandFlags(c.name, getenv, "text (the token alone) or json (the API's answer: token, term, validity)")
	}
	c.help = func(w io.Writer, getenv func(string) string) {
		fs, _ := flags(getenv)
		printCommandHelp(w, c, `
Prints the fencing token of this instance's term, and exits 0, if it is the
valid leader now; exits 1 with "not leader" on stderr if it is not. Attach the
token to every write and make the storage reject a smaller one
(docs/using.md): a token printed a moment ago may already be stale.

  TOKEN=$(leasehold token) && my-write --fencing-token "$TOKEN"`, fs, clientExitStatuses)
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
		var t api.Token
		err = call(e.ctx, requestTimeout, func(ctx context.Context) (err error) {
			t, err = sc.Token(ctx)
			return err
		})
		if r, ok := errors.AsType[*client.Error](err); ok && r.StatusCode == http.StatusServiceUnavailable {
			msg := r.Message // "not leader" (ErrNotLeader), or why the sidecar cannot say
			if msg == "" {
				msg = "not leader"
			}
			fmt.Fprintf(e.stderr, "leasehold token: %s\n", msg)
			return exitNotLeader
		}
		if err != nil {
			return failed(e, c.name, err)
		}
		if cf.output == outputJSON {
			_, _ = e.stdout.Write(sc.last)
		} else {
			fmt.Fprintln(e.stdout, t.FencingToken)
		}
		return exitDone
	}
	return c
}
