package httpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/apphealth"
	"github.com/leasehold/leasehold/internal/elect"
)

func TestNewChecksOptions(t *testing.T) {
	el := newFakeElection(candidate())
	reg := prometheus.NewRegistry()
	for name, opts := range map[string]Options{
		"no election":       {Registry: reg, LeaseDuration: time.Second},
		"no registry":       {Election: el, LeaseDuration: time.Second},
		"no lease duration": {Election: el, Registry: reg},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := New(Options{Election: el, Registry: reg, LeaseDuration: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Election: el, Registry: reg, LeaseDuration: time.Second}); err == nil {
		t.Error("New registered its metrics twice in one registry")
	}
}

func TestStatusWhenLeading(t *testing.T) {
	f := newFixture(t, candidate())
	snap := f.publish(leading())
	f.clock.SetTime(t0.Add(2500 * time.Millisecond))

	rec := do(f.srv.APIHandler(), http.MethodGet, "/v1/status")
	if rec.Code != http.StatusOK {
		t.Fatalf("code = %d", rec.Code)
	}
	if got := rec.Header().Get(indexHeader); got != idxs(1) {
		t.Errorf("%s = %q, want %s", indexHeader, got, idxs(1))
	}
	got := decode(t, rec)
	want := map[string]any{
		"identity":     identity,
		"namespace":    "shop",
		"lease":        "orders-leader",
		"leader":       true,
		"holder":       identity,
		"term":         float64(5),
		"fencingToken": float64(1042),
		"validUntil":   "2026-05-01T12:00:10.123456789Z",
		"validForMs":   float64(7500),
		"acquiredAt":   "2026-05-01T11:59:58.123456789Z",
		"renewedAt":    "2026-05-01T11:59:59.123456789Z",
		"observedAt":   "2026-05-01T11:59:59.123456789Z",
		"index":        float64(snap.Index),
		"candidate":    true,
		"lastError":    nil,
	}
	if !maps.Equal(got, want) {
		t.Errorf("status =\n%v\nwant\n%v", got, want)
	}
}

func TestStatusWhenNotLeading(t *testing.T) {
	f := newFixture(t, candidate())
	got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/v1/status"))
	want := map[string]any{
		"identity": identity, "namespace": "shop", "lease": "orders-leader",
		"leader": false, "holder": other, "term": float64(4), "fencingToken": float64(880),
		"validForMs": float64(0), // validUntil absent
		"acquiredAt": "2026-05-01T11:59:00.123456789Z",
		"renewedAt":  "2026-05-01T11:59:59.123456789Z",
		"observedAt": "2026-05-01T11:59:59.623456789Z",
		"index":      float64(idx(0)),
		"candidate":  true,
		"lastError":  nil,
	}
	if !maps.Equal(got, want) {
		t.Errorf("status =\n%v\nwant\n%v", got, want)
	}
}

// Validity is judged when answering: a Leading Snapshot whose term has run
// out is not leader, even though no new Snapshot was published.
func TestStatusJudgesValidityAtAnswerTime(t *testing.T) {
	f := newFixture(t, leading())
	f.clock.SetTime(t0.Add(9999 * time.Millisecond))
	if got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/v1/status")); got["leader"] != true || got["validForMs"] != float64(1) {
		t.Errorf("1ms before validUntil: leader=%v validForMs=%v", got["leader"], got["validForMs"])
	}
	f.clock.SetTime(t0.Add(10 * time.Second))
	got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/v1/status"))
	if got["leader"] != false || got["validForMs"] != float64(0) {
		t.Errorf("at validUntil: leader=%v validForMs=%v", got["leader"], got["validForMs"])
	}
	if _, ok := got["validUntil"]; ok {
		t.Errorf("validUntil present when not leader: %v", got["validUntil"])
	}
}

// Times never seen (a Lease not observed yet) are omitted, not zero dates.
func TestStatusOmitsZeroTimes(t *testing.T) {
	f := newFixture(t, elect.Snapshot{Identity: identity, Namespace: "shop", Lease: "orders-leader"})
	got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/v1/status"))
	want := []string{"candidate", "fencingToken", "holder", "identity", "index", "lastError", "leader", "lease", "namespace", "term", "validForMs"}
	if ks := slices.Sorted(maps.Keys(got)); !slices.Equal(ks, want) {
		t.Errorf("fields = %v, want %v", ks, want)
	}
	if got["holder"] != "" || got["fencingToken"] != float64(0) || got["candidate"] != false {
		t.Errorf("holder = %v, fencingToken = %v, candidate = %v; want \"\", 0 and false", got["holder"], got["fencingToken"], got["candidate"])
	}
}

// The election's last failed request is reported, with its time, until a
// later request succeeds (lastError is null then, never absent).
func TestStatusReportsTheLastError(t *testing.T) {
	s := leading()
	s.LastError = `create the Lease in namespace "shop" (does it exist?): namespaces "shop" not found`
	s.LastErrorAt = t0.Add(-time.Second)
	f := newFixture(t, s)
	got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/v1/status"))
	if got["lastError"] != s.LastError || got["lastErrorAt"] != "2026-05-01T11:59:59.123456789Z" {
		t.Errorf("lastError %v at %v", got["lastError"], got["lastErrorAt"])
	}
}

// With health-gated candidacy the status reports the app's health as last
// probed, read when answering; without it, appHealth is absent (above).
func TestStatusReportsAppHealth(t *testing.T) {
	health := &fakeAppHealth{}
	health.set(apphealth.Status{Healthy: true, ConsecutiveSuccesses: 4, LastCheckAt: t0, LastSuccessAt: t0, Checks: 4})
	f := newFixture(t, leading(), withAppHealth(health))
	got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/v1/status"))["appHealth"]
	want := map[string]any{"healthy": true, "consecutiveFailures": float64(0), "consecutiveSuccesses": float64(4),
		"lastCheckAt": "2026-05-01T12:00:00.123456789Z", "lastSuccessAt": "2026-05-01T12:00:00.123456789Z"}
	if m, ok := got.(map[string]any); !ok || !maps.Equal(m, want) {
		t.Errorf("appHealth = %v, want %v", got, want)
	}

	health.set(apphealth.Status{ConsecutiveFailures: 3, LastCheckAt: t0.Add(time.Second), LastSuccessAt: t0, LastError: "status 503"})
	s := candidate() // the elector withdrew: out of the election
	s.Candidate = false
	f.publish(s)
	st := decode(t, do(f.srv.OpsHandler(), http.MethodGet, "/v1/status"))
	want = map[string]any{"healthy": false, "consecutiveFailures": float64(3), "consecutiveSuccesses": float64(0),
		"lastCheckAt": "2026-05-01T12:00:01.123456789Z", "lastSuccessAt": "2026-05-01T12:00:00.123456789Z", "lastError": "status 503"}
	if m, ok := st["appHealth"].(map[string]any); !ok || !maps.Equal(m, want) || st["candidate"] != false {
		t.Errorf("appHealth = %v candidate = %v, want %v and false", st["appHealth"], st["candidate"], want)
	}
}

func TestIndexHeaderOnEveryResponse(t *testing.T) {
	f := newFixture(t, candidate())
	f.publish(leading())
	f.publish(candidate())      // Index idx(2)
	f.srv.EndBlockingRequests() // so that blocking requests answer at once
	cases := []struct {
		h              http.Handler
		method, target string
	}{
		{f.srv.APIHandler(), "GET", "/v1/status"},
		{f.srv.APIHandler(), "GET", "/v1/leader"},
		{f.srv.APIHandler(), "GET", "/v1/leader?wait=1m"},
		{f.srv.APIHandler(), "GET", "/v1/token"},
		{f.srv.APIHandler(), "GET", "/v1/watch"},
		{f.srv.APIHandler(), "GET", "/v1/watch?index=" + idxs(2) + "&wait=1m"},
		{f.srv.APIHandler(), "GET", "/v1/watch?index=" + idxs(1) + "&wait=1m"},
		{f.srv.APIHandler(), "GET", "/v1/watch?index=x"},
		{f.srv.APIHandler(), "POST", "/v1/release"},
		{f.srv.APIHandler(), "GET", "/"},
		{f.srv.APIHandler(), "GET", "/nope"},
		{f.srv.APIHandler(), "PUT", "/v1/status"},
		{f.srv.OpsHandler(), "GET", "/livez"},
		{f.srv.OpsHandler(), "GET", "/readyz"},
		{f.srv.OpsHandler(), "GET", "/metrics"},
		{f.srv.OpsHandler(), "GET", "/v1/status"},
		{f.srv.OpsHandler(), "GET", "/v1/leader"},
		{f.srv.OpsHandler(), "GET", "/v1/token"},
		{f.srv.OpsHandler(), "POST", "/v1/leader"},
	}
	for _, c := range cases {
		rec := do(c.h, c.method, c.target)
		if got := rec.Header().Get(indexHeader); got != idxs(2) {
			t.Errorf("%s %s (%d): %s = %q, want %s", c.method, c.target, rec.Code, indexHeader, got, idxs(2))
		}
	}
}

func TestLeader(t *testing.T) {
	f := newFixture(t, candidate())
	for _, h := range []http.Handler{f.srv.APIHandler(), f.srv.OpsHandler()} {
		rec := do(h, http.MethodGet, "/v1/leader")
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
			t.Errorf("not leading: code = %d, Retry-After %q; want 503, 1", rec.Code, rec.Header().Get("Retry-After"))
		}
		if got := decode(t, rec); got["leader"] != false || got["holder"] != other {
			t.Errorf("not leading: body = %v, want the status", got)
		}
	}
	f.publish(leading())
	for _, h := range []http.Handler{f.srv.APIHandler(), f.srv.OpsHandler()} {
		rec := do(h, http.MethodGet, "/v1/leader")
		if rec.Code != http.StatusOK || rec.Header().Get("Retry-After") != "" {
			t.Errorf("leading: code = %d, Retry-After %q; want 200 without", rec.Code, rec.Header().Get("Retry-After"))
		}
		if got := decode(t, rec); got["leader"] != true || got["fencingToken"] != float64(1042) || rec.Header().Get(indexHeader) != idxs(1) {
			t.Errorf("leading: body = %v, want the status", got)
		}
	}
	f.clock.SetTime(t0.Add(time.Minute)) // validity ran out
	if rec := do(f.srv.APIHandler(), http.MethodGet, "/v1/leader"); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("validity ran out: code = %d, want 503", rec.Code)
	}
}

// ?wait blocks through changes that do not make this instance leader, and
// answers as soon as one does.
func TestLeaderWaitReturnsWhenLeadershipArrives(t *testing.T) {
	f := newFixture(t, candidate())
	url := live(t, f.srv.APIHandler())
	answer := get(t.Context(), url+"/v1/leader?wait=10m")
	f.waitWatchers(1)

	released := candidate()
	released.Holder, released.Token = "", 0
	f.publish(released) // a change, but not leadership
	won := f.publish(leading())

	r := receive(t, answer)
	if r.code != http.StatusOK || r.body["leader"] != true || r.body["index"] != float64(won.Index) {
		t.Errorf("answer = %d %v, want 200 with the leading status at index %d", r.code, r.body, won.Index)
	}
	if got := r.header.Get(indexHeader); got != strconv.FormatUint(won.Index, 10) {
		t.Errorf("%s = %q, want %d", indexHeader, got, won.Index)
	}
	f.waitWatchers(0)
}

func TestLeaderWaitAnswersAtOnceWhenLeading(t *testing.T) {
	f := newFixture(t, leading())
	rec := do(f.srv.APIHandler(), http.MethodGet, "/v1/leader?wait=10m")
	if rec.Code != http.StatusOK {
		t.Errorf("code = %d, want 200", rec.Code)
	}
}

func TestLeaderWaitEnds(t *testing.T) {
	f := newFixture(t, candidate())
	url := live(t, f.srv.APIHandler())

	start := time.Now()
	r := receive(t, get(t.Context(), url+"/v1/leader?wait=50ms"))
	if r.code != http.StatusServiceUnavailable || r.body["leader"] != false {
		t.Errorf("after the wait: %d %v, want 503 with the status", r.code, r.body)
	}
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Errorf("answered after %s, before the wait of 50ms", elapsed)
	}

	ctx, cancel := context.WithCancel(t.Context())
	answer := get(ctx, url+"/v1/leader?wait=10m")
	f.waitWatchers(1)
	cancel()
	<-answer
	f.waitWatchers(0) // the handler returned when the client left
}

func TestLeaderRejectsBadWait(t *testing.T) {
	f := newFixture(t, candidate())
	for _, q := range []string{"wait=soon", "wait=-1s", "wait=11m", "wait=", "wait=%zz"} {
		for _, h := range []http.Handler{f.srv.APIHandler(), f.srv.OpsHandler()} {
			wantError(t, do(h, http.MethodGet, "/v1/leader?"+q), http.StatusBadRequest, codeBadParameter)
		}
	}
}

func TestToken(t *testing.T) {
	f := newFixture(t, candidate())
	rec := do(f.srv.APIHandler(), http.MethodGet, "/v1/token")
	wantError(t, rec, http.StatusServiceUnavailable, codeNotLeader)
	if rec.Header().Get(indexHeader) != idxs(0) {
		t.Errorf("%s = %q, want %s", indexHeader, rec.Header().Get(indexHeader), idxs(0))
	}

	f.publish(leading())
	f.clock.SetTime(t0.Add(4 * time.Second))
	rec = do(f.srv.APIHandler(), http.MethodGet, "/v1/token")
	if rec.Code != http.StatusOK {
		t.Fatalf("leading: code = %d", rec.Code)
	}
	want := map[string]any{"fencingToken": float64(1042), "term": float64(5), "validUntil": "2026-05-01T12:00:10.123456789Z", "validForMs": float64(6000)}
	if got := decode(t, rec); !maps.Equal(got, want) {
		t.Errorf("token = %v, want %v", got, want)
	}

	f.clock.SetTime(t0.Add(10 * time.Second))
	wantError(t, do(f.srv.APIHandler(), http.MethodGet, "/v1/token"), http.StatusServiceUnavailable, codeNotLeader)
}

func TestRelease(t *testing.T) {
	f := newFixture(t, leading())
	rec := do(f.srv.APIHandler(), http.MethodPost, "/v1/release")
	if rec.Code != http.StatusOK {
		t.Fatalf("code = %d: %s", rec.Code, rec.Body)
	}
	got := decode(t, rec)
	if got["released"] != true || got["leader"] != false || got["holder"] != "" || got["index"] != float64(idx(1)) || got["identity"] != identity {
		t.Errorf("body = %v, want released with the status after the release", got)
	}
	if rec.Header().Get(indexHeader) != idxs(1) {
		t.Errorf("%s = %q, want %s", indexHeader, rec.Header().Get(indexHeader), idxs(1))
	}

	// Idempotent: nothing more to release.
	rec = do(f.srv.APIHandler(), http.MethodPost, "/v1/release?for=30s")
	if got := decode(t, rec); rec.Code != http.StatusOK || got["released"] != false {
		t.Errorf("second release: %d %v, want 200 with released false", rec.Code, got)
	}
	if rec := do(f.srv.APIHandler(), http.MethodPost, "/v1/release?for=1h"); rec.Code != http.StatusOK {
		t.Errorf("for=1h: code = %d", rec.Code)
	}
	if rec := do(f.srv.APIHandler(), http.MethodPost, "/v1/release?for=0s"); rec.Code != http.StatusOK {
		t.Errorf("for=0s: code = %d", rec.Code)
	}
	if got, want := f.el.stayOuts(), []time.Duration{leaseDuration, 30 * time.Second, time.Hour, 0}; !slices.Equal(got, want) {
		t.Errorf("stay-outs = %v, want %v (default: LeaseDuration)", got, want)
	}

	for _, q := range []string{"for=61m", "for=2h", "for=-1s", "for=later", "for=", "for=%zz"} {
		wantError(t, do(f.srv.APIHandler(), http.MethodPost, "/v1/release?"+q), http.StatusBadRequest, codeBadParameter)
	}
	if n := len(f.el.stayOuts()); n != 4 {
		t.Errorf("bad requests reached the elector: %d calls", n)
	}

	rec = do(f.srv.APIHandler(), http.MethodGet, "/v1/release")
	wantError(t, rec, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	if got := rec.Header().Get("Allow"); got != "POST" {
		t.Errorf("Allow = %q, want POST", got)
	}
	wantError(t, do(f.srv.OpsHandler(), http.MethodPost, "/v1/release"), http.StatusNotFound, codeNotFound)
}

// A release the election could not write is a 503 with Retry-After:
// release_failed, or shutting_down once the elector has stopped.
func TestReleaseFailureIsAServerError(t *testing.T) {
	sp := loadSpec(t)
	f := newFixture(t, leading())
	for err, code := range map[error]errorCode{
		errors.New("release: read the Lease: connection refused"): codeReleaseFailed,
		fmt.Errorf("release: %w", elect.ErrStopped):               codeShuttingDown,
	} {
		f.el.releaseErr = err
		rec := do(f.srv.APIHandler(), http.MethodPost, "/v1/release")
		sp.checkResponse(t, recorded(http.MethodPost, "/v1/release", rec))
		wantError(t, rec, http.StatusServiceUnavailable, code)
	}
}

func TestRootName(t *testing.T) {
	f := newFixture(t, candidate())
	if got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/")); !maps.Equal(got, map[string]any{"name": other}) {
		t.Errorf("GET / = %v", got)
	}
	f.publish(leading())
	if got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/")); !maps.Equal(got, map[string]any{"name": identity}) {
		t.Errorf("GET / = %v", got)
	}
	none := candidate()
	none.Holder = ""
	f.publish(none)
	if got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/")); !maps.Equal(got, map[string]any{"name": ""}) {
		t.Errorf("GET / = %v", got)
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	f := newFixture(t, candidate())
	api, ops := f.srv.APIHandler(), f.srv.OpsHandler()
	for _, c := range []struct {
		h              http.Handler
		method, target string
	}{
		{api, "GET", "/nope"},
		{api, "GET", "/v1/statusx"},
		{api, "GET", "/v1/status/"},
		{api, "GET", "/livez"},
		{ops, "GET", "/v1/token"},
		{ops, "GET", "/v1/watch"},
		{ops, "GET", "/"},
	} {
		wantError(t, do(c.h, c.method, c.target), http.StatusNotFound, codeNotFound)
	}
	for _, c := range []struct {
		h                     http.Handler
		method, target, allow string
	}{
		{api, "DELETE", "/v1/status", "GET"},
		{api, "POST", "/v1/leader", "GET"},
		{api, "HEAD", "/v1/watch", "GET"},
		{api, "PUT", "/v1/release", "POST"},
		{api, "POST", "/", "GET"},
		{ops, "POST", "/v1/status", "GET"},
		{ops, "POST", "/metrics", "GET"},
		{ops, "PUT", "/livez", "GET"},
	} {
		rec := do(c.h, c.method, c.target)
		if c.method == "HEAD" {
			if rec.Code != http.StatusMethodNotAllowed {
				t.Errorf("HEAD %s: code = %d", c.target, rec.Code)
			}
		} else {
			wantError(t, rec, http.StatusMethodNotAllowed, codeMethodNotAllowed)
		}
		if got := rec.Header().Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow = %q, want %q", c.method, c.target, got, c.allow)
		}
	}
}

// Client input never produces a 5xx or a panic. With this instance leading
// and blocking requests ended (so that they answer at once), no request may
// answer 5xx, but for /readyz and the shutdown's 503 to a request that
// would block.
func FuzzClientInput(f *testing.F) {
	for _, seed := range []struct{ method, target, accept, lastEventID string }{
		{"GET", "/v1/watch?index=18446744073709551616&wait=1h", "", ""},
		{"GET", "/v1/watch?index=1&wait=10m", "text/event-stream", "abc"},
		{"GET", "/v1/watch?index=" + idxs(0) + "&wait=10m", "", ""},
		{"GET", "/v1/watch", "text/event-stream", idxs(0)},
		{"GET", "/v1/leader?wait=9223372036854775807ns", "", ""},
		{"POST", "/v1/release?for=1e3s", "", ""},
		{"GET", "/v1/status?%gg", "*/*", ""},
		{"OPTIONS", "*", "", ""},
		{"GET", "//v1//status", "", ""},
		{"PATCH", "/v1/token", "text/event-stream;q=0", "-1"},
	} {
		f.Add(seed.method, seed.target, seed.accept, seed.lastEventID)
	}
	f.Fuzz(func(t *testing.T, method, target, accept, lastEventID string) {
		fx := newFixture(t, leading())
		fx.srv.EndBlockingRequests()
		req, err := http.NewRequest(method, "http://localhost"+target, nil)
		if err != nil {
			t.Skip()
		}
		req.Header.Set("Accept", accept)
		req.Header.Set("Last-Event-ID", lastEventID)
		for _, h := range []http.Handler{fx.srv.APIHandler(), fx.srv.OpsHandler()} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 && !(rec.Code == http.StatusServiceUnavailable && (req.URL.Path == "/readyz" || rec.Header().Get("Retry-After") != "")) {
				t.Errorf("%s %q: code %d: %s", method, target, rec.Code, rec.Body)
			}
		}
	})
}
