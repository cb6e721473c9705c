package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/elect"
)

// call is one request on a real connection, answered or still open.
type call struct {
	cancel context.CancelFunc // closes the connection
	answer chan answer        // the status and headers once they arrive
}

// answer is what a call got: its status and headers, whether the server
// closes the connection after it, and the body of an answer that is not a
// stream (a stream's body is read, and dropped, until the call is
// cancelled).
type answer struct {
	code   int
	header http.Header
	closes bool
	body   []byte
	err    error
}

// send sends GET (or, for a path starting "POST ", POST) base+path with
// header pairs, in the background.
func send(t *testing.T, base, path string, header ...string) *call {
	t.Helper()
	method := http.MethodGet
	if p, ok := strings.CutPrefix(path, "POST "); ok {
		method, path = http.MethodPost, p
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	c := &call{cancel: cancel, answer: make(chan answer, 1)}
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			c.answer <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		a := answer{code: resp.StatusCode, header: resp.Header, closes: resp.Close}
		if resp.Header.Get("Content-Type") == "text/event-stream" || strings.Contains(path, "/hold") && resp.StatusCode == http.StatusOK {
			c.answer <- a
			_, _ = io.Copy(io.Discard, resp.Body) // until cancel
			return
		}
		a.body, a.err = io.ReadAll(resp.Body)
		c.answer <- a
	}()
	return c
}

// await waits (generously) for c's answer.
func (c *call) await(t *testing.T) answer {
	t.Helper()
	select {
	case a := <-c.answer:
		if a.err != nil {
			t.Fatal(a.err)
		}
		return a
	case <-time.After(generous):
		t.Fatal("no answer")
		return answer{}
	}
}

// wantTooMany checks the refusal of a blocking request beyond its
// listener's bound: 503, Retry-After 5, the connection closed, and the
// JSON error body with code too_many_blocking_requests.
func wantTooMany(t *testing.T, what string, a answer) {
	t.Helper()
	var body map[string]any
	_ = json.Unmarshal(a.body, &body)
	if a.code != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "5" || !a.closes ||
		a.header.Get("Content-Type") != "application/json" || body["code"] != string(codeTooManyBlocking) ||
		!strings.Contains(body["error"].(string), "LEASEHOLD_MAX_BLOCKING_REQUESTS") || len(body) != 2 {
		t.Errorf("%s: %d, Retry-After %q, closes %v, %s; want 503, Retry-After 5, closed, {error, code: %s}",
			what, a.code, a.header.Get("Retry-After"), a.closes, a.body, codeTooManyBlocking)
	}
}

// refusals is leasehold_blocking_requests_refused_total by listener.
func (f *fixture) refusals() map[string]float64 {
	f.t.Helper()
	return f.gauges()["leasehold_blocking_requests_refused_total"]
}

// Each listener serves at most MaxBlockingRequests blocking requests at
// once, counted apart from the other's, over real connections: with the
// OPS listener's bound filled by a leader wait, a long-poll and an SSE
// stream, every further request that would block is answered 503 with
// Retry-After, the JSON error and the connection closed, and counted on
// listener="ops"; requests that do not block (the probes, metrics, status,
// a leader question without wait, a long-poll whose answer is ready) answer
// as ever; the API listener still takes its own. Once some close, waits
// are accepted again.
func TestBlockingRequestsAreBoundedPerListener(t *testing.T) {
	f := newFixture(t, candidate(), func(o *Options) { o.MaxBlockingRequests = 3 })
	api, ops := live(t, f.srv.APIHandler()), live(t, f.srv.OpsHandler())
	sse := []string{"Accept", "text/event-stream"}
	current := "index=" + idxs(0) + "&wait=10m"

	leaderWait := send(t, ops, "/v1/leader?wait=10m")
	longPoll := send(t, ops, "/v1/leases?"+current)
	stream := send(t, ops, "/v1/leases", sse...)
	if a := stream.await(t); a.code != http.StatusOK {
		t.Fatalf("SSE stream: %d, want 200", a.code)
	}
	f.waitWatchers(3)

	refused := map[string][]string{
		"leader wait":             {"/v1/leader?wait=10m"},
		"named leader wait":       {"/v1/leases/orders-leader/leader?wait=1m"},
		"long-poll":               {"/v1/leases?" + current},
		"SSE stream":              append([]string{"/v1/leases"}, sse...),
		"SSE stream, state seen":  append([]string{"/v1/leases"}, append(sse, "Last-Event-ID", idxs(0))...),
		"SSE stream with index":   append([]string{"/v1/leases?index=7"}, sse...),
		"long-poll, short wait":   {"/v1/leases?index=" + idxs(0) + "&wait=1ms"},
		"leader wait, short wait": {"/v1/leader?wait=1ms"},
	}
	for what, req := range refused {
		wantTooMany(t, "ops "+what, send(t, ops, req[0], req[1:]...).await(t))
	}
	if got := f.refusals(); got["listener=ops"] != float64(len(refused)) || got["listener=api"] != 0 {
		t.Errorf("refusals = %v, want ops %d, api 0", got, len(refused))
	}

	// What does not block is never refused, probes above all.
	for path, code := range map[string]int{
		"/livez":                     http.StatusOK,
		"/readyz":                    http.StatusOK,
		"/metrics":                   http.StatusOK,
		"/v1/status":                 http.StatusOK,
		"/v1/leader":                 http.StatusServiceUnavailable, // the status: not leader
		"/v1/leases":                 http.StatusOK,
		"/v1/leases?index=7&wait=1m": http.StatusOK, // not the current index: answered at once
		"/v1/leases/orders-leader":   http.StatusOK,
		"/v1/nope":                   http.StatusNotFound,
	} {
		a := send(t, ops, path).await(t)
		if a.code != code || strings.Contains(string(a.body), `"code":"`+string(codeTooManyBlocking)) {
			t.Errorf("ops %s with the bound full: %d %s, want %d", path, a.code, a.body, code)
		}
	}

	// The API listener's bound is its own.
	apiWaits := []*call{send(t, api, "/v1/watch?"+current), send(t, api, "/v1/leader?wait=10m"), send(t, api, "/v1/watch", sse...)}
	f.waitWatchers(6)
	wantTooMany(t, "api long-poll", send(t, api, "/v1/watch?"+current).await(t))
	if got := f.refusals(); got["listener=ops"] != float64(len(refused)) || got["listener=api"] != 1 {
		t.Errorf("refusals = %v, want ops %d, api 1", got, len(refused))
	}

	// Two close: two waits are accepted again, and no more.
	leaderWait.cancel()
	stream.cancel()
	f.waitWatchers(4)
	again := []*call{send(t, ops, "/v1/leader?wait=10m"), send(t, ops, "/v1/leases", sse...)}
	if a := again[1].await(t); a.code != http.StatusOK {
		t.Fatalf("SSE stream after two closed: %d %s, want 200", a.code, a.body)
	}
	f.waitWatchers(6)
	wantTooMany(t, "ops leader wait, full again", send(t, ops, "/v1/leader?wait=10m").await(t))

	// The waits accepted are served as ever: leadership answers the leader
	// waits and the long-polls of both listeners.
	f.publish(leading())
	for what, c := range map[string]*call{"ops leader wait": again[0], "ops long-poll": longPoll, "api long-poll": apiWaits[0], "api leader wait": apiWaits[1]} {
		if a := c.await(t); a.code != http.StatusOK {
			t.Errorf("%s after leadership arrived: %d %s, want 200", what, a.code, a.body)
		}
	}
}

// Holds count in the API listener's bound: with it full (a hold and a
// long-poll), a further hold is refused before anything is held, and so is
// a long-poll; a leader wait while leading, whose answer is ready, is not.
// Once the hold ends, a hold is accepted again.
func TestHoldsCountInTheBound(t *testing.T) {
	f := newFixture(t, leading(), func(o *Options) { o.MaxBlockingRequests = 2 })
	api := live(t, f.srv.APIHandler())
	hold := send(t, api, "POST /v1/hold?token=1042")
	if a := hold.await(t); a.code != http.StatusOK {
		t.Fatalf("hold: %d, want 200", a.code)
	}
	send(t, api, "/v1/watch?index="+idxs(0)+"&wait=10m")
	f.waitHolds(1042, 1)
	f.waitWatchers(1)

	wantTooMany(t, "hold", send(t, api, "POST /v1/hold?token=1042").await(t))
	if n := f.el.openHolds(1042); n != 1 {
		t.Errorf("holds open after a refused one: %d, want 1", n)
	}
	wantTooMany(t, "long-poll", send(t, api, "/v1/watch?index="+idxs(0)+"&wait=10m").await(t))
	if a := send(t, api, "/v1/leader?wait=10m").await(t); a.code != http.StatusOK {
		t.Errorf("leader wait while leading: %d %s, want 200 at once", a.code, a.body)
	}
	if got := f.refusals(); got["listener=api"] != 2 {
		t.Errorf("refusals = %v, want api 2", got)
	}

	hold.cancel()
	f.waitHolds(1042, 0)
	if a := send(t, api, "POST /v1/hold?token=1042").await(t); a.code != http.StatusOK {
		t.Errorf("hold after the first ended: %d %s, want 200", a.code, a.body)
	}
	f.waitHolds(1042, 1)
}

// The refusals of every blocking operation, on both listeners and in both
// modes, match the document.
func TestTooManyAnswersMatchOpenAPI(t *testing.T) {
	sp := loadSpec(t)
	sse := []string{"Accept", "text/event-stream"}
	check := func(base string, reqs map[string]string) {
		t.Helper()
		for target, path := range reqs {
			method := http.MethodGet
			if strings.HasPrefix(target, "POST ") {
				method = http.MethodPost
			}
			a := send(t, base, target).await(t)
			wantTooMany(t, target, a)
			sp.checkResponse(t, observed{method: method, path: path, code: a.code, header: a.header, body: a.body})
		}
	}

	f := newFixture(t, leading(), func(o *Options) { o.MaxBlockingRequests = 1 })
	api, ops := live(t, f.srv.APIHandler()), live(t, f.srv.OpsHandler())
	send(t, api, "/v1/watch", sse...).await(t)
	send(t, ops, "/v1/leases", sse...).await(t)
	f.waitWatchers(2)
	check(api, map[string]string{
		"/v1/watch?index=" + idxs(0):                    "/v1/watch",
		"/v1/leases?index=" + idxs(0):                   "/v1/leases",
		"POST /v1/hold?token=1042":                      "/v1/hold",
		"POST /v1/leases/orders-leader/hold?token=1042": "/v1/leases/{lease}/hold",
	})
	check(ops, map[string]string{"/v1/leases?index=" + idxs(0): "/v1/leases"})
	f.publish(candidate())
	check(api, map[string]string{
		"/v1/leader?wait=1m":                      "/v1/leader",
		"/v1/leases/orders-leader/leader?wait=1m": "/v1/leases/{lease}/leader",
	})
	check(ops, map[string]string{
		"/v1/leader?wait=1m":                      "/v1/leader",
		"/v1/leases/orders-leader/leader?wait=1m": "/v1/leases/{lease}/leader",
	})

	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()}, func(o *Options) { o.MaxBlockingRequests = 1 })
	gops := live(t, g.srv.OpsHandler())
	send(t, gops, "/v1/leases", sse...).await(t)
	g.waitWatchers(1)
	check(gops, map[string]string{"/v1/leases/compactor/leader?wait=1m": "/v1/leases/{lease}/leader"})
}
