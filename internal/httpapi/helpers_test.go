package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leasehold/leasehold/internal/apphealth"
	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// generous bounds real-time waits on a shared, noisy machine; it never
// decides an outcome.
const generous = 20 * time.Second

const (
	identity      = "app-7d9f-x2k4_3f9a"
	other         = "app-5c4b-q8m1_77e0"
	leaseDuration = 15 * time.Second
)

// t0 is the fake clock's start; it has nanoseconds, to check RFC3339Nano.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)

// firstIndex is the Index of every fixture's first Snapshot. Like the
// elector's, it is a process start time in microseconds, far from 0, so
// that no test relies on indices that start at 0.
var firstIndex = uint64(t0.UnixMicro())

// idx is the Index after n changes from a fixture's first Snapshot, and
// idxs the same as a string (a query parameter, a header, an SSE id).
func idx(n uint64) uint64 { return firstIndex + n }

func idxs(n uint64) string { return strconv.FormatUint(idx(n), 10) }

// fakeElection is an Election whose Snapshots tests publish by hand,
// through the elect.Publisher the election loop uses.
type fakeElection struct {
	pub *elect.Publisher

	mu         sync.Mutex          // serializes Publish; guards the fields below
	releases   []time.Duration     // stay-outs of every Release call
	releaseErr error               // returned by Release when set
	draining   bool                // the term is being released: Hold refuses
	holds      map[fence.Token]int // open holds by token
}

func newFakeElection(first elect.Snapshot) *fakeElection {
	return &fakeElection{pub: elect.NewPublisher(first), holds: map[fence.Token]int{}}
}

// Hold, like the elector's, holds the term with token if the current
// Snapshot leads with it and the term is not being released (draining);
// the fake does not judge validity (the fixture's clock is the handler's).
func (f *fakeElection) Hold(token fence.Token) (func(), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.pub.Load(); f.draining || !cur.Leading || cur.Token != token {
		return nil, false
	}
	f.holds[token]++
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.holds[token]--
		})
	}, true
}

// openHolds is the number of holds taken on token and not ended.
func (f *fakeElection) openHolds(token fence.Token) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holds[token]
}

// setDraining makes Hold refuse, as while the term is being released.
func (f *fakeElection) setDraining(d bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.draining = d
}

func (f *fakeElection) Snapshot() *elect.Snapshot { return f.pub.Load() }

// Publish publishes s and returns the stored Snapshot (with its Index).
func (f *fakeElection) Publish(s elect.Snapshot) *elect.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pub.Publish(s)
}

// Release records stayOut and, like the elector, steps down and reports
// whether it was leading (so a release was written).
func (f *fakeElection) Release(_ context.Context, stayOut time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases = append(f.releases, stayOut)
	if f.releaseErr != nil {
		return false, f.releaseErr
	}
	cur := *f.pub.Load()
	if !cur.Leading {
		return false, nil
	}
	cur.Leading, cur.ValidUntil, cur.Holder = false, time.Time{}, ""
	f.pub.Publish(cur)
	return true, nil
}

func (f *fakeElection) stayOuts() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.releases...)
}

// candidate is the state of an instance that has observed the Lease held
// by other, with a published token.
func candidate() elect.Snapshot {
	return elect.Snapshot{
		Identity: identity, Namespace: "shop", Lease: "orders-leader",
		Holder: other, Term: 4, Token: 880,
		AcquiredAt: t0.Add(-time.Minute), RenewedAt: t0.Add(-time.Second), ObservedAt: t0.Add(-500 * time.Millisecond),
		Observed: true, WatchUp: true, Candidate: true, Heartbeat: t0,
	}
}

// leading is the state of this instance leading a term that is valid until
// t0 + 10s.
func leading() elect.Snapshot {
	s := candidate()
	s.Leading, s.ValidUntil = true, t0.Add(10*time.Second)
	s.Holder, s.Term, s.Token = identity, 5, 1042
	s.AcquiredAt, s.RenewedAt, s.ObservedAt = t0.Add(-2*time.Second), t0.Add(-time.Second), t0.Add(-time.Second)
	return s
}

type fixture struct {
	t     *testing.T
	clock *clocktesting.FakePassiveClock
	el    *fakeElection
	reg   *prometheus.Registry
	srv   *Server
}

// fixtureOption changes the Options of a fixture's Server.
type fixtureOption func(*Options)

func withAppHealth(h AppHealthSource) fixtureOption {
	return func(o *Options) { o.AppHealth = h }
}

// fakeAppHealth reports a Status set by the test.
type fakeAppHealth struct {
	mu     sync.Mutex
	status apphealth.Status
}

func (h *fakeAppHealth) set(s apphealth.Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = s
}

func (h *fakeAppHealth) Status() apphealth.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status
}

// newFixture serves a fakeElection that starts in state first, at Index
// firstIndex.
func newFixture(t *testing.T, first elect.Snapshot, opts ...fixtureOption) *fixture {
	t.Helper()
	first.Index = firstIndex
	f := &fixture{
		t:     t,
		clock: clocktesting.NewFakePassiveClock(t0),
		el:    newFakeElection(first),
		reg:   prometheus.NewRegistry(),
	}
	o := Options{Election: f.el, Clock: f.clock, LeaseDuration: leaseDuration, Registry: f.reg, Version: "v1.2.3"}
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	return f
}

// publish publishes s and returns the stored Snapshot (with its Index).
func (f *fixture) publish(s elect.Snapshot) *elect.Snapshot { return f.el.Publish(s) }

// do serves one request on h in-process.
func do(h http.Handler, method, target string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// decode decodes a JSON body into a map, failing the test when it is not
// a JSON object or not served as application/json.
func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	return decodeBody(t, rec.Header(), rec.Body)
}

func decodeBody(t *testing.T, h http.Header, body io.Reader) map[string]any {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var m map[string]any
	if err := json.NewDecoder(body).Decode(&m); err != nil {
		t.Fatalf("body is not a JSON object: %v", err)
	}
	return m
}

// wantError checks an error answer: status, a JSON body of exactly
// {"error": <non-empty message>, "code": code}, and on a 503 a Retry-After
// of retryAfterOf(code) in whole seconds.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code errorCode) {
	t.Helper()
	if rec.Code != status {
		t.Errorf("%s: status = %d, want %d", rec.Body.String(), rec.Code, status)
	}
	ra := rec.Header().Get("Retry-After")
	if want := strconv.Itoa(int(retryAfterOf(code) / time.Second)); status == http.StatusServiceUnavailable && ra != want {
		t.Errorf("%d %s: Retry-After = %q, want %s", status, code, ra, want)
	} else if status != http.StatusServiceUnavailable && ra != "" {
		t.Errorf("%d %s: Retry-After = %q on a status other than 503", status, code, ra)
	}
	m := decode(t, rec)
	if msg, ok := m["error"].(string); !ok || msg == "" || m["code"] != string(code) || len(m) != 2 {
		t.Errorf("body = %v, want exactly {\"error\": <message>, \"code\": %q}", m, code)
	}
}

// live serves h on a real loopback listener, for requests that block or
// stream.
func live(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// result is one answer of an asynchronous request.
type result struct {
	code   int
	header http.Header
	body   map[string]any
	err    error
}

// get sends GET url in the background; the answer arrives on the channel.
func get(ctx context.Context, url string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			ch <- result{err: err}
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		ch <- result{code: resp.StatusCode, header: resp.Header, body: body, err: err}
	}()
	return ch
}

// receive waits (generously) for an answer.
func receive(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case <-time.After(generous):
		t.Fatal("no answer")
		return result{}
	}
}

// waitHolds waits until n holds on token are open, in the fake election
// and in the Server's count.
func (f *fixture) waitHolds(token fence.Token, n int) {
	f.t.Helper()
	poll.UntilReport(f.t, generous, time.Millisecond, fmt.Sprintf("%d holds on %d", n, token), func() bool {
		return f.el.openHolds(token) == n && f.srv.holds.Load() == int64(n)
	}, func() string {
		return fmt.Sprintf("holds on %d = %d (server: %d)", token, f.el.openHolds(token), f.srv.holds.Load())
	})
}

// waitWatchers waits until n blocking requests are open, so that a test
// changes the state only once its request is blocked.
func (f *fixture) waitWatchers(n int64) {
	f.t.Helper()
	poll.UntilReport(f.t, generous, time.Millisecond, fmt.Sprintf("%d watchers", n), func() bool {
		return f.srv.watchers.Load() == n
	}, func() string { return fmt.Sprintf("watchers = %d", f.srv.watchers.Load()) })
}

// num reads a JSON number field as an int64.
func num(t *testing.T, m map[string]any, key string) int64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("%s = %#v, want a number", key, m[key])
	}
	return int64(v)
}

// TestMain fails the package if any goroutine outlives the tests: every
// long-poll, stream and server the tests start must end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
