package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
	"github.com/leasehold/leasehold/pkg/client"
)

var (
	leading = api.Status{
		Identity: "pod-a_x1", Namespace: "shop", Lease: "orders", Leader: true, Holder: "pod-a_x1",
		Term: 5, FencingToken: 1042, ValidUntil: "2026-07-01T12:00:07.5Z", ValidForMs: 7500, Index: 11, Candidate: true,
	}
	following = api.Status{
		Identity: "pod-a_x1", Namespace: "shop", Lease: "orders", Holder: "pod-b_y2",
		Term: 5, FencingToken: 1042, Index: 10, Candidate: true,
	}
)

// sidecar is a fake sidecar: every request is recorded and answered by the
// test's handler.
type sidecar struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
}

func newSidecar(t *testing.T, h http.HandlerFunc) (*sidecar, *client.Client) {
	t.Helper()
	s := &sidecar{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Clone(context.Background()))
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	c, err := client.New(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return s, c
}

func (s *sidecar) recorded() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.requests...)
}

// reply answers code with body as JSON (a string verbatim), and the
// headers given as name, value pairs.
func reply(w http.ResponseWriter, code int, body any, header ...string) {
	for i := 0; i+1 < len(header); i += 2 {
		w.Header().Set(header[i], header[i+1])
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if s, ok := body.(string); ok {
		fmt.Fprint(w, s)
		return
	}
	_ = json.NewEncoder(w).Encode(body)
}

func notLeader(w http.ResponseWriter) {
	reply(w, 503, `{"error":"not leader","code":"not_leader"}`+"\n", "Retry-After", "1")
}

func TestNewChecksTheURL(t *testing.T) {
	for _, ok := range []string{"", "http://127.0.0.1:4040", "http://127.0.0.1:4040/", "https://sidecar.example:443/prefix/"} {
		if _, err := client.New(ok); err != nil {
			t.Errorf("New(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"127.0.0.1:4040", "ftp://x:1", "http://", "http://x:1?a=b", "http://x:1#f", "http://u:p@x:1", "http://x:1/?"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q): no error", bad)
		}
	}
}

// Every call asks its own path, with Accept: application/json; a Lease of
// a group is asked under /v1/leases/{lease}, its name escaped.
func TestPaths(t *testing.T) {
	s, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/token"):
			reply(w, 200, api.Token{FencingToken: 1042, Term: 5, ValidUntil: leading.ValidUntil, ValidForMs: 7500})
		case strings.HasSuffix(r.URL.Path, "/release"):
			reply(w, 200, api.Release{Released: true, Status: following})
		default:
			reply(w, 200, leading)
		}
	})
	ctx := t.Context()
	calls := func(c *client.Client) {
		if _, err := c.Status(ctx); err != nil {
			t.Error(err)
		}
		if _, err := c.Leader(ctx, 0); err != nil {
			t.Error(err)
		}
		if _, err := c.Leader(ctx, 30*time.Second); err != nil {
			t.Error(err)
		}
		if _, err := c.Token(ctx); err != nil {
			t.Error(err)
		}
		if _, err := c.Release(ctx, client.DefaultStayOut); err != nil {
			t.Error(err)
		}
		if _, err := c.Release(ctx, 0); err != nil {
			t.Error(err)
		}
		if _, err := c.ReleaseTo(ctx, client.DefaultStayOut, "pod-c_z3"); err != nil {
			t.Error(err)
		}
	}
	calls(c)
	l := c.Lease("orders-7")
	if l.LeaseName() != "orders-7" || c.LeaseName() != "" {
		t.Errorf("LeaseName() = %q, %q", l.LeaseName(), c.LeaseName())
	}
	calls(l)
	calls(c.Lease("a b/c"))
	var got []string
	for _, r := range s.recorded() {
		got = append(got, r.Method+" "+r.URL.RequestURI())
		if r.Header.Get("Accept") != "application/json" {
			t.Errorf("%s %s: Accept %q", r.Method, r.URL, r.Header.Get("Accept"))
		}
	}
	want := []string{
		"GET /v1/status", "GET /v1/leader", "GET /v1/leader?wait=30s", "GET /v1/token", "POST /v1/release", "POST /v1/release?for=0s",
		"POST /v1/release?to=pod-c_z3",
		"GET /v1/leases/orders-7", "GET /v1/leases/orders-7/leader", "GET /v1/leases/orders-7/leader?wait=30s",
		"GET /v1/leases/orders-7/token", "POST /v1/leases/orders-7/release", "POST /v1/leases/orders-7/release?for=0s",
		"POST /v1/leases/orders-7/release?to=pod-c_z3",
		"GET /v1/leases/a%20b%2Fc", "GET /v1/leases/a%20b%2Fc/leader", "GET /v1/leases/a%20b%2Fc/leader?wait=30s",
		"GET /v1/leases/a%20b%2Fc/token", "POST /v1/leases/a%20b%2Fc/release", "POST /v1/leases/a%20b%2Fc/release?for=0s",
		"POST /v1/leases/a%20b%2Fc/release?to=pod-c_z3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A base URL with a path prefix keeps it.
func TestBasePath(t *testing.T) {
	s, _ := newSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, leading) })
	c, err := client.New(s.URL + "/sidecar/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lease("x").Status(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := s.recorded()[0].URL.Path; got != "/sidecar/v1/leases/x" {
		t.Errorf("path %q", got)
	}
}

func TestDecodes(t *testing.T) {
	msg := "a 403"
	st := leading
	st.LastError, st.LastErrorAt = &msg, "2026-07-01T11:59:00Z"
	st.AppHealth = &api.AppHealth{Healthy: true, ConsecutiveFailures: 0, LastCheckAt: "2026-07-01T11:59:59Z"}
	members := 3
	_, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/status":
			reply(w, 200, st)
		case "/v1/token":
			reply(w, 200, `{"fencingToken":18446744073709551615,"term":5,"validUntil":"2026-07-01T12:00:07.5Z","validForMs":7500}`)
		case "/v1/release":
			reply(w, 200, api.Release{Released: true, Status: following})
		case "/v1/leases":
			reply(w, 200, api.Leases{Index: 99, Members: &members, Leases: []api.Status{following, leading}})
		}
	})
	ctx := t.Context()
	if got, err := c.Status(ctx); err != nil || *got.LastError != msg || *got.AppHealth != *st.AppHealth || got.FencingToken != 1042 {
		t.Errorf("Status: %+v, %v", got, err)
	}
	if got, err := c.Token(ctx); err != nil || got.FencingToken != 1<<64-1 || got.ValidForMs != 7500 || got.Term != 5 {
		t.Errorf("Token: %+v, %v", got, err)
	}
	if got, err := c.Release(ctx, time.Minute); err != nil || !got.Released || got.Holder != "pod-b_y2" {
		t.Errorf("Release: %+v, %v", got, err)
	}
	if got, err := c.Lease("orders").Leases(ctx); err != nil || got.Index != 99 || *got.Members != 3 || len(got.Leases) != 2 {
		t.Errorf("Leases: %+v, %v", got, err)
	}
}

// Not leading: Token's error is an *Error with the API's code and message,
// matching ErrNotLeader and no other sentinel.
func TestTokenNotLeader(t *testing.T) {
	_, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) { notLeader(w) })
	_, err := c.Token(t.Context())
	if !errors.Is(err, client.ErrNotLeader) || errors.Is(err, client.ErrShuttingDown) || errors.Is(err, client.ErrConflict) {
		t.Fatalf("err %v: want ErrNotLeader only", err)
	}
	e, ok := errors.AsType[*client.Error](err)
	if !ok || e.StatusCode != 503 || e.Code != api.CodeNotLeader || e.Message != "not leader" || e.Method != "GET" ||
		!strings.HasSuffix(e.URL, "/v1/token") || e.Header.Get("Retry-After") != "1" {
		t.Fatalf("%#v", e)
	}
	if d, ok := e.RetryAfter(time.Now()); !ok || d != time.Second {
		t.Errorf("RetryAfter = %v, %v", d, ok)
	}
	if want := "GET " + e.URL + ": the sidecar answered 503 Service Unavailable: not leader"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
}

// An answer that is no error body is shown by its start; a token of 0 is
// no token; a 200 that is not JSON is an error, but not an *Error.
func TestOtherAnswers(t *testing.T) {
	_, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/status":
			reply(w, 502, "<html>bad gateway</html>")
		case "/v1/token":
			reply(w, 200, `{"fencingToken":0}`)
		case "/v1/release":
			reply(w, 200, "not json")
		case "/v1/leader":
			reply(w, 500, "")
		}
	})
	ctx := t.Context()
	_, err := c.Status(ctx)
	if e, ok := errors.AsType[*client.Error](err); !ok || e.Code != "" || e.Message != "" || !strings.HasSuffix(err.Error(), ": the sidecar answered 502 Bad Gateway: <html>bad gateway</html>") {
		t.Errorf("502: %v", err)
	}
	_, err = c.Leader(ctx, 0)
	if err == nil || !strings.HasSuffix(err.Error(), "500 Internal Server Error: (no body)") {
		t.Errorf("500: %v", err)
	}
	for name, call := range map[string]func() error{
		"token 0":  func() error { _, err := c.Token(ctx); return err },
		"not json": func() error { _, err := c.Release(ctx, 0); return err },
	} {
		err := call()
		_, isError := errors.AsType[*client.Error](err)
		_, isURL := errors.AsType[*url.Error](err)
		if err == nil || isError || isURL {
			t.Errorf("%s: %v; want an error that is neither *Error nor *url.Error", name, err)
		}
	}
}

// No answer is a *url.Error.
func TestUnreachable(t *testing.T) {
	s, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {})
	s.Close()
	_, err := c.Status(t.Context())
	if _, ok := errors.AsType[*url.Error](err); !ok {
		t.Fatalf("%v (%T): want a *url.Error", err, err)
	}
}

// Leader answers the status whether or not leading; a 503 with an error
// body is an error.
func TestLeader(t *testing.T) {
	var mu sync.Mutex
	answer := func(w http.ResponseWriter) { reply(w, 503, following, "Retry-After", "1") }
	_, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		answer(w)
	})
	if st, err := c.Leader(t.Context(), time.Second); err != nil || st.Leader || st.Holder != "pod-b_y2" {
		t.Errorf("not leading: %+v, %v", st, err)
	}
	mu.Lock()
	answer = func(w http.ResponseWriter) {
		reply(w, 503, `{"error":"shutting down","code":"shutting_down"}`, "Retry-After", "2")
	}
	mu.Unlock()
	if _, err := c.Leader(t.Context(), time.Second); !errors.Is(err, client.ErrShuttingDown) {
		t.Errorf("shutting down: %v", err)
	}
}

// WaitLeader blocks on GET /v1/leader?wait=, asks again after a 503 status
// (the wait ran out) at once and after an error, and returns once leading.
func TestWaitLeader(t *testing.T) {
	var mu sync.Mutex
	n := 0
	s, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		switch k {
		case 1:
			reply(w, 503, following, "Retry-After", "1")
		case 2:
			reply(w, 500, `{"error":"boom"}`)
		default:
			reply(w, 200, leading)
		}
	})
	st, err := c.WaitLeader(t.Context())
	if err != nil || st != leading {
		t.Fatalf("%+v, %v", st, err)
	}
	reqs := s.recorded()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, r := range reqs {
		if r.URL.Path != "/v1/leader" || r.URL.Query().Get("wait") != "5m0s" {
			t.Errorf("request %s, want /v1/leader?wait=5m0s", r.URL)
		}
	}
}

// WaitLeader gives up on an answer asking again cannot change, and when
// ctx ends, naming the last failure.
func TestWaitLeaderGivesUp(t *testing.T) {
	_, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 409, `{"error":"this sidecar serves a lease group","code":"lease_group"}`)
	})
	if _, err := c.WaitLeader(t.Context()); !errors.Is(err, client.ErrLeaseGroup) {
		t.Errorf("lease group: %v", err)
	}

	s, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {})
	s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := c.WaitLeader(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the last request failed") {
		t.Errorf("unreachable: %v", err)
	}
}

// Poll sends index and wait; index 0 is left out (answer at once).
func TestPoll(t *testing.T) {
	s, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, leading) })
	ctx := t.Context()
	if st, next, err := c.Poll(ctx, 0, time.Minute); err != nil || next != 11 || st.Index != 11 {
		t.Fatalf("%+v %d %v", st, next, err)
	}
	if _, _, err := c.Poll(ctx, 11, 0); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.recorded() {
		got = append(got, r.URL.RequestURI())
	}
	if want := "/v1/watch?wait=1m0s /v1/watch?index=11"; strings.Join(got, " ") != want {
		t.Errorf("requests %v, want %s", got, want)
	}
}

// For a Lease of a group, Poll follows GET /v1/leases: that Lease's status
// with its own Index, and the group's index next; a Lease the group lacks
// is ErrUnknownLease.
func TestPollALeaseOfAGroup(t *testing.T) {
	other := following
	other.Lease, other.Index = "reporter", 3
	s, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, api.Leases{Index: 77, Leases: []api.Status{other, leading}})
	})
	st, next, err := c.Lease("orders").Poll(t.Context(), 70, time.Minute)
	if err != nil || st != leading || next != 77 {
		t.Fatalf("%+v %d %v", st, next, err)
	}
	if got := s.recorded()[0].URL.RequestURI(); got != "/v1/leases?index=70&wait=1m0s" {
		t.Errorf("request %s", got)
	}
	if _, _, err := c.Lease("nope").Poll(t.Context(), 0, time.Minute); !errors.Is(err, client.ErrUnknownLease) {
		t.Errorf("unknown Lease: %v", err)
	}
	for _, err := range c.Lease("nope").Watch(t.Context()) {
		if !errors.Is(err, client.ErrUnknownLease) {
			t.Errorf("Watch of an unknown Lease: %v", err)
		}
	}
}

// watchSidecar answers GET /v1/watch from a script of answers, one per
// request, then blocks until the test ends.
func watchSidecar(t *testing.T, script ...func(w http.ResponseWriter)) (*sidecar, *client.Client) {
	var mu sync.Mutex
	n := 0
	return newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		k := n
		n++
		mu.Unlock()
		if k >= len(script) {
			<-r.Context().Done()
			return
		}
		script[k](w)
	})
}

func status(index uint64, leader bool) func(w http.ResponseWriter) {
	st := following
	if leader {
		st = leading
	}
	st.Index = index
	return func(w http.ResponseWriter) { reply(w, 200, st) }
}

// Watch yields the first status and then only changes of Index (a
// backwards one too), carrying on from each answer's index; errors are
// yielded and retried.
func TestWatch(t *testing.T) {
	s, c := watchSidecar(t,
		status(10, false),
		status(10, false), // the wait ran out: no change
		status(11, true),
		func(w http.ResponseWriter) { reply(w, 503, `{"error":"shutting down","code":"shutting_down"}`) }, // no Retry-After: the backoff
		status(5, true), // a restarted sidecar, its clock set back
		status(6, false),
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []string
	for st, err := range c.Watch(ctx) {
		if err != nil {
			got = append(got, "error: "+string(err.(*client.Error).Code))
			continue
		}
		got = append(got, fmt.Sprintf("%d %v", st.Index, st.Leader))
		if st.Index == 6 {
			break
		}
	}
	if want := "10 false|11 true|error: shutting_down|5 true|6 false"; strings.Join(got, "|") != want {
		t.Errorf("yielded %q, want %q", strings.Join(got, "|"), want)
	}
	var queries []string
	for _, r := range s.recorded() {
		queries = append(queries, r.URL.Query().Get("index"))
	}
	if want := ",10,10,11,11,5"; strings.Join(queries, ",") != want {
		t.Errorf("indices asked %q, want %q", strings.Join(queries, ","), want)
	}
}

// Watch ends after yielding an answer asking again cannot change, and
// when ctx ends, without yielding ctx's error.
func TestWatchEnds(t *testing.T) {
	_, c := watchSidecar(t, func(w http.ResponseWriter) {
		reply(w, 409, `{"error":"lease group","code":"lease_group"}`)
	})
	n := 0
	for _, err := range c.Watch(t.Context()) {
		n++
		if !errors.Is(err, client.ErrLeaseGroup) {
			t.Errorf("yielded %v", err)
		}
	}
	if n != 1 {
		t.Errorf("%d yields, want 1", n)
	}

	_, c = watchSidecar(t, status(1, false)) // then blocks
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n = 0
	for _, err := range c.Watch(ctx) {
		n++
		if err != nil {
			t.Errorf("yielded %v", err)
		}
		cancel()
	}
	if n != 1 {
		t.Errorf("%d yields, want 1", n)
	}
}

func TestWatchLeases(t *testing.T) {
	leases := func(index uint64) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) { reply(w, 200, api.Leases{Index: index, Leases: []api.Status{leading}}) }
	}
	s, c := watchSidecar(t, leases(3), leases(3), leases(4))
	var got []uint64
	for all, err := range c.WatchLeases(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, all.Index); all.Index == 4 {
			break
		}
	}
	if fmt.Sprint(got) != "[3 4]" {
		t.Errorf("yielded %v", got)
	}
	if r := s.recorded(); len(r) != 3 || r[2].URL.RequestURI() != "/v1/leases?index=3&wait=5m0s" {
		t.Errorf("requests %d, last %s", len(r), r[len(r)-1].URL)
	}
}

// OnAnswer sees every answer, verbatim.
func TestOnAnswer(t *testing.T) {
	body := `{"identity":"x","leader":true,"futureField":1}` + "\n"
	s, _ := newSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, body) })
	var seen []client.Answer
	c, err := client.New(s.URL, client.OnAnswer(func(a client.Answer) { seen = append(seen, a) }), client.WithUserAgent("test/1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || string(seen[0].Body) != body || seen[0].StatusCode != 200 || seen[0].Method != "GET" || seen[0].URL != s.URL+"/v1/status" {
		t.Errorf("seen %+v", seen)
	}
	if ua := s.recorded()[0].Header.Get("User-Agent"); ua != "test/1" {
		t.Errorf("User-Agent %q", ua)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	for value, want := range map[string]time.Duration{
		"0":                    0,
		"2":                    2 * time.Second,
		"99999999999999999999": 1<<63 - 1,
		now.Add(5 * time.Second).Format(http.TimeFormat):  5 * time.Second,
		now.Add(-5 * time.Second).Format(http.TimeFormat): 0,
	} {
		if got, ok := client.ParseRetryAfter(value, now); !ok || got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v", value, got, ok, want)
		}
	}
	for _, value := range []string{"", "-1", "+1", "soon", "1.5"} {
		if got, ok := client.ParseRetryAfter(value, now); ok {
			t.Errorf("ParseRetryAfter(%q) = %v; want none", value, got)
		}
	}
}

// holdSidecar grants holds (or answers code), and reports when a granted
// hold's connection closes.
func holdSidecar(t *testing.T, code int) (s *sidecar, c *client.Client, closed chan string, end chan struct{}) {
	closed, end = make(chan string, 4), make(chan struct{})
	s, c = newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		if code != 200 {
			reply(w, code, `{"error":"not leading with fencing token 1042","code":"conflict"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_ = json.NewEncoder(w).Encode(api.Held{Held: true, Status: leading})
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
			closed <- r.URL.RequestURI()
		case <-end:
		}
	})
	return s, c, closed, end
}

// A granted hold stays open until Close, which the sidecar sees.
func TestHold(t *testing.T) {
	_, c, closed, _ := holdSidecar(t, 200)
	h, err := c.Lease("orders").Hold(t.Context(), 1042)
	if err != nil {
		t.Fatal(err)
	}
	if h.Token() != 1042 || h.Status() != leading {
		t.Errorf("token %d, status %+v", h.Token(), h.Status())
	}
	select {
	case <-h.Done():
		t.Fatal("the hold ended by itself")
	case uri := <-closed:
		t.Fatalf("the sidecar saw %s close", uri)
	default:
	}
	if err := h.Close(); err != nil || h.Err() != nil {
		t.Fatalf("Close: %v, Err: %v", err, h.Err())
	}
	if uri := <-closed; uri != "/v1/leases/orders/hold?token=1042" {
		t.Errorf("closed %s", uri)
	}
	_ = h.Close() // idempotent
	var none *client.Hold
	_ = none.Close()
}

// The hold's ctx bounds it only until the grant: cancelled after, it does
// not end the hold, which still sees the sidecar end it (io.EOF), not a
// Close (nil).
func TestHoldOutlivesItsContext(t *testing.T) {
	_, c, closed, end := holdSidecar(t, 200)
	ctx, cancel := context.WithCancel(t.Context())
	h, err := c.Hold(ctx, 1042)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	close(end)
	<-h.Done()
	if !errors.Is(h.Err(), io.EOF) {
		t.Errorf("Err() = %v, want io.EOF: the request's context ended the hold", h.Err())
	}
	select {
	case uri := <-closed:
		t.Errorf("the sidecar saw %s close before it ended the hold", uri)
	default:
	}
	h.Close()
}

// A hold the sidecar ends is Done, with io.EOF.
func TestHoldEndedBySidecar(t *testing.T) {
	_, c, _, end := holdSidecar(t, 200)
	h, err := c.Hold(t.Context(), 1042)
	if err != nil {
		t.Fatal(err)
	}
	close(end)
	<-h.Done()
	if !errors.Is(h.Err(), io.EOF) {
		t.Errorf("Err() = %v, want io.EOF", h.Err())
	}
	h.Close()
}

func TestHoldRefused(t *testing.T) {
	_, c, _, _ := holdSidecar(t, 409)
	if h, err := c.Hold(t.Context(), 1042); !errors.Is(err, client.ErrConflict) || h != nil {
		t.Errorf("%v, %v; want ErrConflict", h, err)
	}
}

// WaitLeaderFor asks for at most what is left of its timeout, at least
// once, and when the timeout passes says so with the last status (or the
// last failure); retrying sees each failure, first only the first in a
// row, and may give up.
func TestWaitLeaderFor(t *testing.T) {
	s, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("wait") {
			d, _ := time.ParseDuration(r.URL.Query().Get("wait"))
			select {
			case <-time.After(d):
			case <-r.Context().Done():
			}
		}
		reply(w, 503, following, "Retry-After", "1")
	})
	_, err := c.WaitLeaderFor(t.Context(), 300*time.Millisecond, nil)
	te, ok := errors.AsType[*client.TimeoutError](err)
	if !ok || te.Err != nil || te.Status != following || err.Error() != "not leading after 300ms (holder: "+following.Holder+")" {
		t.Fatalf("%v: want a *TimeoutError with the last status", err)
	}
	reqs := s.recorded()
	if w, err := time.ParseDuration(reqs[0].URL.Query().Get("wait")); err != nil || w <= 0 || w > 300*time.Millisecond {
		t.Errorf("first request waits %q, want at most the timeout", reqs[0].URL.Query().Get("wait"))
	}

	s, c = newSidecar(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, leading) })
	if st, err := c.WaitLeaderFor(t.Context(), time.Nanosecond, nil); err != nil || st != leading {
		t.Errorf("1ns: %+v, %v; want the leader's status", st, err)
	}
	if reqs := s.recorded(); len(reqs) != 1 || reqs[0].URL.Query().Has("wait") {
		t.Errorf("1ns: requests %v; want one, that does not block", reqs)
	}

	var mu sync.Mutex
	n := 0
	_, c = newSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		switch k {
		case 1, 2, 4:
			reply(w, 503, `{"error":"shutting down","code":"shutting_down"}`, "Retry-After", "0")
		case 3:
			reply(w, 503, following)
		default:
			reply(w, 502, "<html>bad gateway</html>")
		}
	})
	var firsts []bool
	_, err = c.WaitLeaderFor(t.Context(), 0, func(err error, first bool) bool {
		firsts = append(firsts, first)
		var e *client.Error
		return errors.As(err, &e) && e.StatusCode == 503
	})
	if e, ok := errors.AsType[*client.Error](err); !ok || e.StatusCode != 502 {
		t.Errorf("%v: want the 502 retrying gave up on", err)
	}
	if want := []bool{true, false, true, false}; fmt.Sprint(firsts) != fmt.Sprint(want) {
		t.Errorf("retrying saw first = %v, want %v", firsts, want)
	}

	closed, c := newSidecar(t, func(w http.ResponseWriter, r *http.Request) {})
	closed.Close()
	_, err = c.WaitLeaderFor(t.Context(), 300*time.Millisecond, nil)
	if te, ok := errors.AsType[*client.TimeoutError](err); !ok || te.Err == nil || !strings.HasPrefix(err.Error(), "gave up after 300ms: ") {
		t.Errorf("unreachable: %v; want a *TimeoutError with the last failure", err)
	}
}
