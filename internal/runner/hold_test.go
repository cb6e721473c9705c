package runner

import (
	"errors"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

// The command starts only under a hold on its term, and the hold ends only
// once the command has exited: a command that ignores SIGTERM still runs,
// and the hold is still open, until the SIGKILL grace later; when the
// sidecar sees the hold end, the command's process is gone. The same when
// leadership ends and when the runner gets a signal.
func TestHoldIsKeptUntilTheCommandHasExited(t *testing.T) {
	for name, end := range map[string]func(s *setup, run *running){
		"leadership ends":      func(s *setup, _ *running) { s.sidecar.set(following(44, 2)) },
		"signal to the runner": func(_ *setup, run *running) { run.cancel() },
	} {
		t.Run(name, func(t *testing.T) {
			s := newSetup(t, leading(42, 3, 60*time.Second, 1), 2*time.Second, ignoring)
			var (
				mu             sync.Mutex
				pid            int
				aliveAtHoldEnd []bool
			)
			s.sidecar.setOnHoldEnd(func(*holdReq) {
				mu.Lock()
				defer mu.Unlock()
				aliveAtHoldEnd = append(aliveAtHoldEnd, !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH))
			})
			run := startRun(t, s.cfg)
			start := s.awaitStart(t)
			mu.Lock()
			pid, _ = strconv.Atoi(start[0])
			mu.Unlock()
			if h := s.sidecar.holds(); len(h) != 1 || h[0].token != "42" || !h[0].granted || h[0].ended {
				t.Fatalf("holds %+v when the command started, want one granted and open on token 42", h)
			}
			if got := s.logs.await(t, "command started", 1).attrs["held"]; got != "true" {
				t.Errorf("command started with held=%s, want true", got)
			}

			end(s, run)
			term := s.awaitLine(t, "term", 1)
			s.awaitLine(t, "beat", term+1) // it outlived the SIGTERM: the fake clock has not moved
			if n := s.sidecar.openHolds(); n != 1 {
				t.Fatalf("%d holds open while the command still runs after SIGTERM, want 1", n)
			}
			s.clock.Step(2 * time.Second) // grace: SIGKILL
			eventually(t, "the hold to end", func() bool { return s.sidecar.openHolds() == 0 })
			s.logs.await(t, "command stopped", 1)
			mu.Lock()
			defer mu.Unlock()
			if len(aliveAtHoldEnd) != 1 || aliveAtHoldEnd[0] {
				t.Errorf("command alive when its hold ended: %v, want [false]", aliveAtHoldEnd)
			}
		})
	}
}

// A refused hold (409: the term is ending) starts nothing and is not asked
// again for that term; a new term's hold is asked for, and its command runs.
func TestRefusedHoldStartsNothing(t *testing.T) {
	s := newSetup(t, leading(42, 3, 60*time.Second, 1), time.Second, obeying)
	s.sidecar.setHoldMode(holdRefuse)
	startRun(t, s.cfg)
	s.sidecar.awaitRequests(t, "1", 1)
	s.clock.Step(time.Second) // the start delay: a hold is asked for
	s.logs.await(t, "refused to hold the term", 1)

	s.clock.Step(10 * time.Second)
	s.sidecar.kick()
	s.sidecar.awaitRequests(t, "1", 2)
	if r := s.logs.find("command started"); len(r) != 0 {
		t.Fatalf("command started at fake +%v after its hold was refused", r[0].at.Sub(t0))
	}
	if h := s.sidecar.holds(); len(h) != 1 {
		t.Fatalf("%d hold requests, want 1: a refused term is not asked again", len(h))
	}

	s.sidecar.setHoldMode(holdGrant)
	s.sidecar.set(leading(43, 4, 60*time.Second, 2))
	s.sidecar.awaitRequests(t, "2", 1)
	s.clock.Step(time.Second)
	s.awaitLine(t, "start", 1)
	if got := s.starts(); len(got) != 1 || got[0][1] != "43" {
		t.Errorf("starts %v, want one with token 43", got)
	}
	if h := s.sidecar.holds(); len(h) != 2 || h[1].token != "43" || !h[1].granted {
		t.Errorf("holds %+v, want the second granted on token 43", h)
	}
}

// A sidecar older than holds (404) is warned about once; commands start
// without a hold, as before, and no more holds are asked for.
func TestSidecarWithoutHolds(t *testing.T) {
	s := newSetup(t, leading(42, 3, 60*time.Second, 1), 2*time.Second, obeying)
	s.sidecar.setHoldMode(holdUnsupported)
	startRun(t, s.cfg)
	s.awaitStart(t)
	if got := s.logs.await(t, "command started", 1).attrs["held"]; got != "false" {
		t.Errorf("command started with held=%s, want false", got)
	}

	s.sidecar.set(leading(45, 5, 60*time.Second, 3)) // a new term: stop, then start again
	s.awaitLine(t, "term", 1)
	s.sidecar.awaitRequests(t, "3", 1)
	s.clock.Step(2 * time.Second)
	s.awaitLine(t, "start", 2)
	if n := len(s.logs.find("does not support holds")); n != 1 {
		t.Errorf("warned %d times about a sidecar without holds, want once", n)
	}
	if n := len(s.sidecar.holds()); n != 1 {
		t.Errorf("%d hold requests, want 1", n)
	}
}

// A hold request without an answer (the connection dropped) is asked again
// after a backoff on the runner's clock; the command starts once granted.
func TestHoldAskedAgainWithoutAnAnswer(t *testing.T) {
	s := newSetup(t, leading(42, 3, 60*time.Second, 1), time.Second, obeying)
	s.sidecar.setHoldMode(holdDrop)
	startRun(t, s.cfg)
	s.sidecar.awaitRequests(t, "1", 1)
	s.clock.Step(time.Second)
	if got := s.logs.await(t, "did not grant the hold", 1).attrs["retryIn"]; got != client.MinBackoff.String() {
		t.Errorf("retryIn = %s, want %v", got, client.MinBackoff)
	}
	s.sidecar.setHoldMode(holdGrant)
	s.clock.Step(client.MinBackoff)
	s.awaitLine(t, "start", 1)
	if at := s.logs.await(t, "command started", 1).at; !at.Equal(t0.Add(time.Second + client.MinBackoff)) {
		t.Errorf("command started at fake +%v, want +%v", at.Sub(t0), time.Second+client.MinBackoff)
	}
	if h := s.sidecar.holds(); len(h) != 2 || !h[1].granted {
		t.Errorf("holds %+v, want a dropped one, then a granted one", h)
	}
}

// A hold request in flight when leadership ends is abandoned (the sidecar
// sees the client go) and starts nothing.
func TestPendingHoldAbandonedWhenLeadershipEnds(t *testing.T) {
	s := newSetup(t, leading(42, 3, 60*time.Second, 1), time.Second, obeying)
	s.sidecar.setHoldMode(holdHang)
	startRun(t, s.cfg)
	s.sidecar.awaitRequests(t, "1", 1)
	s.clock.Step(time.Second)
	eventually(t, "a hold request", func() bool { return len(s.sidecar.holds()) == 1 })

	s.sidecar.set(following(44, 2))
	eventually(t, "the hold request to be abandoned", func() bool { return s.sidecar.holds()[0].gone })
	s.sidecar.awaitRequests(t, "2", 1)
	if r := s.logs.find("command started"); len(r) != 0 || len(s.lines()) != 0 {
		t.Fatal("command started without a hold")
	}
}

// A hold the sidecar ends while the command runs (it shuts down, or is
// gone) is logged; the command runs on under the validity deadline, which
// stops it on time.
func TestHoldEndedBySidecarLeavesTheDeadlineInCharge(t *testing.T) {
	s := newSetup(t, leading(42, 3, 10*time.Second, 1), time.Second, obeying)
	run := startRun(t, s.cfg)
	s.awaitStart(t) // started at +1s; deadline +10s; the watch (index 1) is held

	s.sidecar.endHold()
	s.logs.await(t, "the sidecar ended the hold", 1)
	beats := len(s.lines())
	s.awaitLine(t, "beat", beats) // still running
	if r := s.logs.find("stopping the command"); len(r) != 0 {
		t.Fatal("the command was stopped when the sidecar ended the hold")
	}
	s.clock.Step(9 * time.Second) // +10s
	if ran := s.logs.await(t, "validity ran out", 1); !ran.at.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("deadline passed at fake +%v, want +10s", ran.at.Sub(t0))
	}
	s.logs.await(t, "command stopped", 1)
	if run.returned() {
		t.Fatalf("runner exited (%d); want it to wait for leadership again", run.code)
	}
}
