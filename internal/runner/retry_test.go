package runner

import (
	"errors"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

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
	eventually(t, "the retry timer", s.clock.HasWaiters)
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
	if got := s.logs.await(t, "sidecar asked to retry later", 1).attrs["retryIn"]; got != maxRetryAfter.String() {
		t.Errorf("retryIn = %s for Retry-After: 3600, want the bound %v", got, maxRetryAfter)
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

// retryDelay honours Retry-After in both forms, within [minBackoff,
// maxRetryAfter], and only on an answer other than 200.
func TestRetryDelay(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	for value, want := range map[string]time.Duration{
		"2":                    2 * time.Second,
		"0":                    minBackoff,
		"30":                   30 * time.Second,
		"31":                   maxRetryAfter,
		"3600":                 maxRetryAfter,
		"99999999999999999999": maxRetryAfter,
		t0.Add(5 * time.Second).Format(http.TimeFormat):  5 * time.Second,
		t0.Add(-5 * time.Second).Format(http.TimeFormat): minBackoff,
		t0.Add(time.Hour).Format(http.TimeFormat):        maxRetryAfter,
	} {
		got, ok := retryDelay(&client.Error{StatusCode: 503, Header: http.Header{"Retry-After": {value}}}, clk)
		if !ok || got != want {
			t.Errorf("Retry-After %q: %v, %v; want %v", value, got, ok, want)
		}
	}
	for _, value := range []string{"", "-1", "soon", "1.5"} {
		if got, ok := retryDelay(&client.Error{StatusCode: 503, Header: http.Header{"Retry-After": {value}}}, clk); ok {
			t.Errorf("Retry-After %q: %v; want none (the short backoff)", value, got)
		}
	}
	if got, ok := retryDelay(errors.New("connection refused"), clk); ok {
		t.Errorf("an unreachable sidecar: %v; want none (the short backoff)", got)
	}
}
