package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
)

// fakeSidecar is an httptest server in the sidecar's place: each request
// is recorded and answered by answer (a test's own handler).
type fakeSidecar struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
}

func newFakeSidecar(t *testing.T, answer http.HandlerFunc) *fakeSidecar {
	t.Helper()
	f := &fakeSidecar{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Clone(r.Context()))
		f.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// addr is the fake's host:port, for --addr.
func (f *fakeSidecar) addr() string { return strings.TrimPrefix(f.URL, "http://") }

func (f *fakeSidecar) recorded() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.requests...)
}

// reply writes code with body as JSON (a string is written verbatim).
func reply(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if s, ok := body.(string); ok {
		fmt.Fprint(w, s)
		return
	}
	_ = json.NewEncoder(w).Encode(body)
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

var (
	leading = api.Status{
		Identity: "pod-a_x1", Namespace: "shop", Lease: "orders", Leader: true, Holder: "pod-a_x1",
		Term: 5, FencingToken: 1042, ValidUntil: "2026-07-01T12:00:07.5Z", ValidForMs: 7500,
		AcquiredAt: "2026-07-01T11:58:00Z", RenewedAt: "2026-07-01T11:59:59.5Z", ObservedAt: "2026-07-01T11:59:59.5Z",
		Index: 1 << 50, Candidate: true,
	}
	following = api.Status{
		Identity: "pod-b_y2", Namespace: "shop", Lease: "orders", Holder: "pod-a_x1",
		Term: 5, FencingToken: 1042, ObservedAt: "2026-07-01T11:59:59Z", Index: 7, Candidate: true,
	}
)

// The sidecar is in the same pod: the client never uses a proxy, whatever
// HTTP_PROXY says (pkg/client's default transport has no Proxy: its tests
// check that), and a request goes straight to the sidecar.
func TestClientNeverUsesAProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	t.Setenv("http_proxy", "http://proxy.invalid:3128")
	t.Setenv("NO_PROXY", "")
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, leading) })
	r := invoke(t, nil, "status", "--addr", f.addr())
	if r.code != 0 || len(f.recorded()) != 1 {
		t.Fatalf("exit %d, %d requests reached the sidecar; stderr %s", r.code, len(f.recorded()), r.stderr)
	}
}

func TestStatusPrintsATable(t *testing.T) {
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/status" {
			reply(w, 404, `{"error":"no such endpoint"}`)
			return
		}
		reply(w, 200, leading)
	})
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	var stdout strings.Builder
	code := cli([]string{"status", "--addr", f.addr()}, &env{ctx: t.Context(), stdout: &stdout, stderr: &stdout,
		getenv: func(string) string { return "" }, now: func() time.Time { return now }})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stdout.String())
	}
	want := `lease          shop/orders
identity       pod-a_x1
leader         yes, valid for 7.5s (until 2026-07-01T12:00:07.5Z)
holder         pod-a_x1 (this instance)
term           5
fencing token  1042
candidate      yes
acquired       2026-07-01T11:58:00Z (2m0s ago)
renewed        2026-07-01T11:59:59.5Z (500ms ago)
observed       2026-07-01T11:59:59.5Z (500ms ago)
last error     none
index          1125899906842624
`
	if stdout.String() != want {
		t.Errorf("status printed\n%s\nwant\n%s", stdout.String(), want)
	}
}

func TestStatusShowsProblems(t *testing.T) {
	msg := `namespaces "shop" not found`
	st := following
	st.Holder, st.Candidate, st.LastError, st.LastErrorAt = "", false, &msg, "2026-07-01T11:59:58Z"
	st.AppHealth = &api.AppHealth{ConsecutiveFailures: 3, LastError: "GET http://127.0.0.1:8080/healthz: 503", LastCheckAt: "2026-07-01T11:59:59Z"}
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, st) })
	r := invoke(t, nil, "status", "--addr", f.addr())
	for _, want := range []string{
		"\nleader         no\n",
		"\nholder         none\n",
		"\ncandidate      no (out of the election",
		"\nlast error     namespaces \"shop\" not found (2026-07-01T11:59:58Z (",
		"\napp health     unhealthy: 3 failed probes in a row, last: GET http://127.0.0.1:8080/healthz: 503 (last success -)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.code != 0 {
		t.Errorf("exit %d, want 0: the sidecar answered", r.code)
	}
}

// An app on its way back to healthy (passes in a row, fewer than the
// success threshold) is shown as such, not as failing.
func TestStatusShowsAppRecovering(t *testing.T) {
	st := following
	st.Candidate = false
	st.AppHealth = &api.AppHealth{ConsecutiveSuccesses: 2, LastCheckAt: "2026-07-01T11:59:59Z", LastSuccessAt: "2026-07-01T11:59:59Z"}
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, st) })
	r := invoke(t, nil, "status", "--addr", f.addr())
	if want := "\napp health     not healthy yet: 2 passed probes in a row, fewer than LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD (last checked 2026-07-01T11:59:59Z ("; !strings.Contains(r.stdout, want) {
		t.Errorf("status output lacks %q:\n%s", want, r.stdout)
	}
}

// -o json prints the API's answer verbatim: fields this client does not
// know (a newer sidecar's) are kept.
func TestStatusJSONIsTheAPIsAnswer(t *testing.T) {
	body := `{"identity":"pod-a_x1","leader":true,"fencingToken":1042,"index":9,"lastError":null,"futureField":{"x":1}}` + "\n"
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, body) })
	r := invoke(t, nil, "status", "-o", "json", "--addr", f.addr())
	if r.code != 0 || r.stdout != body {
		t.Errorf("exit %d, stdout %q; want 0 and %q", r.code, r.stdout, body)
	}
}

// The default address is LEASEHOLD_API_ADDR, as in the sidecar's own
// container, even when it is a listen address.
func TestAddrDefaultsToLEASEHOLD_API_ADDR(t *testing.T) {
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, leading) })
	_, port, _ := net.SplitHostPort(f.addr())
	for _, v := range []string{f.addr(), ":" + port, "0.0.0.0:" + port} {
		before := len(f.recorded())
		r := invoke(t, map[string]string{"LEASEHOLD_API_ADDR": v}, "status")
		if r.code != 0 || len(f.recorded()) != before+1 {
			t.Errorf("LEASEHOLD_API_ADDR=%s: exit %d, stderr %s", v, r.code, r.stderr)
		}
	}
	if r := invoke(t, map[string]string{"LEASEHOLD_API_ADDR": "bogus"}, "status"); r.code != exitUsage {
		t.Errorf("LEASEHOLD_API_ADDR=bogus: exit %d, want 2", r.code)
	}
}

// Error answers are shown to the user with the body's message; no answer
// at all names the address.
func TestErrorsExitThreeAndShowTheMessage(t *testing.T) {
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/status":
			reply(w, 500, `{"error":"the elector is stuck","code":"internal"}`)
		case "/v1/token":
			reply(w, 404, `{"error":"no such endpoint: /v1/token"}`)
		case "/v1/release":
			reply(w, 503, `{"error":"release failed: elector stopped"}`)
		default:
			reply(w, 502, "<html>bad gateway</html>")
		}
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "the sidecar answered 500 Internal Server Error: the elector is stuck"},
		{[]string{"token"}, "the sidecar answered 404 Not Found: no such endpoint: /v1/token"},
		{[]string{"release"}, "the sidecar answered 503 Service Unavailable: release failed: elector stopped"},
		{[]string{"wait"}, "the sidecar answered 502 Bad Gateway: <html>bad gateway</html>"},
	} {
		r := invoke(t, nil, append(tc.args, "--addr", f.addr())...)
		if r.code != exitNoAnswer || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 3 and %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}

	addr := closedAddr(t)
	for _, args := range [][]string{{"status"}, {"token"}, {"release"}, {"wait", "--timeout", "300ms"}} {
		start := time.Now()
		r := invoke(t, nil, append(args, "--addr", addr)...)
		if r.code != exitNoAnswer || !strings.Contains(r.stderr, "no answer from the sidecar at http://"+addr) ||
			!strings.Contains(r.stderr, "connection refused") || !strings.Contains(r.stderr, "is the leasehold sidecar running") {
			t.Errorf("%v with nothing listening: exit %d, stderr %q; want exit 3 naming the address", args, r.code, r.stderr)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%v with nothing listening took %v", args, took)
		}
	}
}

func TestToken(t *testing.T) {
	body := `{"fencingToken":1042,"term":5,"validUntil":"2026-07-01T12:00:07.5Z","validForMs":7500}` + "\n"
	leader := true
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/token" {
			reply(w, 404, `{"error":"no such endpoint"}`)
			return
		}
		if !leader {
			reply(w, 503, `{"error":"not leader"}`)
			return
		}
		reply(w, 200, body)
	})
	if r := invoke(t, nil, "token", "--addr", f.addr()); r.code != 0 || r.stdout != "1042\n" || r.stderr != "" {
		t.Errorf("leading: exit %d, stdout %q, stderr %q; want 0 and the token alone", r.code, r.stdout, r.stderr)
	}
	if r := invoke(t, nil, "token", "-o", "json", "--addr", f.addr()); r.code != 0 || r.stdout != body {
		t.Errorf("leading, -o json: exit %d, stdout %q; want 0 and the API's answer", r.code, r.stdout)
	}
	leader = false
	if r := invoke(t, nil, "token", "--addr", f.addr()); r.code != exitNotLeader || r.stdout != "" || r.stderr != "leasehold token: not leader\n" {
		t.Errorf("not leading: exit %d, stdout %q, stderr %q; want 1 and \"not leader\"", r.code, r.stdout, r.stderr)
	}
}

// wait blocks on GET /v1/leader?wait= (never polls without waiting) and
// exits 0 once leading.
func TestWaitReturnsOnceLeading(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n < 3 {
			reply(w, 503, following) // the wait ran out
			return
		}
		reply(w, 200, leading)
	})
	r := invoke(t, nil, "wait", "--addr", f.addr())
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if want := "leading: term 5, fencing token 1042, valid for 7.5s (until 2026-07-01T12:00:07.5Z)\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	reqs := f.recorded()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, req := range reqs {
		if req.Method != http.MethodGet || req.URL.Path != "/v1/leader" || req.URL.Query().Get("wait") != "5m0s" {
			t.Errorf("request %s %s: want GET /v1/leader?wait=5m0s (no --timeout: the longest wait)", req.Method, req.URL)
		}
	}

	r = invoke(t, nil, "wait", "-o", "json", "--addr", f.addr())
	var st api.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || st != leading {
		t.Errorf("-o json: exit %d, %q (%v)", r.code, r.stdout, err)
	}
}

// --timeout bounds the wait the sidecar is asked for, and wait exits 1
// when it passes without leadership.
func TestWaitTimesOut(t *testing.T) {
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		var d time.Duration // no wait: answer at once, as the sidecar does
		if q := r.URL.Query(); q.Has("wait") {
			var err error
			if d, err = time.ParseDuration(q.Get("wait")); err != nil {
				reply(w, 400, `{"error":"invalid wait"}`)
				return
			}
		}
		select { // a blocking wait, as the sidecar's
		case <-time.After(d):
		case <-r.Context().Done():
		}
		reply(w, 503, following)
	})
	start := time.Now()
	r := invoke(t, nil, "wait", "--timeout", "400ms", "--addr", f.addr())
	took := time.Since(start)
	if r.code != exitNotLeader || r.stdout != "" || r.stderr != "leasehold wait: not leading after 400ms (holder: pod-a_x1)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the holder named", r.code, r.stdout, r.stderr)
	}
	if took < 400*time.Millisecond || took > 10*time.Second {
		t.Errorf("took %v, want about the 400ms timeout", took)
	}
	reqs := f.recorded()
	if w, err := time.ParseDuration(reqs[0].URL.Query().Get("wait")); err != nil || w > 400*time.Millisecond || w <= 0 {
		t.Errorf("first request waits %q, want at most the timeout", reqs[0].URL.Query().Get("wait"))
	}
	if len(reqs) > 5 {
		t.Errorf("%d requests in 400ms: want blocking requests, not polling", len(reqs))
	}
}

// wait asks at least once, however short its timeout: a leader exits 0
// even when the timeout is spent before the first request is sent.
func TestWaitAsksAtLeastOnce(t *testing.T) {
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, leading)
	})
	r := invoke(t, nil, "wait", "--timeout", "1ns", "--addr", f.addr())
	if r.code != 0 || r.stderr != "" {
		t.Errorf("exit %d, stderr %q; want 0: it leads", r.code, r.stderr)
	}
	if reqs := f.recorded(); len(reqs) != 1 || reqs[0].URL.Query().Has("wait") {
		t.Errorf("requests %v; want one, that does not block", reqs)
	}
}

// A sidecar that answers with an error (shutting down, with Retry-After)
// is asked again after the Retry-After, and said so once on stderr.
func TestWaitRetriesAfterRetryAfter(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n < 3 {
			w.Header().Set("Retry-After", "1")
			reply(w, 503, `{"error":"shutting down: this sidecar no longer serves blocking requests; retry after 2s"}`)
			return
		}
		reply(w, 200, leading)
	})
	start := time.Now()
	r := invoke(t, nil, "wait", "--timeout", "20s", "--addr", f.addr())
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "shutting down") || !strings.Contains(r.stderr, "asking again") {
		t.Errorf("stderr %q: want one line saying the sidecar is shutting down", r.stderr)
	}
	if took < 2*time.Second {
		t.Errorf("took %v: want the two Retry-After: 1 honoured", took)
	}
}

func TestWaitRefusedIsAUsageError(t *testing.T) {
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 400, `{"error":"invalid wait \"x\": want a duration such as 30s or 5m"}`)
	})
	r := invoke(t, nil, "wait", "--addr", f.addr())
	if r.code != exitUsage || !strings.Contains(r.stderr, "400 Bad Request: invalid wait") {
		t.Errorf("exit %d, stderr %q; want 2 and the sidecar's message", r.code, r.stderr)
	}
}

func TestRelease(t *testing.T) {
	released := true
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/release" {
			reply(w, 405, `{"error":"method not allowed"}`)
			return
		}
		if v := r.URL.Query().Get("for"); v != "" {
			if d, err := time.ParseDuration(v); err != nil || d > time.Hour {
				reply(w, 400, `{"error":"invalid for \"`+v+`\": at most 1h0m0s"}`)
				return
			}
		}
		st := following
		st.Candidate = false
		reply(w, 200, api.Release{Released: released, Status: st})
	})
	r := invoke(t, nil, "release", "--addr", f.addr())
	if r.code != 0 || r.stdout != "released the Lease shop/orders; out of the election for the sidecar's lease duration\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if q := f.recorded()[0].URL.RawQuery; q != "" {
		t.Errorf("query %q without --for: want none (the sidecar's default)", q)
	}
	released = false
	r = invoke(t, nil, "release", "--for", "30s", "--addr", f.addr())
	if r.code != 0 || r.stdout != "not holding the Lease shop/orders: nothing to release; out of the election for 30s\n" {
		t.Errorf("not holding: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if q := f.recorded()[1].URL.Query().Get("for"); q != "30s" {
		t.Errorf("for=%q, want 30s", q)
	}
	r = invoke(t, nil, "release", "--for", "0s", "-o", "json", "--addr", f.addr())
	var a api.Release
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || r.code != 0 || a.Released || a.Candidate {
		t.Errorf("-o json: exit %d, %q (%v)", r.code, r.stdout, err)
	}
	if q := f.recorded()[2].URL.Query().Get("for"); q != "0s" {
		t.Errorf("for=%q, want 0s (set explicitly)", q)
	}
	r = invoke(t, nil, "release", "--for", "2h", "--addr", f.addr())
	if r.code != exitUsage || !strings.Contains(r.stderr, `400 Bad Request: invalid for "2h0m0s": at most 1h0m0s`) {
		t.Errorf("--for 2h: exit %d, stderr %q; want 2 and the sidecar's message", r.code, r.stderr)
	}
}

// With data-aware failover the status shows this instance's rank, the
// Lease's generation and the best candidate.
func TestStatusShowsRank(t *testing.T) {
	st := following
	best := "pod-b_x2"
	st.Rank = &api.Rank{Known: true, Generation: "h1", Position: 42, ObservedAt: "2026-07-01T11:59:59Z", LeaseGeneration: "h1", BestCandidate: &best}
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, st) })
	r := invoke(t, nil, "status", "--addr", f.addr())
	for _, want := range []string{
		"\nrank           generation \"h1\", position 42 (probed 2026-07-01T11:59:59Z (",
		"\nlease gen      \"h1\"\n",
		"\nbest member    pod-b_x2\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// A follower's status shows the holder's clock: the offset interval, the
// rate interval and its verdict against the limit; before the rate is
// bounded, says so.
func TestStatusShowsTheClocksAndTheApiserver(t *testing.T) {
	st := following
	lower, upper := 1.3112, 1.3190
	st.HolderClock = &api.HolderClock{Holder: "pod-a_x1", Renewals: 40, SpanMs: 19500, ObservedAt: "2026-07-01T11:59:59Z",
		OffsetLowerMs: -3, OffsetUpperMs: 498, RateLower: &lower, RateUpper: &upper, Level: "beyond", Limit: 0.2, DelayBoundMs: 500}
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, st) })
	r := invoke(t, nil, "status", "--addr", f.addr())
	for _, want := range []string{
		"\nholder clock   pod-a_x1, from 40 renewals over 19.5s (newest 2026-07-01T11:59:59Z (",
		"\nclock offset   -3ms to +498ms (the holder's clock minus this one's; the upper bound assumes a renewal arrived within 500ms)\n",
		"\nclock rate     1.3112 to 1.3190 of this one's (limit 1±0.2): BEYOND the limit: a second leader is possible\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, r.stdout)
		}
	}

	st.HolderClock.RateLower, st.HolderClock.RateUpper, st.HolderClock.Level = nil, nil, "none"
	f = newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, st) })
	r = invoke(t, nil, "status", "--addr", f.addr())
	if want := "\nclock rate     not bounded yet (limit ±0.2)\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("status output lacks %q:\n%s", want, r.stdout)
	}
	st.HolderClock = nil
	f = newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, st) })
	if r = invoke(t, nil, "status", "--addr", f.addr()); strings.Contains(r.stdout, "clock") {
		t.Errorf("status without holderClock shows clock rows:\n%s", r.stdout)
	}
	st.ApiserverClock = &api.ApiserverClock{OffsetLowerMs: -415, OffsetUpperMs: 26, Responses: 20, ObservedAt: "2026-07-01T11:59:59Z"}
	f = newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, st) })
	r = invoke(t, nil, "status", "--addr", f.addr())
	if want := "\nserver clock   -415ms to +26ms (the apiserver's clock minus this one's, from 20 responses, newest 2026-07-01T11:59:59Z ("; !strings.Contains(r.stdout, want) {
		t.Errorf("status output lacks %q:\n%s", want, r.stdout)
	}
	for _, tc := range []struct {
		v    api.ApiserverVersion
		want string
	}{
		{api.ApiserverVersion{GitVersion: "v1.37.2", ResourceVersionsComparable: true, NativeSidecars: true},
			"\napiserver      v1.37.2, resourceVersions comparable: fencing tokens strictly increase\n"},
		{api.ApiserverVersion{GitVersion: "v1.34.1", NativeSidecars: true},
			"\napiserver      v1.34.1, resourceVersions not promised comparable (before 1.35): see docs/compatibility.md\n"},
	} {
		st.ApiserverVersion = &tc.v
		f = newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, st) })
		if r = invoke(t, nil, "status", "--addr", f.addr()); !strings.Contains(r.stdout, tc.want) {
			t.Errorf("status output lacks %q:\n%s", tc.want, r.stdout)
		}
	}
}
