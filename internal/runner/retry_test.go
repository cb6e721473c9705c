package runner

import (
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

// A sidecar that answers 503 with Retry-After: 2 (as one that shuts down
// does) is asked again only once 2 s of the runner's clock have passed,
// not before, and not in a loop.
func TestRetryAfterDelaysTheNextRequest(t *testing.T) {
	s := newSetup(t, following(7, 1), time.Second, obeying)
	startRun(t, s.cfg)
	s.sidecar.awaitRequests(t, "1", 1) // held: the runner leads nothing, so no timer of its own runs

	s.sidecar.refuse(&refusal{code: http.StatusServiceUnavailable, retryAfter: "2"})
	if got := s.logs.await(t, "sidecar asked to retry later", 1).attrs["retryIn"]; got != "2s" {
		t.Errorf("retryIn = %s, want 2s", got)
	}
	s.clock.Step(2*time.Second - time.Millisecond)
	if !s.clock.HasWaiters() || len(s.sidecar.requestsFor("1")) != 1 {
		t.Fatalf("asked again %v after a Retry-After of 2s (%d requests)", 2*time.Second-time.Millisecond, len(s.sidecar.requestsFor("1")))
	}
	s.sidecar.refuse(nil)
	s.clock.Step(time.Millisecond)
	s.sidecar.awaitRequests(t, "1", 2)
	s.sidecar.kick() // answer the held request: the watch works again
	s.logs.await(t, "sidecar answers again", 1)
	if n := len(s.logs.find("sidecar asked to retry later")); n != 1 {
		t.Errorf("%d retries logged, want 1", n)
	}
}

// The validity deadline fires on time while the watcher waits out a long
// Retry-After: waiting to ask again never extends a command's run.
func TestDeadlineFiresWhileWaitingOutRetryAfter(t *testing.T) {
	s := newSetup(t, leading(42, 3, 10*time.Second, 1), time.Second, obeying)
	run := startRun(t, s.cfg)
	s.awaitStart(t) // started at +1s; deadline +10s; the watch (index 1) is held

	s.sidecar.refuse(&refusal{code: http.StatusServiceUnavailable, retryAfter: "3600"})
	if got := s.logs.await(t, "sidecar asked to retry later", 1).attrs["retryIn"]; got != client.MaxRetryAfter.String() {
		t.Errorf("retryIn = %s for Retry-After: 3600, want the bound %v", got, client.MaxRetryAfter)
	}
	s.clock.Step(9 * time.Second) // +10s
	s.awaitLine(t, "term", 1)
	if ran := s.logs.await(t, "validity ran out", 1); !ran.at.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("deadline passed at fake +%v, want +10s", ran.at.Sub(t0))
	}
	s.logs.await(t, "command stopped", 1)
	if n := len(s.sidecar.requestsFor("1")); n != 1 {
		t.Errorf("%d watch requests by +10s, want only the refused one", n)
	}

	s.clock.Step(21 * time.Second) // +31s: 30s after the refusal
	s.sidecar.awaitRequests(t, "1", 2)
	if run.returned() {
		t.Fatalf("runner exited (%d); want it to wait for leadership again", run.code)
	}
}
