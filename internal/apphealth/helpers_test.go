package apphealth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// TestMain fails the package if any goroutine outlives the tests: every
// Run, app server and hanging handler the tests start must end. No cluster:
// this package talks to no apiserver.
func TestMain(m *testing.M) {
	os.Exit(kubetest.LeakCheck(m.Run()))
}

// generous bounds real-time waits on a shared, noisy machine; it never
// decides an outcome.
const generous = 20 * time.Second

// interval is the probes' period in tests; only the fake clock sees it.
const interval = 10 * time.Second

// t0 is the fake clock's start.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// app is the app under probe: an httptest server whose answer tests switch.
type app struct {
	srv      *httptest.Server
	handler  atomic.Pointer[http.HandlerFunc]
	requests atomic.Int64
	release  chan struct{} // closed at cleanup: hanging handlers return
}

// newApp starts an app that answers 200 until told otherwise.
func newApp(t *testing.T) *app {
	t.Helper()
	a := &app{release: make(chan struct{})}
	a.answer(http.StatusOK)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.requests.Add(1)
		(*a.handler.Load())(w, r)
	}))
	t.Cleanup(func() {
		close(a.release)
		a.srv.Close()
	})
	return a
}

// url is the app's health endpoint.
func (a *app) url() string { return a.srv.URL + "/healthz" }

// set makes the app answer with h from now on.
func (a *app) set(h http.HandlerFunc) { a.handler.Store(&h) }

// answer makes the app answer code from now on.
func (a *app) answer(code int) {
	a.set(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) })
}

// hang makes the app take every request and answer none (or, with
// headers, send 200 and its headers but never the body), until the
// client gives up or the test ends. Each request is reported on seen, a
// buffered channel with room for every request, before anything else, so
// even a request the client gave up on at once is counted.
func (a *app) hang(headers bool, seen chan<- struct{}) {
	a.set(func(w http.ResponseWriter, r *http.Request) {
		seen <- struct{}{}
		if headers {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-a.release:
		}
	})
}

// run is one Prober running on a fake clock, with its OnChange calls
// recorded.
type run struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	p       *Prober
	changes chan Status // every OnChange call, in order
	cancel  context.CancelFunc
	done    chan error // Run's result
}

// start creates a Prober from cfg (Clock and OnChange are the test's) and
// runs it until the test ends or stop is called.
func start(t *testing.T, cfg Config) *run {
	t.Helper()
	r := &run{
		t:       t,
		clock:   clocktesting.NewFakeClock(t0),
		changes: make(chan Status, 100),
		done:    make(chan error, 1),
	}
	cfg.Clock = r.clock
	cfg.OnChange = func(ctx context.Context, s Status) {
		if ctx == nil {
			t.Error("OnChange without a context")
		}
		r.changes <- s
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.p = p
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// config is a valid Config for url: the given timeout and failure
// threshold, the test interval, and a success threshold of 1.
func config(url string, timeout time.Duration, threshold int) Config {
	return Config{URL: url, Timeout: timeout, Interval: interval, FailureThreshold: threshold, SuccessThreshold: 1}
}

// waitChecks waits until n probes have completed and returns the Status.
func (r *run) waitChecks(n uint64) Status {
	r.t.Helper()
	var s Status
	poll.UntilReport(r.t, generous, time.Millisecond, fmt.Sprintf("probe %d completed", n), func() bool {
		s = r.p.Status()
		return s.Checks >= n
	}, func() string { return fmt.Sprintf("status %+v", s) })
	if s.Checks > n {
		r.t.Fatalf("%d probes completed, want %d", s.Checks, n)
	}
	return s
}

// first waits for the probe Run makes at once.
func (r *run) first() Status {
	r.t.Helper()
	return r.waitChecks(1)
}

// next moves the fake clock one interval on and waits for the probe that
// tick starts.
func (r *run) next() Status {
	r.t.Helper()
	n := r.p.Status().Checks
	r.clock.Step(interval)
	s := r.waitChecks(n + 1)
	if !s.LastCheckAt.Equal(r.clock.Now()) {
		r.t.Errorf("LastCheckAt = %v, want the clock's %v", s.LastCheckAt, r.clock.Now())
	}
	return s
}

// stop ends Run, checks that it returned nil, and returns every OnChange
// call made (all of them have returned: they run on Run's goroutine).
// Calling it again returns nothing.
func (r *run) stop() []Status {
	r.t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
			if err != nil {
				r.t.Errorf("Run returned %v, want nil", err)
			}
		}
	case <-time.After(generous):
		r.t.Fatalf("Run did not return within %s of its context ending", generous)
	}
	var changes []Status
	for {
		select {
		case s := <-r.changes:
			changes = append(changes, s)
		default:
			return changes
		}
	}
}
