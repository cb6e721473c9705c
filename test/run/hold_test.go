package run

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

// Timings of the paused-runner trials: a longer validity than the other
// trials', so that a pause longer than the start delay still ends well
// before the term's validity (renewed every retryPeriod, it has at least
// pausedRenewDeadline − retryPeriod left at any moment).
const (
	pausedLeaseDuration = 6 * time.Second
	pausedRenewDeadline = 4 * time.Second
	// pause is how long the old runner is stopped: longer than the start
	// delay, so that without holds the successor's command starts while the
	// old one still runs.
	pause = startDelay + time.Second
)

// e) A handover by release (POST /v1/release, SIGTERM to the sidecar) while
// the leader's runner is paused (SIGSTOP) for longer than the start delay,
// but not past the term's validity: its command (the beater, in a process
// group of its own) beats on all through the pause. The release waits until
// the resumed runner has stopped its command and closed its hold, so the
// successor acquires only after the old command has exited, and its
// command starts a start delay later: the runs do not overlap.
//
// Without holds (before POST /v1/hold) the release was written at once,
// the successor's command started a start delay later, while the paused
// runner's command still ran: the runs overlapped by about pause −
// startDelay.
func TestReleaseWaitsForAPausedRunner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		release func(t *testing.T, m *member) <-chan string // what the release answered, when it did
	}{
		{"POST /v1/release", func(t *testing.T, m *member) <-chan string {
			done := make(chan string, 1)
			go func() { done <- postRelease(m.inst.APIURL) }()
			return done
		}},
		{"SIGTERM to the sidecar", func(t *testing.T, m *member) <-chan string {
			if err := m.inst.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			done := make(chan string, 1)
			go func() {
				<-m.inst.Exited()
				done <- fmt.Sprintf("the sidecar exited (status %d)", m.inst.ExitCode())
			}()
			return done
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := newTrial(t)
			tr.cfg.LeaseDuration, tr.cfg.RenewDeadline = pausedLeaseDuration, pausedRenewDeadline
			tr.start("a", false)
			tr.start("b", false)
			old := tr.awaitRun(0, nil)
			tr.awaitBeats(old.m, old.token, 20)

			ctx, cancel := context.WithTimeout(t.Context(), generous)
			defer cancel()
			st, err := old.m.inst.Status(ctx)
			if err != nil || !st.Leader || st.FencingToken != old.token {
				t.Fatalf("%s's status before the release: %+v, %v; want leading with token %d", old.m.name, st, err, old.token)
			}
			validUntil := parseTime(t, st.ValidUntil) // renewals only move it later

			if err := old.m.runner.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			awaitPaused(t, old.m.runner.cmd.Process.Pid) // a signal is delivered, not obeyed, when kill returns
			paused := time.Now()
			released := tc.release(t, old.m)
			// The pause is the fault injected, not a wait for an outcome.
			time.Sleep(time.Until(paused.Add(pause)))
			resumed := time.Now()
			if err := old.m.runner.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s's runner paused at %s for %v; the term's validity ran until at least %s (%v after the pause began)",
				old.m.name, clock(paused), resumed.Sub(paused).Round(time.Millisecond), clock(validUntil), validUntil.Sub(paused).Round(time.Millisecond))
			if !resumed.Before(validUntil) {
				// Past validUntil the release goes ahead without the hold:
				// nothing is promised, and the trial proves nothing.
				t.Fatalf("the pause outlasted the term's validity (resumed %v after validUntil): the machine is too slow for this trial",
					resumed.Sub(validUntil))
			}

			succ := tr.awaitRun(old.token, old.m)
			tr.awaitStopped(old.m)
			var answer string
			select {
			case answer = <-released:
			case <-time.After(generous):
				t.Fatalf("the release did not complete within %v", generous)
			}
			tr.stopSampling()

			runs := runsOf(t, old.m)
			last := runs[len(runs)-1]
			_, sigterms := beatsOf(t, old.m.beats)
			if last.token != old.token || len(sigterms) != 1 {
				t.Fatalf("%s: last run %v, %d SIGTERMs; want the run of token %d, stopped once", old.m.name, last, len(sigterms), old.token)
			}
			exited := sigterms[0] // the beater exits on SIGTERM
			succTerm := succ.m.terms(t)[succ.token]
			t.Logf("release: %s; %s's runner resumed %s; its command got SIGTERM %v later and beat last at %s; "+
				"%s acquired at %s and its command first beat at %s",
				answer, old.m.name, clock(resumed), exited.Sub(resumed).Round(time.Millisecond), clock(last.last),
				succ.m.name, clock(succTerm.acquiredAt), clock(succ.first))

			// The scenario: the old command kept running through the pause,
			// past the start delay after the release began.
			if !last.last.After(paused.Add(startDelay)) {
				t.Errorf("%s's command last beat %v after the pause began; the trial needs it to run past the start delay (%v)",
					old.m.name, last.last.Sub(paused), startDelay)
			}
			// The guarantee.
			if !succTerm.acquiredAt.After(exited) {
				t.Errorf("%s acquired at %s, %v before %s's command exited (%s): the release did not wait for it",
					succ.m.name, clock(succTerm.acquiredAt), exited.Sub(succTerm.acquiredAt), old.m.name, clock(exited))
			}
			if !succ.first.After(exited) {
				t.Errorf("%s's command began at %s, %v before %s's command exited (%s)",
					succ.m.name, clock(succ.first), exited.Sub(succ.first), old.m.name, clock(exited))
			}
			tr.checkNoOverlap()
			tr.checkRunsWhileLeading()
			tr.checkRunnersRunning()
		})
	}
}

// postRelease asks the sidecar at api to release (POST /v1/release) and
// describes the answer.
func postRelease(api string) string {
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	c, err := client.New(api)
	if err != nil {
		return err.Error()
	}
	defer c.CloseIdleConnections()
	r, err := c.Release(ctx, client.DefaultStayOut)
	if e, ok := errors.AsType[*client.Error](err); ok {
		return fmt.Sprintf("POST /v1/release answered %d (%s) at %s", e.StatusCode, e.Code, clock(time.Now()))
	}
	if err != nil {
		return fmt.Sprintf("POST /v1/release at %s: %v", clock(time.Now()), err)
	}
	return fmt.Sprintf("POST /v1/release answered 200 (released: %v) at %s", r.Released, clock(time.Now()))
}
