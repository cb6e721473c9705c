package proxy

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
	"github.com/leasehold/leasehold/pkg/api"
)

// TestMain fails the package if any goroutine outlives the tests: every
// server, proxy transport, client and hijacked connection the tests open
// must be closed. No cluster: this package talks to no apiserver.
func TestMain(m *testing.M) {
	os.Exit(kubetest.LeakCheck(m.Run()))
}

// generous bounds real-time waits on a shared, noisy machine; it never
// decides an outcome.
const generous = 20 * time.Second

// eventually polls cond until it holds, failing t after generous.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, generous, time.Millisecond, what, cond)
}

// seen is one request as an app stand-in received it.
type seen struct {
	Method, Path, Host string
	Header             http.Header
	Body               string
}

// app is a stand-in for an app (or for a leader's proxy): a real loopback
// server that records every request it receives and answers with the
// handler the test set (default: 200 "ok from <name>").
type app struct {
	name string
	srv  *httptest.Server

	mu      sync.Mutex
	seen    []seen
	handler http.HandlerFunc
}

// newApp starts an app stand-in, closed at the test's end.
func newApp(t testing.TB, name string) *app {
	t.Helper()
	a := &app{name: name}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *app) addr() string { return a.srv.Listener.Addr().String() }

// handle sets what the app answers; the request is recorded before h runs
// (without its body: h reads it).
func (a *app) handle(h http.HandlerFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.handler = h
}

func (a *app) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	h := a.handler
	a.mu.Unlock()
	s := seen{Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host, Header: r.Header.Clone()}
	if h != nil {
		a.record(s)
		h(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.Body = string(body)
	a.record(s)
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok from "+a.name)
}

func (a *app) record(s seen) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, s)
}

// requests returns what the app has received so far.
func (a *app) requests() []seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]seen(nil), a.seen...)
}

// instance is a Proxy served on a real loopback listener.
type instance struct {
	p   *Proxy
	srv *httptest.Server
	reg *prometheus.Registry
}

func (i *instance) url() string  { return i.srv.URL }
func (i *instance) addr() string { return i.srv.Listener.Addr().String() }

// newInstance creates a Proxy from cfg (its own registry unless set) and
// serves it; both end at the test's end.
func newInstance(t testing.TB, cfg Config) *instance {
	t.Helper()
	reg := prometheus.NewRegistry()
	if cfg.Registerer == nil {
		cfg.Registerer = reg
	}
	if cfg.Lease == "" && cfg.Leases == nil {
		cfg.Lease = testLease
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		p.CloseIdleConnections()
	})
	return &instance{p: p, srv: srv, reg: reg}
}

// testLease is the Lease of every test's proxies unless the test names
// another.
const testLease = "default/app"

// Views.
func leading(token uint64, term int32) func(time.Time) View {
	return func(time.Time) View { return View{Leading: true, Token: api.FencingToken(token), Term: term} }
}

func following(leader string) func(time.Time) View {
	return func(time.Time) View { return View{LeaderAddress: leader} }
}

func noLeader(time.Time) View { return View{} }

// newClient is a keep-alive client for the test, its idle connections
// closed at the end.
func newClient(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: generous}
}

// answer is a response, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

// errorBody decodes a proxy's own JSON error.
func (a answer) errorBody(t *testing.T) api.Error {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal([]byte(a.body), &e); err != nil {
		t.Fatalf("answer %d %q is not a JSON error: %v", a.status, a.body, err)
	}
	return e
}

func do(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: string(body)}
}

func get(t *testing.T, c *http.Client, url string, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	return do(t, c, req)
}

// counted is leasehold_proxy_requests_total{outcome, code} in reg.
func counted(t *testing.T, reg *prometheus.Registry, outcome string, code int) float64 {
	t.Helper()
	return metricValue(t, reg, "leasehold_proxy_requests_total", map[string]string{"outcome": outcome, "code": strconv.Itoa(code)}, false)
}

// timed is the sample count of leasehold_proxy_request_duration_seconds{outcome}.
func timed(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	return metricValue(t, reg, "leasehold_proxy_request_duration_seconds", map[string]string{"outcome": outcome}, true)
}

func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string, histogram bool) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			if histogram {
				return float64(m.GetHistogram().GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// closingListener accepts connections, counts them, reads what arrives for
// a moment and closes them without answering: an app that dies on every
// request.
type closingListener struct {
	ln       net.Listener
	accepted atomic.Int64
	done     chan struct{}
}

func newClosingListener(t *testing.T) *closingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &closingListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			_, _ = io.Copy(io.Discard, conn)
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-c.done
	})
	return c
}

func (c *closingListener) addr() string { return c.ln.Addr().String() }
