package proxy

import (
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// deadAddr is a loopback address nothing listens on: connections to it are
// refused.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// A follower whose leader's proxy refuses the connection (it has closed:
// the leader is stopping) sent nothing, so it forwards the request once
// more where the leader is known to be now; when it knows no other, it
// answers 503 with Retry-After. Never 502: no one received the request.
// Each case: the Views the follower reads, in order (the first decides the
// first attempt), and what the client gets.
func TestRefusedAtConnectGoesOnceMore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second string // the second View: "leader" (another's proxy), "local" (this instance leads), "same", "none", "dead" (another refusing)
		status int
		code   Code
		at     string // who served it: "leader", "local", "" (no one)
	}{
		{"a new leader known", "leader", 200, "", "leader"},
		{"this instance leads now", "local", 200, "", "local"},
		{"the same leader still", "same", 503, CodeLeaderUnreachable, ""},
		{"no leader known", "none", 503, CodeNoLeader, ""},
		{"the new leader refuses too", "dead", 503, CodeLeaderUnreachable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gone, alsoGone := deadAddr(t), deadAddr(t)
			leaderApp, localApp := newApp(t, "leader"), newApp(t, "local")
			leader := newInstance(t, Config{Upstream: leaderApp.addr(), View: leading(70, 7)})
			var views atomic.Int64
			view := func(time.Time) View {
				if views.Add(1) == 1 {
					return View{LeaderAddress: gone}
				}
				switch tc.second {
				case "leader":
					return View{LeaderAddress: leader.addr()}
				case "local":
					return View{Leading: true, Token: 71, Term: 8}
				case "same":
					return View{LeaderAddress: gone}
				case "dead":
					return View{LeaderAddress: alsoGone}
				}
				return View{}
			}
			follower := newInstance(t, Config{Upstream: localApp.addr(), View: view, RetryAfter: time.Second})
			req, _ := http.NewRequest(http.MethodPost, follower.url()+"/charge", strings.NewReader(`{"amount": 100}`))
			got := do(t, newClient(t), req)

			if got.status != tc.status {
				t.Fatalf("%d %s, want %d", got.status, got.body, tc.status)
			}
			if tc.code != "" {
				if e := got.errorBody(t); e.Code != tc.code {
					t.Errorf("code %q (%s), want %s", e.Code, e.Message, tc.code)
				}
				if got.header.Get("Retry-After") != "1" {
					t.Errorf("Retry-After %q, want 1", got.header.Get("Retry-After"))
				}
			}
			if n := views.Load(); n != 2 {
				t.Errorf("View read %d times, want 2 (the decision, and once more after the refusal)", n)
			}
			served := map[string][]seen{"leader": leaderApp.requests(), "local": localApp.requests()}
			for who, reqs := range served {
				want := 0
				if who == tc.at {
					want = 1
				}
				if len(reqs) != want {
					t.Fatalf("%s's app received %d requests, want %d", who, len(reqs), want)
				}
				if want == 1 && reqs[0].Body != `{"amount": 100}` {
					t.Errorf("%s's app received the body %q", who, reqs[0].Body)
				}
			}
			if tc.at == "local" {
				if s := localApp.requests()[0]; s.Header.Get(HeaderFencingToken) != "71" || s.Header.Get(HeaderForwarded) != "" || s.Header.Get(HeaderLease) != "" {
					t.Errorf("the local app got token %q, %s %q, %s %q; want 71 and neither mark", s.Header.Get(HeaderFencingToken),
						HeaderForwarded, s.Header.Get(HeaderForwarded), HeaderLease, s.Header.Get(HeaderLease))
				}
			}
			outcome := map[string]string{"leader": "forwarded", "local": "local", "": "rejected"}[tc.at]
			if n := counted(t, follower.reg, outcome, tc.status); n != 1 {
				t.Errorf("requests_total{outcome=%s, code=%d} = %v, want 1", outcome, tc.status, n)
			}
			if n := counted(t, follower.reg, "forwarded", 502); n != 0 {
				t.Errorf("requests_total{outcome=forwarded, code=502} = %v", n)
			}
		})
	}
}
