// Command demo is `make demo`: leader election in one minute. It starts a
// real etcd + kube-apiserver on loopback and three leasehold sidecars
// (internal/testing/fleet), shows live who leads, with which fencing token, term
// and remaining validity, then SIGKILLs the leader and SIGTERMs the next
// one, and prints the measured failover and handover times.
//
// On a terminal the table is redrawn in place; otherwise (CI, a pipe, or
// -plain) it prints one line per change. It exits non-zero if any check
// fails: no leader in time, a fencing token that does not grow, a second
// leader, a sidecar that does not exit 0 on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	plain := flag.Bool("plain", false, "print one line per change instead of redrawing the table (the default when stdout is not a terminal)")
	flag.Parse()
	os.Exit(run(*plain))
}

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1
	exitInterrupted = 130
)

func run(plain bool) int {
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	out := os.Stdout
	tty := !plain && isTerminal(out)
	width := 100
	if tty {
		width = terminalWidth(out, width)
	}

	fmt.Fprintln(out, "leasehold demo: leader election between three sidecars, against a real kube-apiserver")
	fmt.Fprintf(out, "  Timings: leaseDuration %v, renewDeadline %v, retryPeriod %v (short for the demo; production defaults are 15s/10s/2s).\n",
		leaseDuration, renewDeadline, retryPeriod)
	fmt.Fprintln(out, "  Starting etcd + kube-apiserver on loopback and building the sidecar…")
	began := time.Now()
	st, err := setUp(ctx)
	if err != nil {
		return fail(context.Cause(ctx), "set-up", err)
	}
	fmt.Fprintf(out, "  Ready in %.1fs: kube-apiserver %s, Lease %s/%s. Starting %s…\n",
		time.Since(began).Seconds(), st.cluster.Host(), st.fleet.Namespace, leaseName, joinNames(names...))

	v := newView(out, tty, width, leaseDuration)
	res, err := play(ctx, st, v)
	signalled := context.Cause(ctx) // non-nil if Ctrl-C (or SIGTERM) ended the demo
	stopSignals()                   // from here a second Ctrl-C ends the demo at once; the children die with it (Pdeathsig)
	v.Stop()
	if err == nil {
		res.problems = append(res.problems, v.checkOverlap()...)
		printSummary(out, width, res)
	}

	fmt.Fprintln(out)
	fmt.Fprintln(out, "Stopping the sidecars, kube-apiserver and etcd…")
	failed := (err != nil && signalled == nil) || len(res.problems) > 0
	if stopErr := st.tearDown(failed); stopErr != nil {
		err = errors.Join(err, fmt.Errorf("tear-down: %w", stopErr))
	} else {
		fmt.Fprintln(out, "✓ All stopped; nothing left running.")
	}
	if failed {
		fmt.Fprintf(out, "Sidecar logs kept in %s\n", st.dir)
	}
	switch {
	case err != nil:
		return fail(signalled, "demo", err)
	case len(res.problems) > 0:
		fmt.Fprintf(os.Stderr, "✗ demo failed: %d check(s) failed:\n", len(res.problems))
		for _, p := range res.problems {
			fmt.Fprintln(os.Stderr, "  ✗ "+p)
		}
		return exitFailed
	}
	return exitOK
}

// play starts the sidecars, shows them live and runs the scenario.
func play(ctx context.Context, st *stage, v *view) (results, error) {
	if err := st.startInstances(ctx, names); err != nil {
		return results{}, err
	}
	fmt.Fprintln(v.out, "  TOKEN          the term's fencing token (a follower shows the one the leader published on the Lease)")
	fmt.Fprintln(v.out, "  TERM           the Lease's leaseTransitions: for people, not for fencing")
	fmt.Fprintln(v.out, "  VALID FOR      how long the leader may still act: renewDeadline after the last renewal it sent")
	fmt.Fprintln(v.out, "  LEASE FREE IN  when a follower will judge the Lease expired: leaseDuration after it last saw it change")
	v.Start(ctx, st.instances)
	s := &scenario{v: v, instances: st.instances}
	err := s.run(ctx)
	return s.res, err
}

// fail reports err and returns the exit status: interrupted if a signal
// ended the demo (signalled is the signal context's cause, or nil).
func fail(signalled error, what string, err error) int {
	if signalled != nil {
		fmt.Fprintf(os.Stderr, "demo: interrupted (%v) during %s\n", signalled, what)
		return exitInterrupted
	}
	fmt.Fprintf(os.Stderr, "✗ demo failed during %s: %v\n", what, err)
	return exitFailed
}
