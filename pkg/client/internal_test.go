package client

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"
)

// The sidecar is in the same pod: the default client never uses a proxy,
// whatever HTTP_PROXY says.
func TestNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	c, err := New("http://leasehold.invalid:4040")
	if err != nil {
		t.Fatal(err)
	}
	if tr := c.http.Transport.(*http.Transport); tr.Proxy != nil {
		t.Fatal("the transport has a Proxy function")
	}
}

// Retrying: the backoff doubles from minBackoff up to maxBackoff and starts
// over after an answer; a 503's Retry-After is honoured within
// [minBackoff, maxRetryAfter], another status's is not.
func TestRetryDelay(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	unreachable := errors.New("connection refused")
	with := func(code int, retryAfter string) error {
		return &Error{StatusCode: code, Header: http.Header{"Retry-After": {retryAfter}}}
	}
	var r retry
	var got []time.Duration
	for _, err := range []error{unreachable, unreachable, with(503, "2"), unreachable, unreachable, unreachable,
		with(503, "3600"), with(503, "0"), with(503, "soon"), with(500, "7")} {
		got = append(got, r.delay(err, now))
	}
	r.succeeded()
	got = append(got, r.delay(unreachable, now))
	want := []time.Duration{minBackoff, 2 * minBackoff, 2 * time.Second, 800 * time.Millisecond, maxBackoff, maxBackoff,
		maxRetryAfter, minBackoff, maxBackoff, maxBackoff, minBackoff}
	if !slices.Equal(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
}
