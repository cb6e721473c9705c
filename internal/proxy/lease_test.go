package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A forwarded request is marked with its Lease, and a proxy of another
// Lease refuses it: A's follower forwards to an address that now belongs to
// the leader's proxy of another app, B (a dead leader's Pod IP given to a
// Pod of B). B answers 503 wrong_lease with Retry-After, and no app gets
// the request. A request forwarded for B's own Lease, or by a proxy that
// marks none (an earlier version), is served.
func TestForwardedForAnotherLeaseIsRefused(t *testing.T) {
	appB := newApp(t, "B")
	b := newInstance(t, Config{Upstream: appB.addr(), Lease: "shop/b", View: leading(900, 3), RetryAfter: 2 * time.Second})
	c := newClient(t)

	for _, tc := range []struct{ name, lease string }{
		{"another Lease's follower", "shop/a"},
		{"the same name in another namespace", "other/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newInstance(t, Config{Upstream: "127.0.0.1:1", Lease: tc.lease, View: following(b.addr())})
			req, _ := http.NewRequest(http.MethodPost, a.url()+"/charge", strings.NewReader(`{"amount": 100}`))
			got := do(t, c, req)
			if got.status != http.StatusServiceUnavailable || got.errorBody(t).Code != CodeWrongLease {
				t.Fatalf("%d %s, want 503 %s", got.status, got.body, CodeWrongLease)
			}
			if ra := got.header.Get("Retry-After"); ra != "2" {
				t.Errorf("Retry-After %q, want 2", ra)
			}
			if !strings.Contains(got.body, tc.lease) || !strings.Contains(got.body, "shop/b") {
				t.Errorf("the error %s names neither Lease", got.body)
			}
		})
	}
	if n := len(appB.requests()); n != 0 {
		t.Fatalf("B's app received %d requests forwarded for another Lease", n)
	}
	if n := counted(t, b.reg, "rejected", 503); n != 2 {
		t.Errorf("B: requests_total{outcome=rejected, code=503} = %v, want 2", n)
	}

	// B's own follower: served, with B's token.
	own := newInstance(t, Config{Upstream: "127.0.0.1:1", Lease: "shop/b", View: following(b.addr())})
	if got := get(t, c, own.url()+"/x", nil); got.status != 200 || got.body != "ok from B" {
		t.Fatalf("B's own follower: %d %s", got.status, got.body)
	}
	// A proxy that marks no Lease (an earlier version): served as before.
	conn, err := net.DialTimeout("tcp", b.addr(), generous)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(generous))
	if _, err := io.WriteString(conn, "GET /y HTTP/1.1\r\nHost: b\r\n"+HeaderForwarded+": an-older-proxy\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != 200 || string(body) != "ok from B" {
		t.Fatalf("forwarded without %s: %d %s, want B's app's answer", HeaderLease, res.StatusCode, body)
	}
	seen := appB.requests()
	if len(seen) != 2 {
		t.Fatalf("B's app received %d requests, want 2", len(seen))
	}
	for _, s := range seen {
		if s.Header.Get(HeaderFencingToken) != "900" || s.Header.Get(HeaderLease) != "" || s.Header.Get(HeaderForwarded) != "" {
			t.Errorf("B's app got %s with token %q, %s %q, %s %q; want B's token and neither mark",
				s.Path, s.Header.Get(HeaderFencingToken), HeaderLease, s.Header.Get(HeaderLease), HeaderForwarded, s.Header.Get(HeaderForwarded))
		}
	}
}
