package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/group"
)

// leasesOfBody decodes the "leases" array of a GET /v1/leases body.
func leasesOfBody(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	arr, ok := body["leases"].([]any)
	if !ok {
		t.Fatalf("leases = %#v, want an array", body["leases"])
	}
	var out []map[string]any
	for _, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			t.Fatalf("leases element %#v, want an object", e)
		}
		out = append(out, m)
	}
	return out
}

// In single-Lease mode, GET /v1/leases presents the one Lease as a group
// of one without membership: its index is the Lease's, members is null,
// and the one element is exactly GET /v1/status's body. The named routes
// answer as the unnamed ones, for the Lease's own name only.
func TestLeasesInSingleLeaseMode(t *testing.T) {
	f := newFixture(t, candidate())
	f.publish(leading())
	f.clock.SetTime(t0.Add(2500 * time.Millisecond))
	api := f.srv.APIHandler()

	status := do(api, http.MethodGet, "/v1/status")
	for _, h := range []http.Handler{api, f.srv.OpsHandler()} {
		rec := do(h, http.MethodGet, "/v1/leases")
		if rec.Code != http.StatusOK || rec.Header().Get(indexHeader) != idxs(1) {
			t.Errorf("GET /v1/leases: %d, %s %q; want 200 at %s", rec.Code, indexHeader, rec.Header().Get(indexHeader), idxs(1))
		}
		want := fmt.Sprintf(`{"index":%d,"members":null,"leases":[%s]}`+"\n", idx(1), strings.TrimSuffix(status.Body.String(), "\n"))
		if got := rec.Body.String(); got != want {
			t.Errorf("GET /v1/leases =\n%s\nwant\n%s", got, want)
		}
	}

	// Each named route answers byte for byte as its unnamed counterpart.
	for unnamed, namedPath := range map[string]string{
		"GET /v1/status":         "GET /v1/leases/orders-leader",
		"GET /v1/leader":         "GET /v1/leases/orders-leader/leader",
		"GET /v1/leader?wait=1m": "GET /v1/leases/orders-leader/leader?wait=1m",
		"GET /v1/leader?wait=x":  "GET /v1/leases/orders-leader/leader?wait=x",
		"GET /v1/token":          "GET /v1/leases/orders-leader/token",
		"POST /v1/hold?token=x":  "POST /v1/leases/orders-leader/hold?token=x",
		"POST /v1/hold?token=9":  "POST /v1/leases/orders-leader/hold?token=9",
		"POST /v1/release?for=x": "POST /v1/leases/orders-leader/release?for=x",
	} {
		m1, t1, _ := strings.Cut(unnamed, " ")
		m2, t2, _ := strings.Cut(namedPath, " ")
		a, b := do(api, m1, t1), do(api, m2, t2)
		if a.Code != b.Code || a.Body.String() != b.Body.String() || !maps.EqualFunc(a.Header(), b.Header(), slices.Equal) {
			t.Errorf("%s → %d %v %s\nbut %s → %d %v %s", unnamed, a.Code, a.Header(), a.Body, namedPath, b.Code, b.Header(), b.Body)
		}
	}
	rec := do(api, http.MethodPost, "/v1/leases/orders-leader/release?for=30s")
	if got := decode(t, rec); rec.Code != http.StatusOK || got["released"] != true || got["leader"] != false {
		t.Errorf("named release: %d %v", rec.Code, got)
	}
	if got := f.el.stayOuts(); !slices.Equal(got, []time.Duration{30 * time.Second}) {
		t.Errorf("stay-outs = %v, want [30s]", got)
	}

	for _, target := range []string{"/v1/leases/orders", "/v1/leases/orders-leader-0/token", "/v1/leases/x/leader"} {
		rec := do(api, http.MethodGet, target)
		wantError(t, rec, http.StatusNotFound, codeUnknownLease)
		if rec.Header().Get(indexHeader) != idxs(2) {
			t.Errorf("%s: %s = %q, want the latest %s", target, indexHeader, rec.Header().Get(indexHeader), idxs(2))
		}
	}
}

// GET /v1/leases in group mode: the group's index (also in the header),
// its member count, and every Lease's status in configured order, each
// exactly what GET /v1/leases/{lease} answers; members is null without
// membership (an observer).
func TestLeasesInGroupMode(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	g.publish(1, leading()) // compactor: index idx(1); group gidx(1)
	g.setMembers(3)         // gidx(2)
	g.clock.SetTime(t0.Add(2500 * time.Millisecond))

	for _, h := range []http.Handler{g.srv.APIHandler(), g.srv.OpsHandler()} {
		rec := do(h, http.MethodGet, "/v1/leases")
		if rec.Code != http.StatusOK || rec.Header().Get(indexHeader) != gidxs(2) {
			t.Fatalf("GET /v1/leases: %d, %s %q; want 200 at %s", rec.Code, indexHeader, rec.Header().Get(indexHeader), gidxs(2))
		}
		body := decode(t, rec)
		if num(t, body, "index") != int64(gidx(2)) || num(t, body, "members") != 3 || len(body) != 3 {
			t.Errorf("body = %v, want index %d, members 3, leases", body, gidx(2))
		}
		leases := leasesOfBody(t, body)
		if len(leases) != len(groupNames) {
			t.Fatalf("%d leases, want %d", len(leases), len(groupNames))
		}
		for i, name := range groupNames {
			one := decode(t, do(h, http.MethodGet, "/v1/leases/"+name))
			if !maps.Equal(leases[i], one) || leases[i]["lease"] != name {
				t.Errorf("leases[%d] = %v, want GET /v1/leases/%s's %v", i, leases[i], name, one)
			}
		}
		if leases[1]["leader"] != true || leases[1]["validForMs"] != float64(7500) || leases[0]["leader"] != false {
			t.Errorf("leases = %v, want compactor leading for 7500 ms, the others not", leases)
		}
	}

	g.membership = false // an observer keeps no membership
	g.sync()
	if body := decode(t, do(g.srv.APIHandler(), http.MethodGet, "/v1/leases")); body["members"] != nil {
		t.Errorf("observer: members = %v, want null", body["members"])
	}
	if _, ok := decode(t, do(g.srv.APIHandler(), http.MethodGet, "/v1/leases"))["members"]; !ok {
		t.Error("observer: members absent, want null")
	}
}

// In group mode every endpoint that names no Lease, on both listeners,
// answers 409 lease_group, pointing at its /v1/leases/{lease}
// counterpart, at the group's index; a wrong method is still 405.
func TestUnnamedEndpointsInGroupMode(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{leading(), candidate(), candidate()})
	api, ops := g.srv.APIHandler(), g.srv.OpsHandler()
	for _, c := range []struct {
		h              http.Handler
		method, target string
		points         string
	}{
		{api, "GET", "/v1/status", "GET /v1/leases/{lease}"},
		{api, "GET", "/v1/leader", "GET /v1/leases/{lease}/leader"},
		{api, "GET", "/v1/leader?wait=10m", "GET /v1/leases/{lease}/leader"},
		{api, "GET", "/v1/token", "GET /v1/leases/{lease}/token"},
		{api, "GET", "/v1/watch", "GET /v1/leases?index="},
		{api, "GET", "/v1/watch?index=" + idxs(0) + "&wait=10m", "GET /v1/leases?index="},
		{api, "POST", "/v1/release", "POST /v1/leases/{lease}/release"},
		{api, "POST", "/v1/hold?token=1042", "POST /v1/leases/{lease}/hold"},
		{api, "GET", "/", "GET /v1/leases"},
		{ops, "GET", "/v1/status", "GET /v1/leases/{lease}"},
		{ops, "GET", "/v1/leader", "GET /v1/leases/{lease}/leader"},
	} {
		rec := do(c.h, c.method, c.target)
		raw := bytes.Clone(rec.Body.Bytes())
		wantError(t, rec, http.StatusConflict, codeLeaseGroup)
		var body struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(body.Error, c.points) || !strings.Contains(body.Error, `"scheduler", "compactor", "reporter"`) {
			t.Errorf("%s %s: error %q, want it to point at %s and name the Leases", c.method, c.target, body.Error, c.points)
		}
		if got := rec.Header().Get(indexHeader); got != gidxs(0) {
			t.Errorf("%s %s: %s = %q, want the group's %s", c.method, c.target, indexHeader, got, gidxs(0))
		}
	}
	if g.srv.watchers.Load() != 0 || g.els[0].openHolds(1042) != 0 || len(g.els[0].stayOuts()) != 0 {
		t.Error("a refused request waited, held or released")
	}
	wantError(t, do(api, http.MethodPut, "/v1/status"), http.StatusMethodNotAllowed, codeMethodNotAllowed)
	wantError(t, do(api, http.MethodGet, "/v1/release"), http.StatusMethodNotAllowed, codeMethodNotAllowed)
}

// The named routes act on the Lease they name, and on it only, with that
// Lease's index in X-Leasehold-Index; an unknown name is 404
// unknown_lease on every one of them.
func TestNamedEndpointsInGroupMode(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	lead := leading()
	lead.Token = 2001
	g.publish(1, lead) // compactor leads: idx(1)
	g.clock.SetTime(t0.Add(2500 * time.Millisecond))
	api, ops := g.srv.APIHandler(), g.srv.OpsHandler()

	for _, c := range []struct {
		h              http.Handler
		method, target string
		code           int
		lease          string // the body's (or, for token, none), and the index's Lease
		leader         bool
	}{
		{api, "GET", "/v1/leases/scheduler", 200, "scheduler", false},
		{api, "GET", "/v1/leases/compactor", 200, "compactor", true},
		{ops, "GET", "/v1/leases/reporter", 200, "reporter", false},
		{api, "GET", "/v1/leases/compactor/leader", 200, "compactor", true},
		{api, "GET", "/v1/leases/compactor/leader?wait=1m", 200, "compactor", true},
		{ops, "GET", "/v1/leases/compactor/leader", 200, "compactor", true},
		{api, "GET", "/v1/leases/scheduler/leader", 503, "scheduler", false},
		{ops, "GET", "/v1/leases/reporter/leader", 503, "reporter", false},
	} {
		rec := do(c.h, c.method, c.target)
		want := map[bool]string{true: idxs(1), false: idxs(0)}[c.leader]
		if rec.Code != c.code || rec.Header().Get(indexHeader) != want {
			t.Errorf("%s %s: %d, %s %q; want %d, %s", c.method, c.target, rec.Code, indexHeader, rec.Header().Get(indexHeader), c.code, want)
		}
		if ra := rec.Header().Get("Retry-After"); (c.code == 503) != (ra == "1") {
			t.Errorf("%s %s: Retry-After %q", c.method, c.target, ra)
		}
		body := decode(t, rec)
		if body["lease"] != c.lease || body["leader"] != c.leader {
			t.Errorf("%s %s: %v, want lease %s, leader %v", c.method, c.target, body, c.lease, c.leader)
		}
	}

	rec := do(api, http.MethodGet, "/v1/leases/compactor/token")
	if got := decode(t, rec); rec.Code != 200 || got["fencingToken"] != float64(2001) || got["validForMs"] != float64(7500) || rec.Header().Get(indexHeader) != idxs(1) {
		t.Errorf("compactor token: %d %v %q", rec.Code, got, rec.Header().Get(indexHeader))
	}
	rec = do(api, http.MethodGet, "/v1/leases/scheduler/token")
	wantError(t, rec, http.StatusServiceUnavailable, codeNotLeader)
	if rec.Header().Get(indexHeader) != idxs(0) {
		t.Errorf("scheduler token: %s %q, want %s", indexHeader, rec.Header().Get(indexHeader), idxs(0))
	}
	wantError(t, do(api, http.MethodGet, "/v1/leases/compactor/leader?wait=soon"), http.StatusBadRequest, codeBadParameter)

	// A hold and a release act on the named Lease only.
	wantError(t, do(api, http.MethodPost, "/v1/leases/scheduler/hold?token=2001"), http.StatusConflict, codeConflict)
	wantError(t, do(api, http.MethodPost, "/v1/leases/compactor/hold?token=880"), http.StatusConflict, codeConflict)
	hold := openHold(t, live(t, api)+"/v1/leases/compactor/hold?token=2001")
	if hold.code != 200 || hold.body["held"] != true || hold.body["lease"] != "compactor" || hold.header.Get(indexHeader) != idxs(1) {
		t.Errorf("hold: %d %v %q", hold.code, hold.body, hold.header.Get(indexHeader))
	}
	(&fixture{t: t, el: g.els[1], srv: g.srv}).waitHolds(2001, 1)
	hold.cancel()
	(&fixture{t: t, el: g.els[1], srv: g.srv}).waitHolds(2001, 0)

	rec = do(api, http.MethodPost, "/v1/leases/compactor/release?for=45s")
	if got := decode(t, rec); rec.Code != 200 || got["released"] != true || got["lease"] != "compactor" || got["leader"] != false {
		t.Errorf("release: %d %v", rec.Code, got)
	}
	if rec.Header().Get(indexHeader) != idxs(2) {
		t.Errorf("release: %s %q, want the Lease's new index %s", indexHeader, rec.Header().Get(indexHeader), idxs(2))
	}
	for i, want := range [][]time.Duration{nil, {45 * time.Second}, nil} {
		if got := g.els[i].stayOuts(); !slices.Equal(got, want) {
			t.Errorf("%s: stay-outs %v, want %v", groupNames[i], got, want)
		}
	}
	rec = do(api, http.MethodPost, "/v1/leases/reporter/release")
	if got := decode(t, rec); rec.Code != 200 || got["released"] != false {
		t.Errorf("release of a Lease not held: %d %v", rec.Code, got)
	}
	if got := g.els[2].stayOuts(); !slices.Equal(got, []time.Duration{leaseDuration}) {
		t.Errorf("reporter: stay-outs %v, want the lease duration", got)
	}
	g.els[0].releaseErr = errors.New("etcdserver: request timed out")
	wantError(t, do(api, http.MethodPost, "/v1/leases/scheduler/release"), http.StatusServiceUnavailable, codeReleaseFailed)
	g.els[0].releaseErr = fmt.Errorf("stopped: %w", elect.ErrStopped)
	wantError(t, do(api, http.MethodPost, "/v1/leases/scheduler/release"), http.StatusServiceUnavailable, codeShuttingDown)

	for _, c := range []struct {
		h              http.Handler
		method, target string
	}{
		{api, "GET", "/v1/leases/nope"},
		{api, "GET", "/v1/leases/Scheduler"},
		{api, "GET", "/v1/leases/nope/leader"},
		{api, "GET", "/v1/leases/nope/leader?wait=10m"},
		{api, "GET", "/v1/leases/nope/token"},
		{api, "POST", "/v1/leases/nope/release"},
		{api, "POST", "/v1/leases/nope/hold?token=1"},
		{ops, "GET", "/v1/leases/nope"},
		{ops, "GET", "/v1/leases/nope/leader"},
	} {
		rec := do(c.h, c.method, c.target)
		wantError(t, rec, http.StatusNotFound, codeUnknownLease)
		if got := rec.Header().Get(indexHeader); got != strconv.FormatUint(g.pub.Snapshot().Index, 10) {
			t.Errorf("%s %s: %s = %q, want the group's", c.method, c.target, indexHeader, got)
		}
	}
	for _, c := range []struct {
		h              http.Handler
		method, target string
		code           errorCode
	}{
		{api, "PUT", "/v1/leases/scheduler", codeMethodNotAllowed},
		{api, "GET", "/v1/leases/scheduler/release", codeMethodNotAllowed},
		{api, "POST", "/v1/leases", codeMethodNotAllowed},
		{api, "GET", "/v1/leases/scheduler/nope", codeNotFound},
		{api, "GET", "/v1/leases/", codeNotFound},
		{ops, "GET", "/v1/leases/scheduler/token", codeNotFound}, // read-only listener
		{ops, "POST", "/v1/leases/scheduler/release", codeNotFound},
	} {
		status := map[errorCode]int{codeMethodNotAllowed: 405, codeNotFound: 404}[c.code]
		wantError(t, do(c.h, c.method, c.target), status, c.code)
	}
}

// GET /v1/leases?index=N answers at once when the group's index differs
// from N, whatever N is.
func TestLeasesAnswersAtOnceWhenIndexDiffers(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	g.publish(2, leading()) // gidx(1)
	for _, target := range []string{"/v1/leases", "/v1/leases?wait=10m", "/v1/leases?index=0&wait=10m",
		"/v1/leases?index=" + gidxs(0) + "&wait=10m", "/v1/leases?index=" + gidxs(1000) + "&wait=10m",
		"/v1/leases?index=" + idxs(1) + "&wait=10m"} { // a Lease's index is not the group's
		rec := do(g.srv.APIHandler(), http.MethodGet, target)
		if got := decode(t, rec); rec.Code != http.StatusOK || num(t, got, "index") != int64(gidx(1)) || rec.Header().Get(indexHeader) != gidxs(1) {
			t.Errorf("%s: %d %v (%s %q), want 200 at %d", target, rec.Code, got, indexHeader, rec.Header().Get(indexHeader), gidx(1))
		}
	}
	for _, target := range []string{"/v1/leases?index=x", "/v1/leases?index=-1", "/v1/leases?wait=11m", "/v1/leases?wait=x", "/v1/leases?index=%zz"} {
		wantError(t, do(g.srv.APIHandler(), http.MethodGet, target), http.StatusBadRequest, codeBadParameter)
	}
}

// A blocked GET /v1/leases?index=N is woken by a change of any Lease's
// index, or of the member count, and by nothing else (a renewal, which
// moves no index, leaves it blocked); it answers with the new state.
func TestLeasesBlocksUntilGroupIndexChanges(t *testing.T) {
	for name, change := range map[string]func(g *groupFixture) *group.Snapshot{
		"a Lease's index": func(g *groupFixture) *group.Snapshot {
			next := leading()
			next.Term = g.els[2].Snapshot().Term + 1
			g.publish(2, next)
			return g.pub.Snapshot()
		},
		"the member count": func(g *groupFixture) *group.Snapshot { return g.setMembers(g.members + 1) },
	} {
		t.Run(name, func(t *testing.T) {
			g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
			for _, h := range []http.Handler{g.srv.APIHandler(), g.srv.OpsHandler()} {
				before := g.pub.Snapshot()
				answer := getRaw(t.Context(), live(t, h)+"/v1/leases?index="+strconv.FormatUint(before.Index, 10)+"&wait=10m")
				g.waitWatchers(1)

				renewal := candidate()
				renewal.RenewedAt = t0 // same holder, term, token: no index moves
				g.publish(0, renewal)
				if g.pub.Snapshot().Index != before.Index {
					t.Fatal("a renewal moved the group's index")
				}
				select {
				case <-before.Changed():
					t.Fatal("a renewal closed the group's Changed")
				default:
				}
				changed := change(g)

				o := receiveRaw(t, answer)
				if o.code != http.StatusOK || o.header.Get(indexHeader) != strconv.FormatUint(changed.Index, 10) {
					t.Fatalf("answer %d %s %q, want 200 at %d", o.code, indexHeader, o.header.Get(indexHeader), changed.Index)
				}
				var body Leases
				if err := json.Unmarshal(o.body, &body); err != nil {
					t.Fatal(err)
				}
				if body.Index != changed.Index || len(body.Leases) != 3 || body.Members == nil || *body.Members != changed.Members ||
					body.Leases[2].Index != changed.Leases[2].Index {
					t.Errorf("answer %s, want the group at %d", o.body, changed.Index)
				}
				g.waitWatchers(0)
			}
		})
	}
}

// A blocked GET /v1/leases whose wait ends answers 200 with the same
// state.
func TestLeasesAnswersSameIndexWhenWaitEnds(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	o := receiveRaw(t, getRaw(t.Context(), live(t, g.srv.APIHandler())+"/v1/leases?index="+gidxs(0)+"&wait=50ms"))
	if o.code != http.StatusOK || o.header.Get(indexHeader) != gidxs(0) || !strings.Contains(string(o.body), `"index":`+gidxs(0)) {
		t.Errorf("answer %d %q %s, want 200 at %s", o.code, o.header.Get(indexHeader), o.body, gidxs(0))
	}
	g.waitWatchers(0)
}

// GET /v1/leases/{lease}/leader?wait= blocks until this instance leads
// that Lease: another Lease's leadership does not answer it.
func TestNamedLeaderWait(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	answer := get(t.Context(), live(t, g.srv.APIHandler())+"/v1/leases/reporter/leader?wait=10m")
	g.waitWatchers(1)
	g.publish(0, leading()) // scheduler: not the one waited for
	g.publish(2, leading())
	r := receive(t, answer)
	if r.code != http.StatusOK || r.body["lease"] != "reporter" || r.body["leader"] != true || r.header.Get(indexHeader) != idxs(1) {
		t.Errorf("answer %d %v %q, want 200 with reporter leading at %s", r.code, r.body, r.header.Get(indexHeader), idxs(1))
	}
	g.waitWatchers(0)
}

// EndBlockingRequests ends GET /v1/leases long-polls and named leader
// waits as it ends /v1/watch and /v1/leader: 503 shutting_down for those
// that would wait, the state for those whose client has not seen it.
func TestLeasesEndBlockingRequests(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	url := live(t, g.srv.APIHandler())
	poll := getRaw(t.Context(), url+"/v1/leases?index="+gidxs(0)+"&wait=10m")
	wait := getRaw(t.Context(), url+"/v1/leases/compactor/leader?wait=10m")
	g.waitWatchers(2)
	g.srv.EndBlockingRequests()
	for _, o := range []observed{receiveRaw(t, poll), receiveRaw(t, wait)} {
		wantShuttingDown(t, o)
	}
	g.waitWatchers(0)

	wantShuttingDown(t, recorded("GET", "/v1/leases", do(g.srv.APIHandler(), "GET", "/v1/leases?index="+gidxs(0))))
	wantShuttingDown(t, recorded("GET", "/v1/leases", do(g.srv.APIHandler(), "GET", "/v1/leases", "Accept", "text/event-stream", "Last-Event-ID", gidxs(0))))
	if rec := do(g.srv.APIHandler(), "GET", "/v1/leases?index=7"); rec.Code != http.StatusOK {
		t.Errorf("unseen state after the end: %d, want 200", rec.Code)
	}
	rec := do(g.srv.APIHandler(), "GET", "/v1/leases", "Accept", "text/event-stream") // unseen: one event, then the end
	if want := "retry: 1000\n\nid: " + gidxs(0) + "\nevent: leases\ndata: "; rec.Code != http.StatusOK || !strings.HasPrefix(rec.Body.String(), want) ||
		strings.Count(rec.Body.String(), "event:") != 1 {
		t.Errorf("SSE after the end: %d %q, want one leases event", rec.Code, rec.Body)
	}
}

// wantLeasesEvent checks that fr is a leases event for the group's index,
// and returns its data.
func wantLeasesEvent(t *testing.T, fr frame, ok bool, index uint64) Leases {
	t.Helper()
	if !ok {
		t.Fatalf("stream ended, want the event for index %d", index)
	}
	if fr.id != strconv.FormatUint(index, 10) || fr.event != "leases" || fr.comment != "" {
		t.Fatalf("frame = %+v, want id %d, event leases", fr, index)
	}
	var data Leases
	dec := json.NewDecoder(strings.NewReader(fr.data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&data); err != nil {
		t.Fatalf("data %q: %v", fr.data, err)
	}
	if data.Index != index {
		t.Errorf("data index = %d, want %d", data.Index, index)
	}
	return data
}

// GET /v1/leases with Accept: text/event-stream streams the group: retry
// first, then the current state, then one leases event per change of the
// group's index, whose data is exactly the long-poll's body.
func TestLeasesEventStream(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	url := live(t, g.srv.APIHandler())
	resp, frames := openStream(t, url+"/v1/leases")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.Header.Get(indexHeader) != gidxs(0) {
		t.Errorf("Content-Type %q, %s %q", ct, indexHeader, resp.Header.Get(indexHeader))
	}
	fr, ok := next(t, frames)
	if data := wantLeasesEvent(t, fr, ok, gidx(0)); len(data.Leases) != 3 || *data.Members != 2 {
		t.Errorf("initial event = %+v", data)
	}
	if want := do(g.srv.APIHandler(), "GET", "/v1/leases").Body.String(); fr.data+"\n" != want {
		t.Errorf("event data %s, want the long-poll's body %s", fr.data, want)
	}
	g.waitWatchers(1)

	g.publish(1, leading())
	fr, ok = next(t, frames)
	if data := wantLeasesEvent(t, fr, ok, gidx(1)); !data.Leases[1].Leader || data.Leases[1].Lease != "compactor" {
		t.Errorf("change event = %+v", data)
	}
	g.setMembers(4)
	fr, ok = next(t, frames)
	if data := wantLeasesEvent(t, fr, ok, gidx(2)); *data.Members != 4 {
		t.Errorf("members event = %+v", data)
	}

	// A client that has seen the current state (Last-Event-ID, which wins
	// over index, or else index) gets only the next change.
	for i, byID := range []bool{true, false} {
		seenIndex := g.pub.Snapshot().Index
		target, header := "/v1/leases?index="+strconv.FormatUint(seenIndex, 10), []string(nil)
		if byID {
			target, header = "/v1/leases?index="+gidxs(0), []string{"Last-Event-ID", strconv.FormatUint(seenIndex, 10)}
		}
		seenResp, seen := openStream(t, url+target, header...)
		g.waitWatchers(2)
		g.publish(0, map[bool]elect.Snapshot{true: leading(), false: candidate()}[i == 0])
		want := g.pub.Snapshot().Index
		fr, ok := next(t, seen)
		wantLeasesEvent(t, fr, ok, want)
		fr, ok = next(t, frames)
		wantLeasesEvent(t, fr, ok, want)
		seenResp.Body.Close()
		g.waitWatchers(1)
	}
}

// SSE heartbeats on GET /v1/leases are comment lines, as on /v1/watch.
func TestLeasesEventStreamHeartbeat(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	g.srv.heartbeat = 10 * time.Millisecond
	_, frames := openStream(t, live(t, g.srv.APIHandler())+"/v1/leases", "Last-Event-ID", gidxs(0))
	if fr, ok := next(t, frames); !ok || fr != (frame{comment: "heartbeat"}) {
		t.Errorf("first frame = %+v, %v; want a heartbeat comment only", fr, ok)
	}
}

// A step-down is answered at once by GET /v1/leases and by the per-Lease
// gauges, even before the group has published it: leadership is read from
// each election's latest Snapshot, never from the group's copy of it.
func TestLeasesNeverAnswerFromTheGroupsOlderCopy(t *testing.T) {
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	g.publish(1, leading()) // the group's copy says compactor leads
	g.els[1].Publish(named(groupNames[1], candidate()))
	// The election has stepped down; the group has not published that yet.
	leases := leasesOfBody(t, decode(t, do(g.srv.APIHandler(), http.MethodGet, "/v1/leases")))
	if leases[1]["leader"] != false {
		t.Errorf("GET /v1/leases says compactor leads after its election stepped down: %v", leases[1])
	}
	if got := (&fixture{t: t, reg: g.reg}).gauges()["leasehold_leader"]["lease=compactor"]; got != 0 {
		t.Errorf("leasehold_leader{lease=compactor} = %v after the step-down, want 0", got)
	}
}
