package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leasehold/leasehold/internal/rule"
	"github.com/leasehold/leasehold/internal/testing/upgrade"
	"github.com/leasehold/leasehold/pkg/api"
)

// New refuses a Config it cannot serve, naming the field.
func TestNewValidates(t *testing.T) {
	view := func(time.Time) View { return View{} }
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no upstream", Config{View: view}, "Upstream"},
		{"upstream without port", Config{Upstream: "127.0.0.1", View: view}, "Upstream"},
		{"upstream with empty port", Config{Upstream: "127.0.0.1:", View: view}, "Upstream"},
		{"upstream without host", Config{Upstream: ":8080", View: view}, "Upstream"},
		{"upstream as URL", Config{Upstream: "http://127.0.0.1:8080", View: view}, "Upstream"},
		{"no lease", Config{Upstream: "127.0.0.1:8080", View: view}, "Lease"},
		{"lease without namespace", Config{Upstream: "127.0.0.1:8080", Lease: "app", View: view}, "Lease"},
		{"lease with empty namespace", Config{Upstream: "127.0.0.1:8080", Lease: "/app", View: view}, "Lease"},
		{"lease with empty name", Config{Upstream: "127.0.0.1:8080", Lease: "default/", View: view}, "Lease"},
		{"lease with two slashes", Config{Upstream: "127.0.0.1:8080", Lease: "default/app/x", View: view}, "Lease"},
		{"no view", Config{Upstream: "127.0.0.1:8080", Lease: testLease}, "View"},
		{"negative retryAfter", Config{Upstream: "127.0.0.1:8080", Lease: testLease, View: view, RetryAfter: -time.Second}, "RetryAfter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			var re *rule.Error
			if !errors.As(err, &re) {
				t.Fatalf("New: %v, want a *rule.Error", err)
			}
			if re.Fields[0].Name != tc.field {
				t.Errorf("New: %v names %s, want %s", err, re.Fields[0].Name, tc.field)
			}
			if !strings.HasPrefix(err.Error(), "proxy: ") {
				t.Errorf("New: %q does not start with the component", err)
			}
		})
	}
	if _, err := New(Config{Upstream: "[::1]:8080", Lease: testLease, View: view}); err != nil {
		t.Errorf("New with an IPv6 upstream: %v", err)
	}
}

// Registering the metrics twice in one Registerer is an error, not a
// panic.
func TestNewRegistersOnce(t *testing.T) {
	i := newInstance(t, Config{Upstream: "127.0.0.1:1", View: noLeader})
	if _, err := New(Config{Upstream: "127.0.0.1:1", Lease: testLease, View: noLeader, Registerer: i.reg}); err == nil {
		t.Fatal("New registered its metrics twice in one Registerer")
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]int{
		0: 1, time.Millisecond: 1, time.Second: 1, time.Second + time.Millisecond: 2, 2500 * time.Millisecond: 3, 10 * time.Second: 10,
	} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestStripReserved(t *testing.T) {
	h := http.Header{
		"X-Leasehold-Fencing-Token": {"1"},
		"X-Leasehold-Term":          {"1"},
		"X-Leasehold-Forwarded":     {"1"},
		"X-Leasehold-Anything":      {"1"},
		"x-leasehold-lower":         {"1"},
		"X_leasehold_fencing_token": {"1"},
		"X-Leasehold_Term":          {"1"},
		"X-Leaseholder":             {"kept"},
		"X-Lease":                   {"kept"},
		"Leasehold-Token":           {"kept"},
		"Authorization":             {"kept"},
	}
	stripReserved(h)
	for k := range h {
		if h.Get(k) != "kept" && h[k][0] != "kept" {
			t.Errorf("%s was kept", k)
		}
	}
	if len(h) != 4 {
		t.Errorf("kept %v, want the 4 others", h)
	}
}

// Each route of the decision, from one View: where the request went (the
// local app, the leader's proxy, nowhere), with which headers, and what the
// client got.
func TestRoutes(t *testing.T) {
	const (
		atApp  = "app"
		atPeer = "peer"
	)
	spoofed := http.Header{
		HeaderFencingToken:          {"999999"},
		HeaderTerm:                  {"99"},
		"X_leasehold_fencing_token": {"999999"},
		"X-Leasehold-Valid-Until":   {"forever"},
		HeaderLease:                 {"other/app"},
	}
	guarded := http.Header{HeaderForwarded: {"other-proxy"}}
	for _, tc := range []struct {
		name    string
		view    func(peer string) func(time.Time) View
		header  http.Header
		status  int
		code    Code   // of the proxy's own answer
		at      string // who received the request: atApp, atPeer, "" (no one)
		outcome string
	}{
		{"leader", func(string) func(time.Time) View { return leading(42, 5) }, nil, 200, "", atApp, "local"},
		{"leader, spoofed headers", func(string) func(time.Time) View { return leading(42, 5) }, spoofed, 200, "", atApp, "local"},
		{"leader, request forwarded once", func(string) func(time.Time) View { return leading(42, 5) }, guarded, 200, "", atApp, "local"},
		{"follower", following, nil, 200, "", atPeer, "forwarded"},
		{"follower, spoofed headers", following, spoofed, 200, "", atPeer, "forwarded"},
		{"no leader", func(string) func(time.Time) View { return noLeader }, nil, 503, CodeNoLeader, "", "rejected"},
		{"no leader, spoofed headers", func(string) func(time.Time) View { return noLeader }, spoofed, 503, CodeNoLeader, "", "rejected"},
		{"follower, request forwarded once", following, guarded, 503, CodeForwardLoop, "", "rejected"},
		{"no leader, request forwarded once", func(string) func(time.Time) View { return noLeader }, guarded, 503, CodeForwardLoop, "", "rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app, peer := newApp(t, atApp), newApp(t, atPeer)
			in := newInstance(t, Config{Upstream: app.addr(), View: tc.view(peer.addr()), RetryAfter: 1500 * time.Millisecond})
			c := newClient(t)
			got := get(t, c, in.url()+"/some/path?q=1", tc.header)

			if got.status != tc.status {
				t.Fatalf("status %d (%s), want %d", got.status, got.body, tc.status)
			}
			if tc.code != "" {
				if e := got.errorBody(t); e.Code != tc.code || e.Message == "" {
					t.Errorf("answer %+v, want code %s and a message", e, tc.code)
				}
				if ct := got.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				if ra := got.header.Get("Retry-After"); ra != "2" {
					t.Errorf("Retry-After %q, want 2 (1.5 s rounded up)", ra)
				}
			} else if got.body != "ok from "+tc.at {
				t.Errorf("body %q, want the answer of %s", got.body, tc.at)
			}

			appSeen, peerSeen := app.requests(), peer.requests()
			var s seen
			switch tc.at {
			case atApp:
				if len(appSeen) != 1 || len(peerSeen) != 0 {
					t.Fatalf("app received %d, peer %d; want 1, 0", len(appSeen), len(peerSeen))
				}
				s = appSeen[0]
				if tok, term := s.Header.Get(HeaderFencingToken), s.Header.Get(HeaderTerm); tok != "42" || term != "5" {
					t.Errorf("the app got token %q term %q, want 42 and 5", tok, term)
				}
				for k := range s.Header {
					if k != HeaderFencingToken && k != HeaderTerm && headerReserved(k) {
						t.Errorf("the app got %s: %q", k, s.Header[k])
					}
				}
			case atPeer:
				if len(appSeen) != 0 || len(peerSeen) != 1 {
					t.Fatalf("app received %d, peer %d; want 0, 1", len(appSeen), len(peerSeen))
				}
				s = peerSeen[0]
				if f := s.Header.Get(HeaderForwarded); f != in.p.Marker() {
					t.Errorf("the leader's proxy got %s %q, want the marker %q", HeaderForwarded, f, in.p.Marker())
				}
				if l := s.Header.Values(HeaderLease); len(l) != 1 || l[0] != testLease {
					t.Errorf("the leader's proxy got %s %q, want the Lease %q", HeaderLease, l, testLease)
				}
				for k := range s.Header {
					if k != HeaderForwarded && k != HeaderLease && headerReserved(k) {
						t.Errorf("the leader's proxy got %s: %q", k, s.Header[k])
					}
				}
			default:
				if len(appSeen)+len(peerSeen) != 0 {
					t.Fatalf("app received %d, peer %d; want none", len(appSeen), len(peerSeen))
				}
			}
			if tc.at != "" {
				if s.Path != "/some/path?q=1" || s.Host != in.addr() {
					t.Errorf("received %s host %s, want /some/path?q=1 host %s", s.Path, s.Host, in.addr())
				}
				if xff := s.Header.Get("X-Forwarded-For"); xff != "127.0.0.1" {
					t.Errorf("X-Forwarded-For %q, want 127.0.0.1", xff)
				}
			}
			if n := counted(t, in.reg, tc.outcome, tc.status); n != 1 {
				t.Errorf("requests_total{outcome=%s, code=%d} = %v, want 1", tc.outcome, tc.status, n)
			}
			if n := timed(t, in.reg, tc.outcome); n != 1 {
				t.Errorf("request_duration_seconds{outcome=%s} has %v samples, want 1", tc.outcome, n)
			}
		})
	}
}

// headerReserved reports whether stripReserved removes name.
func headerReserved(name string) bool {
	h := http.Header{name: nil}
	stripReserved(h)
	return len(h) == 0
}

// The headers are those of the View taken for the request, and View is
// called exactly once per request, with the clock's now.
func TestHeadersAreTheViewAtForwarding(t *testing.T) {
	app := newApp(t, "app")
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	var (
		mu    sync.Mutex
		calls int
		nows  []time.Time
	)
	view := func(now time.Time) View {
		mu.Lock()
		defer mu.Unlock()
		calls++
		nows = append(nows, now)
		// Every call answers differently: a stale or repeated View shows.
		return View{Leading: true, Token: api.FencingToken(1000 + calls), Term: int32(calls)}
	}
	in := newInstance(t, Config{Upstream: app.addr(), View: view, Clock: clk})
	c := newClient(t)
	const n = 5
	for i := range n {
		clk.SetTime(clk.Now().Add(time.Second))
		if got := get(t, c, in.url()+"/", nil); got.status != 200 {
			t.Fatalf("request %d: %d %s", i, got.status, got.body)
		}
		mu.Lock()
		if calls != i+1 {
			t.Fatalf("after %d requests View was called %d times", i+1, calls)
		}
		if !nows[i].Equal(clk.Now()) {
			t.Errorf("request %d: View got now %v, want the clock's %v", i, nows[i], clk.Now())
		}
		mu.Unlock()
	}
	for i, s := range app.requests() {
		want := View{Token: api.FencingToken(1000 + i + 1), Term: int32(i + 1)}
		if tok, term := s.Header.Get(HeaderFencingToken), s.Header.Get(HeaderTerm); tok != want.Token.String() || term != strconv.Itoa(int(want.Term)) {
			t.Errorf("request %d reached the app with token %s term %s, want %s and %d (its own View)", i, tok, term, want.Token, want.Term)
		}
	}
}

// A View that changes between requests routes each by its own View: the
// decision is per request, not per connection.
func TestDecisionPerRequest(t *testing.T) {
	app, peer := newApp(t, "app"), newApp(t, "peer")
	var state atomic.Int64 // 0 leading, 1 following, 2 no leader
	view := func(time.Time) View {
		switch state.Load() {
		case 0:
			return View{Leading: true, Token: 7, Term: 1}
		case 1:
			return View{LeaderAddress: peer.addr()}
		}
		return View{}
	}
	in := newInstance(t, Config{Upstream: app.addr(), View: view})
	c := newClient(t) // one kept-alive connection for all
	for _, step := range []struct {
		state  int64
		status int
	}{{0, 200}, {1, 200}, {2, 503}, {0, 200}, {1, 200}} {
		state.Store(step.state)
		if got := get(t, c, in.url()+"/", nil); got.status != step.status {
			t.Fatalf("state %d: %d %s", step.state, got.status, got.body)
		}
	}
	if a, p := len(app.requests()), len(peer.requests()); a != 2 || p != 2 {
		t.Errorf("app received %d, peer %d; want 2, 2", a, p)
	}
}

// An upstream that gives no answer: 502 upstream_unavailable, one attempt,
// no retry, on the leader (the app) and on a follower (the leader's proxy).
func TestUpstreamDown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		body    string
		outcome string
	}{
		{"leader, GET", http.MethodGet, "", "local"},
		{"leader, POST", http.MethodPost, "payload", "local"},
		{"follower, GET", http.MethodGet, "", "forwarded"},
		{"follower, POST", http.MethodPost, "payload", "forwarded"},
	} {
		t.Run(tc.name+", closes without answering", func(t *testing.T) {
			dead := newClosingListener(t)
			cfg := Config{Upstream: dead.addr(), View: leading(1, 1)}
			if tc.outcome == "forwarded" {
				cfg = Config{Upstream: "127.0.0.1:1", View: following(dead.addr())}
			}
			in := newInstance(t, cfg)
			req, _ := http.NewRequest(tc.method, in.url()+"/x", strings.NewReader(tc.body))
			got := do(t, newClient(t), req)
			if got.status != http.StatusBadGateway {
				t.Fatalf("status %d %s, want 502", got.status, got.body)
			}
			if e := got.errorBody(t); e.Code != CodeUpstreamUnavailable {
				t.Errorf("code %q, want %s", e.Code, CodeUpstreamUnavailable)
			}
			if got.header.Get("Retry-After") != "" {
				t.Errorf("a 502 with Retry-After %q", got.header.Get("Retry-After"))
			}
			if n := dead.accepted.Load(); n != 1 {
				t.Errorf("the upstream saw %d connections, want exactly 1", n)
			}
			if n := counted(t, in.reg, tc.outcome, 502); n != 1 {
				t.Errorf("requests_total{outcome=%s, code=502} = %v, want 1", tc.outcome, n)
			}
		})
	}
	t.Run("leader, refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close() // nothing listens there now
		in := newInstance(t, Config{Upstream: addr, View: leading(1, 1)})
		got := get(t, newClient(t), in.url()+"/", nil)
		if got.status != http.StatusBadGateway || got.errorBody(t).Code != CodeUpstreamUnavailable {
			t.Errorf("%d %s, want 502 %s", got.status, got.body, CodeUpstreamUnavailable)
		}
	})
}

// A POST whose app dies after reading it, on a kept-alive connection (where
// net/http would re-send an idempotent request), is answered 502 and
// reached the app exactly once.
func TestPostIsNotRetried(t *testing.T) {
	app := newApp(t, "app")
	var posts atomic.Int64
	app.handle(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			_, _ = io.WriteString(w, "ok")
			return
		}
		_, _ = io.ReadAll(r.Body)
		posts.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close() // dies before answering
	})
	in := newInstance(t, Config{Upstream: app.addr(), View: leading(1, 1)})
	c := newClient(t)
	// A first request leaves the proxy a kept-alive connection to the app.
	if got := get(t, c, in.url()+"/warm", nil); got.status != 200 {
		t.Fatalf("warm-up: %d %s", got.status, got.body)
	}
	req, _ := http.NewRequest(http.MethodPost, in.url()+"/charge", strings.NewReader(`{"amount": 100}`))
	req.Header.Set("Idempotency-Key", "k1") // still not re-sent: its body cannot be rewound
	got := do(t, c, req)
	if got.status != http.StatusBadGateway || got.errorBody(t).Code != CodeUpstreamUnavailable {
		t.Errorf("%d %s, want 502 %s", got.status, got.body, CodeUpstreamUnavailable)
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("the app received the POST %d times, want exactly 1", n)
	}
	if s := app.requests(); len(s) != 2 {
		t.Errorf("the app received %d requests, want 2", len(s))
	}
}

// An SSE response streams: each event reaches the client through the
// proxy while the app is still answering. Through both hops.
func TestStreamingSSE(t *testing.T) {
	for _, hops := range []string{"leader", "follower → leader"} {
		t.Run(hops, func(t *testing.T) {
			app := newApp(t, "app")
			next := make(chan struct{})
			app.handle(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				rc := http.NewResponseController(w)
				for i := range 3 {
					_, _ = fmt.Fprintf(w, "data: event %d\n\n", i)
					if err := rc.Flush(); err != nil {
						return
					}
					select {
					case <-next: // the client saw event i
					case <-r.Context().Done():
						return
					}
				}
			})
			leader := newInstance(t, Config{Upstream: app.addr(), View: leading(9, 1)})
			entry := leader
			if hops != "leader" {
				entry = newInstance(t, Config{Upstream: "127.0.0.1:1", View: following(leader.addr())})
			}
			res, err := newClient(t).Get(entry.url() + "/events")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			lines := bufio.NewReader(res.Body)
			for i := range 3 {
				line, err := lines.ReadString('\n')
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if want := fmt.Sprintf("data: event %d\n", i); line != want {
					t.Fatalf("read %q, want %q", line, want)
				}
				_, _ = lines.ReadString('\n') // the blank line
				next <- struct{}{}            // only now does the app send the next event
			}
		})
	}
}

// A request body streams to the app: the app reads the first part while
// the client has not sent the rest.
func TestStreamingRequestBody(t *testing.T) {
	app := newApp(t, "app")
	first := make(chan string, 1)
	app.handle(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			t.Errorf("reading the first part: %v", err)
			return
		}
		first <- string(buf)
		rest, _ := io.ReadAll(r.Body)
		_, _ = fmt.Fprintf(w, "%s%s", buf, rest)
	})
	in := newInstance(t, Config{Upstream: app.addr(), View: leading(1, 1)})
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, in.url()+"/upload", pr)
	type result struct {
		a   answer
		err error
	}
	done := make(chan result, 1)
	c := newClient(t)
	go func() {
		res, err := c.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		done <- result{answer{status: res.StatusCode, body: string(b)}, err}
	}()
	_, _ = pw.Write([]byte("first"))
	select {
	case got := <-first:
		if got != "first" {
			t.Errorf("the app read %q first", got)
		}
	case <-time.After(generous):
		t.Fatal("the app did not get the first part of a body still being sent")
	}
	_, _ = pw.Write([]byte(" then the rest"))
	_ = pw.Close()
	r := <-done
	if r.err != nil || r.a.status != 200 || r.a.body != "first then the rest" {
		t.Errorf("%+v %v", r.a, r.err)
	}
}

// An Upgrade passes through a follower's proxy and the leader's proxy to
// the leader's app, and the upgraded connection carries bytes both ways.
func TestUpgradeThroughTwoProxies(t *testing.T) {
	app := newApp(t, "app")
	var (
		hijacked   sync.WaitGroup
		serverConn net.Conn
		mu         sync.Mutex
	)
	hijacked.Add(1)
	app.handle(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		mu.Lock()
		serverConn = conn
		mu.Unlock()
		defer hijacked.Done()
		upgrade.Echo(brw, "websocket", "echo: ") // until the client closes
	})
	leader := newInstance(t, Config{Upstream: app.addr(), View: leading(77, 4)})
	follower := newInstance(t, Config{Upstream: "127.0.0.1:1", View: following(leader.addr())})

	conn, err := net.DialTimeout("tcp", follower.addr(), generous)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(generous))
	req, _ := http.NewRequest(http.MethodGet, "http://"+follower.addr()+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set(HeaderFencingToken, "123456") // spoofed
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(res.Header.Get("Upgrade"), "websocket") {
		t.Fatalf("handshake answered %s %v", res.Status, res.Header)
	}
	for _, msg := range []string{"hello\n", "second\n"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		line, err := br.ReadString('\n')
		if err != nil || line != "echo: "+msg {
			t.Fatalf("read %q, %v; want %q", line, err, "echo: "+msg)
		}
	}
	_ = conn.Close()
	hijacked.Wait() // the app's echo loop ends once the close has passed both proxies
	mu.Lock()
	_ = serverConn.Close()
	mu.Unlock()

	s := app.requests()
	if len(s) != 1 {
		t.Fatalf("the app received %d requests, want 1", len(s))
	}
	if tok, term := s[0].Header.Get(HeaderFencingToken), s[0].Header.Get(HeaderTerm); tok != "77" || term != "4" {
		t.Errorf("the upgrade reached the app with token %q term %q, want the leader's 77 and 4", tok, term)
	}
	if s[0].Header.Get(HeaderForwarded) != "" {
		t.Errorf("the app got %s", HeaderForwarded)
	}
}

// Two instances, each with its own app: A leads, B follows with A's proxy
// as the leader's address. Requests to either reach only A's app, with A's
// token; when neither leads (a handover), no app gets anything.
func TestTwoInstances(t *testing.T) {
	appA, appB := newApp(t, "A"), newApp(t, "B")
	var handover atomic.Bool
	var addrA atomic.Value // A's proxy address, known once it listens
	addrA.Store("")
	a := newInstance(t, Config{Upstream: appA.addr(), View: func(time.Time) View {
		if handover.Load() {
			return View{}
		}
		return View{Leading: true, Token: 5001, Term: 12}
	}})
	addrA.Store(a.addr())
	b := newInstance(t, Config{Upstream: appB.addr(), View: func(time.Time) View {
		if handover.Load() {
			return View{}
		}
		return View{LeaderAddress: addrA.Load().(string)}
	}})
	c := newClient(t)
	for i, entry := range []*instance{b, a, b, b} {
		req, _ := http.NewRequest(http.MethodPost, entry.url()+"/write", strings.NewReader(fmt.Sprintf("write %d", i)))
		if got := do(t, c, req); got.status != 200 || got.body != "ok from A" {
			t.Fatalf("request %d: %d %q, want A's app's answer", i, got.status, got.body)
		}
	}
	handover.Store(true)
	for _, entry := range []*instance{a, b} {
		if got := get(t, c, entry.url()+"/write", nil); got.status != 503 || got.errorBody(t).Code != CodeNoLeader {
			t.Fatalf("during the handover: %d %s, want 503 %s", got.status, got.body, CodeNoLeader)
		}
	}
	if s := appB.requests(); len(s) != 0 {
		t.Fatalf("B's app, not the leader's, received %d requests", len(s))
	}
	s := appA.requests()
	if len(s) != 4 {
		t.Fatalf("A's app received %d requests, want 4", len(s))
	}
	for i, r := range s {
		if r.Body != fmt.Sprintf("write %d", i) || r.Header.Get(HeaderFencingToken) != "5001" || r.Header.Get(HeaderTerm) != "12" {
			t.Errorf("A's app got %q with token %q term %q, want write %d with 5001 and 12", r.Body, r.Header.Get(HeaderFencingToken), r.Header.Get(HeaderTerm), i)
		}
	}
	if xff := s[0].Header.Get("X-Forwarded-For"); xff != "127.0.0.1, 127.0.0.1" {
		t.Errorf("through B, X-Forwarded-For %q, want both hops", xff)
	}
	if h := s[0].Host; h != b.addr() {
		t.Errorf("through B, Host %q, want the client's %q", h, b.addr())
	}
	for _, m := range []struct {
		outcome string
		code    int
		want    float64
	}{{"forwarded", 200, 3}, {"local", 200, 0}, {"rejected", 503, 1}} {
		if n := counted(t, b.reg, m.outcome, m.code); n != m.want {
			t.Errorf("B: requests_total{outcome=%s, code=%d} = %v, want %v", m.outcome, m.code, n, m.want)
		}
	}
	if n := counted(t, a.reg, "local", 200); n != 4 {
		t.Errorf("A: requests_total{outcome=local, code=200} = %v, want 4", n)
	}
}

// A client that goes away while the app has not answered ends the
// request at the app: the proxy's request context is the client's.
func TestClientGoneCancelsUpstream(t *testing.T) {
	app := newApp(t, "app")
	cancelled := make(chan struct{})
	app.handle(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(cancelled)
	})
	in := newInstance(t, Config{Upstream: app.addr(), View: leading(1, 1)})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.url()+"/slow", nil)
	c := newClient(t)
	answered := make(chan error, 1)
	go func() {
		res, err := c.Do(req)
		if err == nil {
			res.Body.Close()
		}
		answered <- err
	}()
	eventually(t, "the request to reach the app", func() bool { return len(app.requests()) > 0 })
	cancel()
	select {
	case err := <-answered:
		if err == nil {
			t.Fatal("the request was answered")
		}
	case <-time.After(generous):
		t.Fatal("the client's request did not end when its context was cancelled")
	}
	select {
	case <-cancelled:
	case <-time.After(generous):
		t.Fatal("the app's request was not cancelled")
	}
}

// A request ReverseProxy refuses before the decision (an Upgrade naming no
// printable protocol) is answered 400 bad_request, counted as rejected,
// and leadership is not even asked.
func TestRefusedBeforeTheDecision(t *testing.T) {
	app := newApp(t, "app")
	var calls atomic.Int64
	in := newInstance(t, Config{Upstream: app.addr(), View: func(time.Time) View {
		calls.Add(1)
		return View{Leading: true, Token: 1, Term: 1}
	}})
	conn, err := net.DialTimeout("tcp", in.addr(), generous)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(generous))
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: caf\xc3\xa9\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	got := answer{status: res.StatusCode, header: res.Header, body: string(body)}
	if got.status != http.StatusBadRequest || got.errorBody(t).Code != CodeBadRequest {
		t.Errorf("%d %s, want 400 %s", got.status, got.body, CodeBadRequest)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("View called %d times", n)
	}
	if len(app.requests()) != 0 {
		t.Error("the app received the request")
	}
	if n := counted(t, in.reg, "rejected", 400); n != 1 {
		t.Errorf("requests_total{outcome=rejected, code=400} = %v, want 1", n)
	}
}

// The metrics pass Prometheus' own lint (names, units, help).
func TestMetricsLint(t *testing.T) {
	in := newInstance(t, Config{Upstream: "127.0.0.1:1", View: noLeader})
	_ = get(t, newClient(t), in.url()+"/", nil) // a series of each metric
	families, err := in.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 2 {
		t.Errorf("%d metric families, want 2", len(families))
	}
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
