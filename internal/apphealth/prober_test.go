package apphealth

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A new Prober is not healthy, and no number of failures changes that or
// calls OnChange; the first 2xx makes it healthy and calls OnChange once.
func TestNotHealthyBeforeFirstSuccess(t *testing.T) {
	a := newApp(t)
	a.answer(http.StatusInternalServerError)
	r := start(t, config(a.url(), time.Second, 3))

	s := r.first()
	for i := 1; ; i++ {
		if s.Healthy || s.ConsecutiveFailures != i || s.LastError != "status 500" || !s.LastSuccessAt.IsZero() || !s.ChangedAt.IsZero() {
			t.Fatalf("after %d failures from the start: %+v, want unhealthy, %d failures, LastError \"status 500\", no success, no change", i, s, i)
		}
		if i == 5 { // beyond the threshold of 3
			break
		}
		s = r.next()
	}

	a.answer(http.StatusOK)
	s = r.next()
	now := r.clock.Now()
	want := Status{Healthy: true, ConsecutiveSuccesses: 1, Checks: 6, LastCheckAt: now, LastSuccessAt: now, ChangedAt: now}
	if s != want {
		t.Fatalf("after the first success: %+v, want %+v", s, want)
	}
	if changes := r.stop(); len(changes) != 1 || changes[0] != want {
		t.Fatalf("OnChange calls = %+v, want exactly one, with %+v", changes, want)
	}
}

// FailureThreshold−1 consecutive failures leave a healthy Prober healthy;
// a success resets the count; the threshold-th consecutive failure makes
// it unhealthy. OnChange fires once per transition, with the new Status.
func TestFailureThreshold(t *testing.T) {
	for _, threshold := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("threshold=%d", threshold), func(t *testing.T) {
			a := newApp(t)
			r := start(t, config(a.url(), time.Second, threshold))
			var want []Status // expected OnChange calls

			s := r.first()
			if !s.Healthy || s.ConsecutiveFailures != 0 {
				t.Fatalf("after one 200: %+v, want healthy", s)
			}
			want = append(want, s)

			// threshold−1 failures, a success, threshold−1 failures again:
			// healthy throughout, because the success reset the count.
			for round := range 2 {
				a.answer(http.StatusServiceUnavailable)
				for i := 1; i < threshold; i++ {
					s = r.next()
					if !s.Healthy || s.ConsecutiveFailures != i || s.LastError != "status 503" {
						t.Fatalf("round %d, after %d failures (threshold %d): %+v, want healthy with %d failures", round, i, threshold, s, i)
					}
				}
				if round == 0 {
					a.answer(http.StatusOK)
					s = r.next()
					if !s.Healthy || s.ConsecutiveFailures != 0 || s.LastError != "" || !s.LastSuccessAt.Equal(r.clock.Now()) {
						t.Fatalf("after a success: %+v, want healthy, count reset, no error", s)
					}
				}
			}

			healthySince := s.ChangedAt
			if !healthySince.Equal(t0) {
				t.Errorf("ChangedAt = %v, want the first probe's %v", healthySince, t0)
			}
			s = r.next() // the threshold-th consecutive failure
			if s.Healthy || s.ConsecutiveFailures != threshold || s.LastError != "status 503" || !s.ChangedAt.Equal(r.clock.Now()) {
				t.Fatalf("after %d consecutive failures: %+v, want unhealthy since now", threshold, s)
			}
			want = append(want, s)

			s = r.next()
			if s.Healthy || s.ConsecutiveFailures != threshold+1 {
				t.Fatalf("after one more failure: %+v, want unhealthy, %d failures", s, threshold+1)
			}

			a.answer(http.StatusNoContent)
			s = r.next()
			if !s.Healthy || s.ConsecutiveFailures != 0 || !s.ChangedAt.Equal(r.clock.Now()) {
				t.Fatalf("after a 204: %+v, want healthy since now", s)
			}
			want = append(want, s)

			changes := r.stop()
			if len(changes) != len(want) {
				t.Fatalf("OnChange calls = %+v, want %+v", changes, want)
			}
			for i := range want {
				if changes[i] != want[i] {
					t.Errorf("OnChange call %d = %+v, want %+v", i, changes[i], want[i])
				}
			}
		})
	}
}

// Exactly the 2xx answers pass; 3xx (redirects are not followed), 4xx and
// 5xx fail, with "status N" as the reason.
func TestStatusCodes(t *testing.T) {
	for _, tc := range []struct {
		code    int
		healthy bool
	}{
		{200, true}, {204, true}, {299, true},
		{301, false}, {302, false}, {304, false}, {307, false},
		{400, false},
		{404, false}, {500, false}, {503, false},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			var followed atomic.Int64
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				followed.Add(1)
				w.WriteHeader(http.StatusOK)
			}))
			defer target.Close()

			a := newApp(t)
			a.set(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Location", target.URL+"/elsewhere")
				w.WriteHeader(tc.code)
			})
			r := start(t, config(a.url(), time.Second, 1))
			s := r.first()
			r.stop()

			wantErr := ""
			if !tc.healthy {
				wantErr = fmt.Sprintf("status %d", tc.code)
			}
			if s.Healthy != tc.healthy || s.LastError != wantErr {
				t.Errorf("status %d: %+v, want healthy=%v, LastError %q", tc.code, s, tc.healthy, wantErr)
			}
			if n := followed.Load(); n != 0 {
				t.Errorf("the redirect target was contacted %d times; redirects must not be followed", n)
			}
		})
	}
}

// A Client supplied by the caller does not follow redirects either, and
// the caller's Client is not modified.
func TestSuppliedClientDoesNotFollowRedirects(t *testing.T) {
	a := newApp(t)
	a.set(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Redirect(w, r, "/moved", http.StatusFound)
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	cfg := config(a.url(), time.Second, 1)
	cfg.Client = client
	r := start(t, cfg)
	s := r.first()
	r.stop()
	if s.Healthy || s.LastError != "status 302" {
		t.Errorf("after a redirect: %+v, want unhealthy with \"status 302\"", s)
	}
	if n := a.requests.Load(); n != 1 {
		t.Errorf("app saw %d requests, want 1 (the redirect not followed)", n)
	}
	if client.CheckRedirect != nil {
		t.Error("New modified the caller's Client")
	}
}

// A probe that outlives Timeout (real time) fails with "timeout after …",
// whether the app withholds its headers or its body.
func TestTimeoutIsFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers bool
		wantErr string
	}{
		{"no answer", false, "timeout after 200ms"},
		{"no body", true, "reading body: timeout after 200ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newApp(t)
			r := start(t, config(a.url(), 200*time.Millisecond, 2))
			if s := r.first(); !s.Healthy {
				t.Fatalf("after a 200: %+v, want healthy", s)
			}

			seen := make(chan struct{}, 10)
			a.hang(tc.headers, seen)
			s := r.next()
			// The handler may run only after the client gave up.
			select {
			case <-seen:
			case <-time.After(generous):
				t.Fatal("the probe never reached the hanging handler")
			}
			if n := len(seen); n != 0 {
				t.Fatalf("the hanging handler saw %d requests, want 1", n+1)
			}
			if !s.Healthy || s.ConsecutiveFailures != 1 || s.LastError != tc.wantErr {
				t.Fatalf("after one timeout: %+v, want healthy, 1 failure, LastError %q", s, tc.wantErr)
			}
			s = r.next()
			if s.Healthy || s.ConsecutiveFailures != 2 || s.LastError != tc.wantErr {
				t.Fatalf("after two timeouts: %+v, want unhealthy, LastError %q", s, tc.wantErr)
			}
			if changes := r.stop(); len(changes) != 2 || changes[1] != s {
				t.Fatalf("OnChange calls = %+v, want healthy then %+v", changes, s)
			}
		})
	}
}

// An app that is gone (connection refused) fails the probe, with the dial
// error as the reason.
func TestConnectionRefusedIsFailure(t *testing.T) {
	a := newApp(t)
	r := start(t, config(a.url(), time.Second, 1))
	if s := r.first(); !s.Healthy {
		t.Fatalf("after a 200: %+v, want healthy", s)
	}
	a.srv.Close()
	s := r.next()
	if s.Healthy || !strings.Contains(s.LastError, "connection refused") || strings.Contains(s.LastError, "Get ") {
		t.Fatalf("with the app gone: %+v, want unhealthy with a dial error (without the URL)", s)
	}
	if changes := r.stop(); len(changes) != 2 || changes[1] != s {
		t.Fatalf("OnChange calls = %+v, want healthy then %+v", changes, s)
	}
}

// Probes are GETs with leasehold's User-Agent and Accept: */*, open a
// fresh connection each time (the short body would let a kept-alive
// connection be reused), and cope with a large body.
func TestProbeRequests(t *testing.T) {
	type seen struct{ method, userAgent, accept string }
	var (
		mu       sync.Mutex
		requests []seen
		newConns atomic.Int64
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, seen{r.Method, r.Header.Get("User-Agent"), r.Header.Get("Accept")})
		body := []byte("ok")
		if len(requests) > 3 {
			body = bytes.Repeat([]byte("x"), 1<<20) // far beyond what a probe reads
		}
		mu.Unlock()
		_, _ = w.Write(body)
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	r := start(t, config(srv.URL+"/healthz", time.Second, 1))
	r.first()
	r.next()
	r.next()
	if n := newConns.Load(); n != 3 {
		t.Errorf("three probes of a short 200 opened %d connections, want 3 (no keep-alive)", n)
	}
	s := r.next() // a 1 MiB body
	r.stop()
	if !s.Healthy || s.Checks != 4 {
		t.Fatalf("after four probes, the last with a 1 MiB body: %+v, want healthy", s)
	}
	mu.Lock()
	defer mu.Unlock()
	want := seen{http.MethodGet, "leasehold-probe", "*/*"}
	if len(requests) != 4 {
		t.Fatalf("app saw %d requests, want 4", len(requests))
	}
	for i, got := range requests {
		if got != want {
			t.Errorf("request %d = %+v, want %+v", i, got, want)
		}
	}
}

// The default client never consults HTTP_PROXY and friends: a probe of a
// (non-loopback, unresolvable) host fails on its own and never reaches the
// proxy. Go itself bypasses proxies for loopback hosts, so the behavioural
// half needs such a host; and because http.ProxyFromEnvironment reads the
// environment only once per process, the transport is also checked
// directly.
func TestProxyEnvironmentIgnored(t *testing.T) {
	var contacted atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		contacted.Add(1)
		w.WriteHeader(http.StatusOK) // a proxy that would make the app look healthy
	}))
	defer proxy.Close()
	for _, name := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		t.Setenv(name, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	r := start(t, config("http://app.invalid/healthz", time.Second, 1))
	s := r.first()
	r.stop()
	if n := contacted.Load(); n != 0 {
		t.Fatalf("the proxy from the environment was contacted %d times", n)
	}
	if s.Healthy || s.LastError == "" {
		t.Fatalf("probe of an unresolvable host: %+v, want a failure", s)
	}
	if r.p.transport == nil || r.p.transport.Proxy != nil || !r.p.transport.DisableKeepAlives {
		t.Fatal("the default transport must have no Proxy func and keep-alives disabled")
	}
}

// A probe reads at most 4 KiB of the body: an app that sends 200 and 4 KiB
// at once, then never finishes its body, passes well within the Timeout.
func TestReadsAtMost4KiB(t *testing.T) {
	a := newApp(t)
	a.set(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(bytes.Repeat([]byte("x"), 4<<10))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-a.release:
		}
	})
	r := start(t, config(a.url(), interval, 1)) // reading more would take the whole timeout, 10s
	s := r.first()
	r.stop()
	if !s.Healthy || s.LastError != "" {
		t.Fatalf("after 200 and 4 KiB of a longer body: %+v, want healthy", s)
	}
}

// Run returns nil as soon as its context ends, also while a probe hangs
// (with a Timeout far beyond the wait), and the abandoned probe leaves no
// trace: no Status change, no metric, no OnChange.
func TestRunReturnsWhileProbeHangs(t *testing.T) {
	a := newApp(t)
	seen := make(chan struct{}, 1)
	a.hang(false, seen)
	cfg := config(a.url(), time.Hour, 1)
	cfg.Interval = time.Hour
	cfg.Metrics = NewMetrics(nil)
	r := start(t, cfg)

	select {
	case <-seen:
	case <-time.After(generous):
		t.Fatal("the first probe did not reach the app")
	}
	changes := r.stop() // fails the test unless Run returns within generous, far below Timeout
	if s := r.p.Status(); s != (Status{}) {
		t.Errorf("status after an abandoned probe = %+v, want the zero Status", s)
	}
	if len(changes) != 0 {
		t.Errorf("OnChange calls = %+v, want none", changes)
	}
	if got := checkCounts(t, cfg.Metrics); got != [2]float64{0, 0} {
		t.Errorf("checks {success, failure} = %v, want none", got)
	}
}

// Run may be called once; Run on an ended context returns nil at once
// without probing.
func TestRunOnce(t *testing.T) {
	a := newApp(t)
	p, err := New(config(a.url(), time.Second, 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run on an ended context = %v, want nil", err)
	}
	if n := a.requests.Load(); n != 0 {
		t.Errorf("Run on an ended context sent %d probes", n)
	}
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("second Run returned nil, want an error")
	}
}

// Transitions are logged: Info when the app becomes healthy, Warn with the
// reason when it becomes unhealthy, and one Warn when it has failed the
// threshold without ever having been healthy.
func TestLogsTransitions(t *testing.T) {
	a := newApp(t)
	a.answer(http.StatusBadGateway)
	var buf bytes.Buffer // written by Run's goroutine, read after Run returned
	cfg := config(a.url(), time.Second, 2)
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	r := start(t, cfg)
	r.first()
	r.next()
	r.next() // still failing: no further log line above Debug
	a.answer(http.StatusOK)
	r.next()
	a.answer(http.StatusBadGateway)
	r.next()
	r.next()
	r.stop()

	u := a.url()
	want := strings.Join([]string{
		`level=WARN msg="app not healthy yet" url=` + u + ` err="status 502" failures=2`,
		`level=INFO msg="app healthy" url=` + u,
		`level=WARN msg="app unhealthy" url=` + u + ` err="status 502" failures=2`,
		``,
	}, "\n")
	if got := buf.String(); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}

// Damping, on a real app and the fake clock: with SuccessThreshold 3 a new
// Prober becomes healthy only at its third 2xx in a row; after
// FailureThreshold failures made it unhealthy, a check that flaps (never
// three passes in a row) changes nothing and calls no OnChange, however
// long it flaps; the third pass in a row makes it healthy again. Exactly
// the two transitions and the first success call OnChange.
func TestSuccessThresholdDampsAFlappingCheck(t *testing.T) {
	a := newApp(t)
	cfg := config(a.url(), time.Second, 2)
	cfg.SuccessThreshold = 3
	r := start(t, cfg)
	var want []Status

	probe := func(code int) Status {
		t.Helper()
		a.answer(code)
		if r.p.Status().Checks == 0 {
			return r.first()
		}
		return r.next()
	}
	for i := 1; i <= 2; i++ {
		if s := probe(http.StatusOK); s.Healthy || s.ConsecutiveSuccesses != i || !s.ChangedAt.IsZero() {
			t.Fatalf("after %d passes from the start: %+v, want not healthy yet, %d successes", i, s, i)
		}
	}
	s := probe(http.StatusOK)
	if !s.Healthy || s.ConsecutiveSuccesses != 3 || !s.ChangedAt.Equal(r.clock.Now()) {
		t.Fatalf("after 3 passes: %+v, want healthy since now", s)
	}
	want = append(want, s)

	probe(http.StatusServiceUnavailable)
	s = probe(http.StatusServiceUnavailable)
	if s.Healthy || s.ConsecutiveSuccesses != 0 {
		t.Fatalf("after 2 failures: %+v, want unhealthy", s)
	}
	want = append(want, s)

	// Flapping: at most two passes in a row, for many intervals.
	for round, code := range []int{200, 503, 200, 200, 503, 200, 503, 204, 204, 500, 200, 200, 503} {
		if s = probe(code); s.Healthy {
			t.Fatalf("flap %d (%d): %+v, want still unhealthy", round, code, s)
		}
	}

	probe(http.StatusOK)
	if s = probe(http.StatusOK); s.Healthy || s.ConsecutiveSuccesses != 2 {
		t.Fatalf("after 2 passes in a row: %+v, want still unhealthy", s)
	}
	s = probe(http.StatusOK)
	if !s.Healthy || !s.ChangedAt.Equal(r.clock.Now()) {
		t.Fatalf("after 3 passes in a row: %+v, want healthy since now", s)
	}
	want = append(want, s)

	changes := r.stop()
	if len(changes) != len(want) {
		t.Fatalf("OnChange calls %+v, want %+v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Errorf("OnChange call %d = %+v, want %+v", i, changes[i], want[i])
		}
	}
}
