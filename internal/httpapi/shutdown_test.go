package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BeginShutdown fails /readyz and nothing else: long-polls, leader waits
// and SSE streams, open or new, still block and still wake on a change (the
// election publishes leader:false while it steps down), and non-blocking
// endpoints answer as before.
func TestBeginShutdownOnlyFailsReadiness(t *testing.T) {
	f := newFixture(t, leading())
	url := live(t, f.srv.APIHandler())
	poll := get(t.Context(), url+"/v1/watch?index="+idxs(0)+"&wait=10m")
	_, frames := openStream(t, url+"/v1/watch", "Last-Event-ID", idxs(0))
	f.waitWatchers(2)

	f.srv.BeginShutdown()
	f.srv.BeginShutdown() // idempotent
	wantError(t, do(f.srv.OpsHandler(), http.MethodGet, "/readyz"), http.StatusServiceUnavailable, codeShuttingDown)
	if rec := do(f.srv.OpsHandler(), http.MethodGet, "/livez"); rec.Code != http.StatusOK {
		t.Errorf("livez during shutdown: code %d, want 200", rec.Code)
	}
	for target, code := range map[string]int{"/v1/status": http.StatusOK, "/v1/leader": http.StatusOK, "/v1/token": http.StatusOK, "/v1/watch": http.StatusOK} {
		if rec := do(f.srv.APIHandler(), http.MethodGet, target); rec.Code != code || rec.Header().Get("Retry-After") != "" {
			t.Errorf("%s after BeginShutdown: code %d, Retry-After %q; want %d as before", target, rec.Code, rec.Header().Get("Retry-After"), code)
		}
	}
	// New blocking requests block too.
	wait := get(t.Context(), url+"/v1/leader?wait=10m") // leads now: answers at once
	if r := receive(t, wait); r.code != http.StatusOK {
		t.Errorf("leader wait while leading: %d %v", r.code, r.body)
	}
	poll2 := get(t.Context(), url+"/v1/watch?index="+idxs(0)+"&wait=10m")
	f.waitWatchers(3)
	select {
	case r := <-poll:
		t.Fatalf("long-poll answered after BeginShutdown without a change: %+v", r)
	default:
	}

	// The elector steps down: every open request learns it.
	stepped := leading()
	stepped.Leading, stepped.ValidUntil = false, time.Time{}
	down := f.publish(stepped)
	for i, answer := range []<-chan result{poll, poll2} {
		if r := receive(t, answer); r.code != http.StatusOK || r.body["leader"] != false || r.body["index"] != float64(down.Index) {
			t.Errorf("long-poll %d: %d %v, want 200 with leader:false at index %d", i, r.code, r.body, down.Index)
		}
	}
	fr, ok := next(t, frames)
	if data := wantEvent(t, fr, ok, down.Index); data["leader"] != false {
		t.Errorf("SSE event %v, want leader:false", data)
	}
	f.waitWatchers(1) // the stream goes on
}

// EndBlockingRequests ends every open blocking request promptly: long-polls
// and leader waits answer 503 with Retry-After and a JSON error, SSE
// streams end. Blocking requests that come later get the same 503 at once;
// requests whose answer is ready, and non-blocking endpoints, answer as
// before. Every answer matches api/openapi.yaml.
func TestEndBlockingRequests(t *testing.T) {
	sp := loadSpec(t)
	f := newFixture(t, candidate())
	url := live(t, f.srv.APIHandler())
	poll := getRaw(t.Context(), url+"/v1/watch?index="+idxs(0)+"&wait=10m")
	wait := getRaw(t.Context(), url+"/v1/leader?wait=10m")
	_, frames := openStream(t, url+"/v1/watch", "Last-Event-ID", idxs(0))
	f.waitWatchers(3)

	f.srv.EndBlockingRequests()
	f.srv.EndBlockingRequests() // idempotent
	for path, answer := range map[string]<-chan observed{"/v1/watch": poll, "/v1/leader": wait} {
		o := receiveRaw(t, answer)
		o.path = path
		wantShuttingDown(t, o)
		sp.checkResponse(t, o)
	}
	if fr, ok := next(t, frames); ok {
		t.Errorf("SSE stream went on after EndBlockingRequests: %+v", fr)
	}
	f.waitWatchers(0)

	// Later blocking requests: 503 at once.
	for path, target := range map[string]string{
		"/v1/watch":  "/v1/watch?index=" + idxs(0) + "&wait=10m",
		"/v1/leader": "/v1/leader?wait=10m",
	} {
		o := receiveRaw(t, getRaw(t.Context(), url+target))
		o.path = path
		wantShuttingDown(t, o)
		sp.checkResponse(t, o)
	}
	// SSE clients that have seen the current state, by Last-Event-ID or by
	// the index parameter.
	for _, rec := range []*httptest.ResponseRecorder{
		do(f.srv.APIHandler(), http.MethodGet, "/v1/watch", "Accept", "text/event-stream", "Last-Event-ID", idxs(0)),
		do(f.srv.APIHandler(), http.MethodGet, "/v1/watch?index="+idxs(0), "Accept", "text/event-stream"),
	} {
		o := recorded(http.MethodGet, "/v1/watch", rec)
		wantShuttingDown(t, o)
		sp.checkResponse(t, o)
	}
	if rec := do(f.srv.OpsHandler(), http.MethodGet, "/v1/leader?wait=10m"); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("OPS leader wait: %d, Retry-After %q; want the shutdown's 503", rec.Code, rec.Header().Get("Retry-After"))
	}

	// Requests whose answer is ready get it: the client has not seen the
	// current state.
	for _, target := range []string{"/v1/watch", "/v1/watch?index=" + idxs(1000) + "&wait=10m", "/v1/watch?index=7&wait=10m"} {
		rec := do(f.srv.APIHandler(), http.MethodGet, target)
		sp.checkResponse(t, recorded(http.MethodGet, "/v1/watch", rec))
		if got := decode(t, rec); rec.Code != http.StatusOK || got["index"] != float64(idx(0)) || rec.Header().Get("Retry-After") != "" {
			t.Errorf("%s: %d %v, want 200 with the current status", target, rec.Code, got)
		}
	}
	_, frames = openStream(t, url+"/v1/watch", "Last-Event-ID", "7")
	fr, ok := next(t, frames)
	wantEvent(t, fr, ok, idx(0))
	if fr, ok := next(t, frames); ok {
		t.Errorf("SSE stream went on after its one event: %+v", fr)
	}

	// Non-blocking endpoints answer as before: a 503 says not leader, with
	// its Retry-After of 1 s, not the shutdown's.
	for _, c := range []struct {
		method, target, path string
		code                 int
		retryAfter           string
	}{
		{http.MethodGet, "/v1/status", "/v1/status", http.StatusOK, ""},
		{http.MethodGet, "/v1/leader", "/v1/leader", http.StatusServiceUnavailable, "1"}, // not leader: the status
		{http.MethodGet, "/v1/token", "/v1/token", http.StatusServiceUnavailable, "1"},
		{http.MethodGet, "/", "/", http.StatusOK, ""},
	} {
		rec := do(f.srv.APIHandler(), c.method, c.target)
		if rec.Code != c.code || rec.Header().Get("Retry-After") != c.retryAfter {
			t.Errorf("%s %s: %d, Retry-After %q; want %d, %q as before", c.method, c.target, rec.Code, rec.Header().Get("Retry-After"), c.code, c.retryAfter)
		}
		sp.checkResponse(t, recorded(c.method, c.path, rec))
	}
	if got := decode(t, do(f.srv.APIHandler(), http.MethodGet, "/v1/leader")); got["leader"] != false || got["holder"] != other {
		t.Errorf("/v1/leader body %v, want the status", got)
	}
	wantError(t, do(f.srv.OpsHandler(), http.MethodGet, "/readyz"), http.StatusServiceUnavailable, codeShuttingDown) // implies BeginShutdown
	for _, target := range []string{"/livez", "/metrics", "/v1/status"} {
		if rec := do(f.srv.OpsHandler(), http.MethodGet, target); rec.Code != http.StatusOK {
			t.Errorf("OPS %s: code %d, want 200", target, rec.Code)
		}
	}

	// Leading (never so once the election has stopped, but the rule holds):
	// a leader wait finds this instance leading and answers at once.
	f.publish(leading())
	rec := do(f.srv.APIHandler(), http.MethodGet, "/v1/leader?wait=10m")
	if rec.Code != http.StatusOK || rec.Header().Get("Retry-After") != "" {
		t.Errorf("leader wait while leading: %d, want 200", rec.Code)
	}
	sp.checkResponse(t, recorded(http.MethodGet, "/v1/leader", rec))
	rec = do(f.srv.APIHandler(), http.MethodGet, "/v1/token")
	if rec.Code != http.StatusOK {
		t.Errorf("token while leading: %d, want 200", rec.Code)
	}
}

// EndBlockingRequests ends every long-poll and stream, so
// http.Server.Shutdown returns promptly; a short ReadTimeout does not cut
// long-polls short.
func TestShutdownIsNotHeldUpByWatchers(t *testing.T) {
	f := newFixture(t, candidate())
	srv := NewHTTPServer(f.srv.APIHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 || srv.WriteTimeout != 0 {
		t.Errorf("timeouts: header %s, read %s, idle %s, max header %d, write %s", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout, srv.MaxHeaderBytes, srv.WriteTimeout)
	}
	srv.ReadTimeout = 20 * time.Millisecond
	ln := listen(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()

	if r := receive(t, get(t.Context(), url+"/v1/watch?index="+idxs(0)+"&wait=200ms")); r.code != http.StatusOK {
		t.Errorf("long-poll longer than ReadTimeout: code %d", r.code)
	}

	poll := get(t.Context(), url+"/v1/watch?index="+idxs(0)+"&wait=10m")
	wait := get(t.Context(), url+"/v1/leader?wait=10m")
	_, frames := openStream(t, url+"/v1/watch")
	next(t, frames)
	f.waitWatchers(3)

	f.srv.EndBlockingRequests()
	ctx, cancel := context.WithTimeout(t.Context(), generous)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, answer := range []<-chan result{poll, wait} {
		if r := receive(t, answer); r.code != http.StatusServiceUnavailable {
			t.Errorf("open blocking request: %d %v, want 503", r.code, r.body)
		}
	}
	if _, ok := next(t, frames); ok {
		t.Error("stream went on after shutdown")
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve: %v", err)
	}
}

// wantShuttingDown checks the shutdown's answer to a blocking request: 503,
// Retry-After of whole seconds ≥ 1 (retryAfter), the latest index, and
// exactly {"error": "...shutting down..."}.
func wantShuttingDown(t *testing.T, o observed) {
	t.Helper()
	if o.code != http.StatusServiceUnavailable {
		t.Errorf("%s: code %d (%s), want 503", o.path, o.code, o.body)
	}
	if got := o.header.Get("Retry-After"); got != "2" || retryAfter != 2*time.Second {
		t.Errorf("%s: Retry-After %q, want 2 (retryAfter %v)", o.path, got, retryAfter)
	}
	if o.header.Get(indexHeader) == "" {
		t.Errorf("%s: no %s", o.path, indexHeader)
	}
	var body map[string]any
	if err := json.Unmarshal(o.body, &body); err != nil || len(body) != 2 || body["code"] != "shutting_down" ||
		!strings.Contains(body["error"].(string), "shutting down") {
		t.Errorf("%s: body %s (%v), want exactly {\"error\": \"...shutting down...\", \"code\": \"shutting_down\"}", o.path, o.body, err)
	}
	if ct := o.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", o.path, ct)
	}
}

// getRaw sends GET url in the background and delivers the raw answer
// (method GET, path unset).
func getRaw(ctx context.Context, url string) <-chan observed {
	ch := make(chan observed, 1)
	go func() {
		o := observed{method: http.MethodGet}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			ch <- o
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- o
			return
		}
		defer resp.Body.Close()
		o.code, o.header = resp.StatusCode, resp.Header
		o.body, _ = io.ReadAll(resp.Body)
		ch <- o
	}()
	return ch
}

// receiveRaw waits (generously) for a raw answer.
func receiveRaw(t *testing.T, ch <-chan observed) observed {
	t.Helper()
	select {
	case o := <-ch:
		if o.code == 0 {
			t.Fatal("request failed")
		}
		return o
	case <-time.After(generous):
		t.Fatal("no answer")
		return observed{}
	}
}
