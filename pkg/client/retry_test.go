package client_test

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

// The one retry policy: the backoff doubles from MinBackoff up to
// MaxBackoff and starts over after Reset; a 503's Retry-After is honoured
// within [MinBackoff, MaxRetryAfter], another status's is not.
func TestBackoff(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	unreachable := errors.New("connection refused")
	with := func(code int, retryAfter string) error {
		return &client.Error{StatusCode: code, Header: http.Header{"Retry-After": {retryAfter}}}
	}
	var b client.Backoff
	var got []time.Duration
	var fromSidecar []bool
	for _, err := range []error{unreachable, unreachable, with(503, "2"), unreachable, unreachable, unreachable,
		with(503, "3600"), with(503, "0"), with(503, "soon"), with(500, "7")} {
		d, ra := b.Delay(err, now)
		got, fromSidecar = append(got, d), append(fromSidecar, ra)
	}
	b.Reset()
	d, ra := b.Delay(unreachable, now)
	got, fromSidecar = append(got, d), append(fromSidecar, ra)
	want := []time.Duration{client.MinBackoff, 2 * client.MinBackoff, 2 * time.Second, 800 * time.Millisecond, client.MaxBackoff, client.MaxBackoff,
		client.MaxRetryAfter, client.MinBackoff, client.MaxBackoff, client.MaxBackoff, client.MinBackoff}
	if !slices.Equal(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	if wantRA := []bool{false, false, true, false, false, false, true, true, false, false, false}; !slices.Equal(fromSidecar, wantRA) {
		t.Errorf("retryAfter %v, want %v", fromSidecar, wantRA)
	}
}

// A 503's Retry-After, in both of its forms, within [MinBackoff,
// MaxRetryAfter]; one that does not parse is the backoff.
func TestBackoffRetryAfter(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	for value, want := range map[string]time.Duration{
		"0":                       client.MinBackoff,
		"2":                       2 * time.Second,
		"30":                      30 * time.Second,
		"31":                      client.MaxRetryAfter,
		"3600":                    client.MaxRetryAfter,
		strconv.Itoa(1 << 40):     client.MaxRetryAfter,
		"99999999999999999999999": client.MaxRetryAfter,
		now.Add(5 * time.Second).Format(http.TimeFormat): 5 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):      client.MinBackoff,
		now.Add(time.Hour).Format(http.TimeFormat):       client.MaxRetryAfter,
	} {
		var b client.Backoff
		if got, ok := b.Delay(&client.Error{StatusCode: 503, Header: http.Header{"Retry-After": {value}}}, now); !ok || got != want {
			t.Errorf("Retry-After %q: %v, %v; want %v", value, got, ok, want)
		}
	}
	for _, value := range []string{"", "-1", "soon", "1.5"} {
		var b client.Backoff
		if got, ok := b.Delay(&client.Error{StatusCode: 503, Header: http.Header{"Retry-After": {value}}}, now); ok || got != client.MinBackoff {
			t.Errorf("Retry-After %q: %v, %v; want the backoff, %v", value, got, ok, client.MinBackoff)
		}
	}
}
