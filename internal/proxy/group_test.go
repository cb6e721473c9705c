package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/rule"
)

// In a lease group, each request is decided by the View of the Lease its
// X-Leasehold-Lease names (namespace/name or the name alone): two
// instances, X leading shop/a and Y leading shop/b. Through either proxy,
// a request for a Lease reaches the app of that Lease's leader, with that
// Lease's token and term and its name; a request naming no Lease of the
// group, or several, or another, is answered 400 or 404 with the Leases
// listed, and one forwarded by another proxy for a Lease not in the group
// 503 wrong_lease; none of them reaches an app. Each Lease's series carry
// its lease; the refused ones are counted apart.
func TestGroupRoutesByLease(t *testing.T) {
	appX, appY := newApp(t, "X"), newApp(t, "Y")
	y := newInstance(t, Config{Upstream: appY.addr(), RetryAfter: 2 * time.Second, Leases: []Lease{
		{Name: "shop/a", View: noLeader}, // set below, once X listens
		{Name: "shop/b", View: leading(900, 3)},
	}})
	x := newInstance(t, Config{Upstream: appX.addr(), Leases: []Lease{
		{Name: "shop/a", View: leading(700, 2)},
		{Name: "shop/b", View: following(y.addr())},
	}})
	y.p.leases[0].view = following(x.addr()) // before any request: no race
	c := newClient(t)

	for _, tc := range []struct {
		via, lease string
		app        *app
		token      string
		term       string
		name       string
	}{
		{"X", "a", appX, "700", "2", "a"},
		{"X", "shop/a", appX, "700", "2", "a"},
		{"X", "shop/b", appY, "900", "3", "b"},
		{"Y", "a", appX, "700", "2", "a"},
		{"Y", "b", appY, "900", "3", "b"},
	} {
		via := map[string]*instance{"X": x, "Y": y}[tc.via]
		before := len(tc.app.requests())
		got := get(t, c, via.url()+"/orders", http.Header{HeaderLease: {tc.lease}, HeaderFencingToken: {"1"}, HeaderTerm: {"1"}})
		if got.status != 200 || got.body != "ok from "+tc.app.name {
			t.Fatalf("via %s for %s: %d %q, want the answer of %s's app", tc.via, tc.lease, got.status, got.body, tc.app.name)
		}
		seen := tc.app.requests()
		if len(seen) != before+1 {
			t.Fatalf("via %s for %s: %s's app received %d requests, want 1", tc.via, tc.lease, tc.app.name, len(seen)-before)
		}
		h := seen[len(seen)-1].Header
		if h.Get(HeaderFencingToken) != tc.token || h.Get(HeaderTerm) != tc.term || h.Get(HeaderLease) != tc.name || h.Get(HeaderForwarded) != "" {
			t.Errorf("via %s for %s: the app got token %q, term %q, %s %q, %s %q; want %s, %s, %s and no loop guard",
				tc.via, tc.lease, h.Get(HeaderFencingToken), h.Get(HeaderTerm), HeaderLease, h.Get(HeaderLease),
				HeaderForwarded, h.Get(HeaderForwarded), tc.token, tc.term, tc.name)
		}
	}
	served := len(appX.requests()) + len(appY.requests())

	for _, tc := range []struct {
		name   string
		header http.Header
		status int
		code   Code
	}{
		{"no header", nil, 400, CodeLeaseRequired},
		{"an empty one", http.Header{HeaderLease: {""}}, 404, CodeUnknownLease},
		{"two", http.Header{HeaderLease: {"a", "b"}}, 400, CodeLeaseRequired},
		{"another Lease", http.Header{HeaderLease: {"c"}}, 404, CodeUnknownLease},
		{"the name in another namespace", http.Header{HeaderLease: {"other/a"}}, 404, CodeUnknownLease},
		{"forwarded for another Lease", http.Header{HeaderLease: {"shop/c"}, HeaderForwarded: {"a-proxy"}}, 503, CodeWrongLease},
		{"forwarded without a Lease", http.Header{HeaderForwarded: {"a-proxy"}}, 503, CodeWrongLease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := get(t, c, x.url()+"/orders", tc.header)
			if got.status != tc.status || got.errorBody(t).Code != tc.code {
				t.Fatalf("%d %s, want %d %s", got.status, got.body, tc.status, tc.code)
			}
			if !strings.Contains(got.body, "shop/a, shop/b") {
				t.Errorf("the error %s does not list the group's Leases", got.body)
			}
			if ra := got.header.Get("Retry-After"); (tc.status == 503) != (ra == "1") {
				t.Errorf("Retry-After %q on a %d", ra, tc.status)
			}
			if got.header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", got.header.Get("Content-Type"))
			}
		})
	}
	if n := len(appX.requests()) + len(appY.requests()); n != served {
		t.Fatalf("the apps received %d requests that named no Lease of the group", n-served)
	}

	for _, tc := range []struct {
		reg     *instance
		lease   string
		outcome string
		want    float64
	}{
		{x, "a", "local", 3}, // two of X's clients, and the one Y forwarded
		{x, "b", "forwarded", 1},
		{y, "a", "forwarded", 1},
		{y, "b", "local", 2}, // the one X forwarded, and Y's client's
		{x, "b", "local", 0},
	} {
		labels := map[string]string{"lease": tc.lease, "outcome": tc.outcome, "code": "200"}
		if got := metricValue(t, tc.reg.reg, "leasehold_proxy_requests_total", labels, false); got != tc.want {
			t.Errorf("%s: leasehold_proxy_requests_total%v = %v, want %v", tc.reg.addr(), labels, got, tc.want)
		}
	}
	for code, want := range map[int]float64{400: 2, 404: 3, 503: 2} {
		labels := map[string]string{"code": strconv.Itoa(code)}
		if got := metricValue(t, x.reg, "leasehold_proxy_unrouted_requests_total", labels, false); got != want {
			t.Errorf("leasehold_proxy_unrouted_requests_total%v = %v, want %v", labels, got, want)
		}
	}
}

// In a group, each Lease keeps its own terms: an upgraded connection
// forwarded under Lease a's term stays open when Lease b's term, of the
// same token, ends, and closes when a's does.
func TestGroupTermsArePerLease(t *testing.T) {
	const bound = 2 * time.Second
	app := newLongLivedApp(t)
	var a, b termView
	a.token.Store(5)
	b.token.Store(5)
	i := newInstance(t, Config{Upstream: app.addr(), Leases: []Lease{{Name: "shop/a", View: a.view}, {Name: "shop/b", View: b.view}}})
	onA := sendUpgradeFor(t, i.addr(), "a").switched(t)
	onB := sendUpgradeFor(t, i.addr(), "b").switched(t)
	for _, u := range []*upgrading{onA, onB} {
		if err := u.echo("hello"); err != nil {
			t.Fatal(err)
		}
	}

	b.token.Store(0)
	i.p.CloseEndedTerms()
	if err := endsWithin(onB.r, bound); err != nil {
		t.Fatalf("b's connection, its term ended: %v", err)
	}
	if err := onA.echo("a goes on"); err != nil {
		t.Fatalf("a's connection, b's term ended: %v", err)
	}
	a.token.Store(0)
	i.p.CloseEndedTerms()
	if err := endsWithin(onA.r, bound); err != nil {
		t.Fatalf("a's connection, its term ended: %v", err)
	}
}

// New refuses Leases it cannot serve, naming the field.
func TestNewValidatesLeases(t *testing.T) {
	view := func(time.Time) View { return View{} }
	for _, tc := range []struct {
		name   string
		cfg    Config
		field  string
		inText string
	}{
		{"empty", Config{Upstream: "127.0.0.1:8080", Leases: []Lease{}}, "Leases", "no Lease"},
		{"with Lease", Config{Upstream: "127.0.0.1:8080", Lease: testLease, Leases: []Lease{{Name: "shop/a", View: view}}}, "Leases", "Lease or View"},
		{"with View", Config{Upstream: "127.0.0.1:8080", View: view, Leases: []Lease{{Name: "shop/a", View: view}}}, "Leases", "Lease or View"},
		{"a name without namespace", Config{Upstream: "127.0.0.1:8080", Leases: []Lease{{Name: "shop/a", View: view}, {Name: "b", View: view}}}, "Leases[1].Name", "namespace/name"},
		{"no view", Config{Upstream: "127.0.0.1:8080", Leases: []Lease{{Name: "shop/a"}}}, "Leases[0].View", "required"},
		{"a name twice", Config{Upstream: "127.0.0.1:8080", Leases: []Lease{{Name: "shop/a", View: view}, {Name: "other/a", View: view}}}, "Leases[1].Name", "listed already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			var re *rule.Error
			if !errors.As(err, &re) {
				t.Fatalf("New: %v, want a *rule.Error", err)
			}
			if re.Fields[0].Name != tc.field || !strings.Contains(err.Error(), tc.inText) {
				t.Errorf("New: %v names %s, want %s and %q", err, re.Fields[0].Name, tc.field, tc.inText)
			}
		})
	}
}

// In a group, a request whose Lease's leader's proxy refused the
// connection goes once more where that Lease's leader is known to be now:
// by the View of the same Lease, read again (here: this instance now leads
// it), with that Lease's token and name; the other Lease's View is not read.
func TestGroupRefusedAtConnectGoesOnceMoreForItsLease(t *testing.T) {
	app := newApp(t, "local")
	gone := deadAddr(t)
	var reads atomic.Int64
	b := func(time.Time) View {
		if reads.Add(1) == 1 {
			return View{LeaderAddress: gone}
		}
		return View{Leading: true, Token: 81, Term: 9}
	}
	var otherReads atomic.Int64
	a := func(time.Time) View {
		otherReads.Add(1)
		return View{LeaderAddress: gone}
	}
	i := newInstance(t, Config{Upstream: app.addr(), Leases: []Lease{{Name: "shop/a", View: a}, {Name: "shop/b", View: b}}})
	req, _ := http.NewRequest(http.MethodPost, i.url()+"/charge", strings.NewReader(`{"amount": 100}`))
	req.Header.Set(HeaderLease, "b")
	if got := do(t, newClient(t), req); got.status != 200 || got.body != "ok from local" {
		t.Fatalf("%d %s, want the local app's answer", got.status, got.body)
	}
	seen := app.requests()
	if len(seen) != 1 || seen[0].Header.Get(HeaderFencingToken) != "81" || seen[0].Header.Get(HeaderLease) != "b" || seen[0].Body != `{"amount": 100}` {
		t.Fatalf("the app got %+v, want the request once, with b's token 81 and its name", seen)
	}
	if n := otherReads.Load(); n != 0 {
		t.Errorf("the View of Lease a was read %d times for a request for b", n)
	}
}
