package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/proxy"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/proxyload"
	"github.com/leasehold/leasehold/pkg/api"
)

// leaseApp is the app beside one sidecar of a group: it records, for every
// request it serves, the Lease and the fencing token the proxy attached,
// and answers with its name.
type leaseApp struct {
	name string
	srv  *httptest.Server

	mu     sync.Mutex
	served map[string]map[fence.Token]int // Lease → token → requests
}

func newLeaseApp(t *testing.T, name string) *leaseApp {
	a := &leaseApp{name: name, served: map[string]map[fence.Token]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		tok, _ := strconv.ParseUint(r.Header.Get(proxy.HeaderFencingToken), 10, 64)
		lease := r.Header.Get(proxy.HeaderLease)
		a.mu.Lock()
		if a.served[lease] == nil {
			a.served[lease] = map[fence.Token]int{}
		}
		a.served[lease][fence.Token(tok)]++
		a.mu.Unlock()
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// leases are the Leases the app served requests for ("": none named).
func (a *leaseApp) leases() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for lease := range a.served {
		out = append(out, lease)
	}
	return out
}

// servedUnder is how many requests for lease the app served under each
// token.
func (a *leaseApp) servedUnder(lease string) map[fence.Token]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[fence.Token]int{}
	for tok, n := range a.served[lease] {
		out[tok] = n
	}
	return out
}

// groupMember is a sidecar of a lease group with its forwarding proxy
// (also its advertised address) and its app.
type groupMember struct {
	*fleet.Instance
	app   *leaseApp
	proxy string // host:port
}

// startGroupMember starts a sidecar of f's group with its own app and
// proxy.
func startGroupMember(t *testing.T, f fleet.Config, name string) *groupMember {
	t.Helper()
	port, err := kubetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := &groupMember{app: newLeaseApp(t, name), proxy: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	f.Env = append(slices.Clone(f.Env), "LEASEHOLD_ADVERTISE_ADDRESS="+m.proxy, "LEASEHOLD_PROXY_ADDR="+m.proxy,
		"LEASEHOLD_PROXY_UPSTREAM="+m.app.srv.Listener.Addr().String())
	m.Instance = start(t, f, name)
	return m
}

// leading returns the status of each Lease m leads now, by Lease.
func (m *groupMember) leading(t *testing.T) map[string]api.Status {
	t.Helper()
	l, err := m.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]api.Status{}
	for _, st := range l.Leases {
		if st.Leader {
			out[st.Lease] = st
		}
	}
	return out
}

// through sends a GET to the proxy at addr for lease (HeaderLease; none
// when ""), and returns the status and body.
func through(t *testing.T, c *http.Client, addr, lease string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if lease != "" {
		req.Header.Set(proxy.HeaderLease, lease)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET through %s for %q: %v", addr, lease, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// A lease group of two Leases, two sidecars with their proxies, each
// leading one Lease: a request for either Lease, by its name or as
// namespace/name, through either sidecar's proxy reaches the app of that
// Lease's leader with that Lease's fencing token and name. A request
// without X-Leasehold-Lease is answered 400 and one for another Lease 404,
// with the proxy's JSON error listing the group's Leases, and reaches no
// app. Each proxy's series carry the group, and the Lease's name.
func TestGroupProxyServesEachLeaseFromItsLeader(t *testing.T) {
	f := newFleet(t)
	f.Env = []string{"LEASEHOLD_SHARDS=2"}
	a, b := startGroupMember(t, f, "a"), startGroupMember(t, f, "b")
	settledShares(t, a.Instance, b.Instance)
	leaderOf := map[string]*groupMember{}
	tokens := map[string]fence.Token{}
	for _, m := range []*groupMember{a, b} {
		for lease, st := range m.leading(t) {
			leaderOf[lease], tokens[lease] = m, st.FencingToken
		}
	}
	if len(leaderOf) != 2 || leaderOf["app-0"] == leaderOf["app-1"] {
		t.Fatalf("leaders %v, want one Lease each", leaderOf)
	}

	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: generous}
	for _, lease := range []string{"app-0", "app-1"} {
		for _, via := range []*groupMember{a, b} {
			for _, named := range []string{lease, f.Namespace + "/" + lease} {
				want := leaderOf[lease]
				before := want.app.servedUnder(lease)[tokens[lease]]
				if code, body := through(t, c, via.proxy, named); code != http.StatusOK || body != want.app.name {
					t.Fatalf("through %s's proxy for %s: %d %q, want the answer of %s's app", via.Name, named, code, body, want.app.name)
				}
				if got := want.app.servedUnder(lease)[tokens[lease]]; got != before+1 {
					t.Errorf("through %s's proxy for %s: %s's app served %d requests for %s under token %d, want 1 (it served %v)",
						via.Name, named, want.app.name, got-before, lease, tokens[lease], want.app.servedUnder(lease))
				}
			}
		}
	}
	for _, m := range []*groupMember{a, b} {
		for _, lease := range m.app.leases() {
			if leaderOf[lease] != m {
				t.Errorf("%s's app served requests for %s, which %s leads: %v", m.Name, lease, leaderOf[lease].Name, m.app.servedUnder(lease))
			}
		}
	}

	for _, tc := range []struct {
		lease  string
		status int
		code   api.ErrorCode
	}{
		{"", http.StatusBadRequest, proxy.CodeLeaseRequired},
		{"app-2", http.StatusNotFound, proxy.CodeUnknownLease},
		{"other/app-0", http.StatusNotFound, proxy.CodeUnknownLease},
	} {
		for _, via := range []*groupMember{a, b} {
			code, body := through(t, c, via.proxy, tc.lease)
			var e api.Error
			if err := json.Unmarshal([]byte(body), &e); err != nil || code != tc.status || e.Code != tc.code {
				t.Errorf("through %s's proxy for %q: %d %s, want %d %s", via.Name, tc.lease, code, body, tc.status, tc.code)
			}
			if want := f.Namespace + "/app-0, " + f.Namespace + "/app-1"; !strings.Contains(e.Message, want) {
				t.Errorf("through %s's proxy for %q: the error %q does not list the Leases (%s)", via.Name, tc.lease, e.Message, want)
			}
		}
	}
	for _, m := range []*groupMember{a, b} {
		if n := len(m.app.servedUnder("")); n != 0 {
			t.Errorf("%s's app served %d requests that named no Lease", m.Name, n)
		}
	}

	metrics, err := a.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, lease := range []string{"app-0", "app-1"} {
		// Sent to a's proxy twice; for a's own Lease, twice more from b's.
		labels := map[string]string{"group": "app", "namespace": f.Namespace, "lease": lease, "outcome": "forwarded", "code": "200"}
		want := 2.0
		if leaderOf[lease] == a {
			labels["outcome"], want = "local", 4
		}
		if got := metrics.Sum("leasehold_proxy_requests_total", labels); got != want {
			t.Errorf("a: leasehold_proxy_requests_total%v = %v, want %v", labels, got, want)
		}
	}
	unrouted := map[string]string{"group": "app", "namespace": f.Namespace}
	if got := metrics.Sum("leasehold_proxy_unrouted_requests_total", unrouted); got != 3 {
		t.Errorf("a: leasehold_proxy_unrouted_requests_total%v = %v, want 3", unrouted, got)
	}
}

// Graceful handovers in a lease group, under load through the proxies: two
// sidecars each lead one of two Leases, and clients send requests for both
// Leases, without pause, to both proxies. One sidecar is SIGTERMed: it
// hands its Lease to the other (in one write, the group's default; or, with
// LEASEHOLD_HANDOVER=any, by a release the other acquires), which then
// leads both; a new sidecar joins and takes one over; handoversPerGroupMode
// times in each mode. No proxy answers 502, no proxy of a sidecar that
// stays leaves a request unanswered, every SIGTERMed sidecar exits 0, and
// each app serves a Lease only under the tokens its own sidecar led that
// Lease under.
func TestGroupProxyHandoversAnswerNo502(t *testing.T) {
	for _, mode := range []struct{ name, env string }{
		{"one write", ""},
		{"any", "LEASEHOLD_HANDOVER=any"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			f := newFleet(t)
			f.Env = []string{"LEASEHOLD_SHARDS=2"}
			if mode.env != "" {
				f.Env = append(f.Env, mode.env)
			}
			groupProxyHandovers(t, f, handoversPerGroupMode)
		})
	}
}

// handoversPerGroupMode is how many handovers
// TestGroupProxyHandoversAnswerNo502 runs in each mode.
const handoversPerGroupMode = 8

// groupProxyHandovers runs the handovers of
// TestGroupProxyHandoversAnswerNo502 in f's group.
func groupProxyHandovers(t *testing.T, f fleet.Config, handovers int) {
	leases := []string{"app-0", "app-1"}
	members := []*groupMember{startGroupMember(t, f, "a"), startGroupMember(t, f, "b")}
	settledShares(t, members[0].Instance, members[1].Instance)

	// held[m][lease] are the tokens m led lease under, as its status said.
	var heldMu sync.Mutex
	held := map[*groupMember]map[string][]fence.Token{}
	record := func(m *groupMember) {
		heldMu.Lock()
		defer heldMu.Unlock()
		if held[m] == nil {
			held[m] = map[string][]fence.Token{}
		}
		for lease, st := range m.leading(t) {
			if !slices.Contains(held[m][lease], st.FencingToken) {
				held[m][lease] = append(held[m][lease], st.FencingToken)
			}
		}
	}
	for _, m := range members {
		record(m)
	}

	var (
		mu      sync.Mutex
		current = slices.Clone(members) // the proxies the clients send to
	)
	load := proxyload.Start(t.Context(), len(members)*len(leases), func(client int) proxyload.Target[*groupMember] {
		mu.Lock()
		defer mu.Unlock()
		via, lease := current[client/len(leases)], leases[client%len(leases)]
		return proxyload.Target[*groupMember]{Addr: via.proxy, Header: http.Header{proxy.HeaderLease: {lease}}, Via: via}
	})
	defer load.Stop()

	var leaving []*groupMember
	all := slices.Clone(members)
	for k := range handovers {
		mu.Lock()
		leaver, stayer := current[0], current[1]
		mu.Unlock()
		leaving = append(leaving, leaver)
		before := stayer.leading(t)
		terminate(t, leaver.Instance)
		if code := leaver.ExitCode(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", leaver.Name, code)
		}
		for _, lease := range leases {
			waitLeads(t, stayer.Instance, lease, func(st api.Status) bool {
				prior, ok := before[lease]
				return !ok || st.FencingToken == prior.FencingToken
			})
		}
		record(stayer)
		joined := startGroupMember(t, f, fmt.Sprintf("n%d", k))
		all = append(all, joined)
		mu.Lock()
		current[0], current[1] = stayer, joined
		mu.Unlock()
		settledShares(t, stayer.Instance, joined.Instance)
		record(stayer)
		record(joined)
	}
	answers := load.Stop()

	codes := map[int]int{}
	var refused int
	for _, a := range answers {
		switch {
		case a.Err != nil && slices.Contains(leaving, a.Via):
			refused++ // the SIGTERMed sidecar's proxy, once it had closed
		case a.Err != nil:
			t.Errorf("a request to %s's proxy, which was not stopped, got no answer: %v", a.Via.Name, a.Err)
		default:
			codes[a.Code]++
			if a.Code != http.StatusOK && a.Code != http.StatusServiceUnavailable {
				t.Errorf("%s's proxy answered %d: %s", a.Via.Name, a.Code, a.Body)
			}
		}
	}
	t.Logf("%d handovers in a group of %d Leases: %d requests answered %v; %d not answered by a SIGTERMed sidecar's proxy",
		handovers, len(leases), len(answers)-refused, codes, refused)
	if codes[http.StatusOK] == 0 {
		t.Fatal("no request was served")
	}
	heldMu.Lock()
	defer heldMu.Unlock()
	for _, m := range all {
		for _, lease := range leases {
			for tok, n := range m.app.servedUnder(lease) {
				if !slices.Contains(held[m][lease], tok) {
					t.Errorf("%s's app served %d requests for %s under token %d; its sidecar led %s under %v", m.Name, n, lease, tok, lease, held[m][lease])
				}
			}
		}
	}
}
