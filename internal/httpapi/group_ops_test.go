package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/pkg/api"
)

// errorMessage is the error message of an error answer's body.
func errorMessage(t *testing.T, body []byte) string {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return e.Message
}

// In group mode /livez fails as soon as one election's loop has made no
// progress for 2 × LeaseDuration, naming its Lease, and passes again once
// it beats.
func TestLivezCoversTheGroup(t *testing.T) {
	beat := func(at time.Time) elect.Snapshot {
		s := candidate()
		s.Heartbeat = at
		return s
	}
	g := newGroupFixture(t, []elect.Snapshot{beat(t0), beat(t0), beat(t0)})
	ops := g.srv.OpsHandler()
	g.clock.SetTime(t0.Add(2 * leaseDuration))
	if rec := do(ops, http.MethodGet, "/livez"); rec.Code != http.StatusOK {
		t.Errorf("every loop within the limit: code %d, want 200", rec.Code)
	}
	g.publish(0, beat(g.clock.Now()))
	g.publish(2, beat(g.clock.Now()))
	g.clock.SetTime(t0.Add(2*leaseDuration + time.Millisecond)) // compactor's loop stalled
	rec := do(ops, http.MethodGet, "/livez")
	raw := bytes.Clone(rec.Body.Bytes())
	wantError(t, rec, http.StatusServiceUnavailable, codeElectionStalled)
	if msg := errorMessage(t, raw); !strings.Contains(msg, `Lease "compactor"`) {
		t.Errorf("message %q, want it to name compactor", msg)
	}
	g.publish(1, beat(g.clock.Now()))
	if rec := do(ops, http.MethodGet, "/livez"); rec.Code != http.StatusOK {
		t.Errorf("after compactor's heartbeat: code %d, want 200", rec.Code)
	}
}

// In group mode /readyz passes once every Lease has been observed or
// acquired, names those that have not, and fails from BeginShutdown on.
func TestReadyzCoversTheGroup(t *testing.T) {
	unobserved := elect.Snapshot{Identity: identity, Namespace: "shop", Heartbeat: t0}
	g := newGroupFixture(t, []elect.Snapshot{candidate(), unobserved, unobserved})
	ops := g.srv.OpsHandler()
	rec := do(ops, http.MethodGet, "/readyz")
	raw := bytes.Clone(rec.Body.Bytes())
	loadSpec(t).checkResponse(t, recorded(http.MethodGet, "/readyz", rec))
	wantError(t, rec, http.StatusServiceUnavailable, codeNotReady)
	if msg := errorMessage(t, raw); !strings.Contains(msg, `2 of 3 Leases`) || !strings.Contains(msg, `"compactor", "reporter"`) {
		t.Errorf("message %q, want it to name compactor and reporter", msg)
	}
	g.publish(1, candidate())
	wantError(t, do(ops, http.MethodGet, "/readyz"), http.StatusServiceUnavailable, codeNotReady)
	g.publish(2, leading()) // acquired counts as observed
	if rec := do(ops, http.MethodGet, "/readyz"); rec.Code != http.StatusOK {
		t.Errorf("every Lease observed: code %d, want 200", rec.Code)
	}
	g.srv.BeginShutdown()
	wantError(t, do(ops, http.MethodGet, "/readyz"), http.StatusServiceUnavailable, codeShuttingDown)
}

// In group mode the election gauges have one series per Lease (labelled
// lease; leader_election_master_status labelled name), read from one group
// Snapshot; the process's gauges have one series each. The sidecar's
// Registerer may add constant labels other than lease.
func TestMetricsInGroupMode(t *testing.T) {
	shop := prometheus.Labels{"namespace": "shop"}
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()},
		func(o *Options) { o.Registerer = prometheus.WrapRegistererWith(shop, o.Registry) })
	lead := leading()
	lead.Token = 2001
	g.publish(1, lead)
	g.clock.SetTime(t0.Add(2500 * time.Millisecond))
	f := &fixture{t: t, reg: g.reg}
	got := f.gauges()
	per := func(label string, s, c, r float64) map[string]float64 {
		return map[string]float64{
			label + "=scheduler,namespace=shop": s, label + "=compactor,namespace=shop": c, label + "=reporter,namespace=shop": r,
		}
	}
	for name, want := range map[string]map[string]float64{
		"leasehold_leader":              per("lease", 0, 1, 0),
		"leasehold_candidate":           per("lease", 1, 1, 1),
		"leasehold_term":                per("lease", 4, 5, 4),
		"leasehold_fencing_token":       per("lease", 880, 2001, 880),
		"leasehold_valid_seconds":       per("lease", 0, 7.5, 0),
		"leader_election_master_status": per("name", 0, 1, 0),
		"leasehold_watchers":            {"namespace=shop": 0},
		"leasehold_holds":               {"namespace=shop": 0},
		"leasehold_build_info":          {"goversion=" + runtime.Version() + ",namespace=shop,version=v1.2.3": 1},
	} {
		if len(got[name]) != len(want) {
			t.Errorf("%s = %v, want %v", name, got[name], want)
			continue
		}
		for l, v := range want {
			if g, ok := got[name][l]; !ok || g != v {
				t.Errorf("%s{%s} = %v (present %v), want %v", name, l, g, ok, v)
			}
		}
	}
	if len(got) != 10 {
		t.Errorf("gathered %d families, want the HTTP layer's 10", len(got))
	}

	// A constant lease label would clash with the per-Lease one.
	lease := prometheus.Labels{"lease": "workers"}
	el := newFakeElection(named("a", candidate()))
	_, err := New(Options{Group: group.Single{Election: el}, Elections: []Election{el}, LeaseDuration: time.Second,
		Registry: prometheus.NewRegistry(), Registerer: prometheus.WrapRegistererWith(lease, prometheus.NewRegistry())})
	if err == nil {
		t.Error("New accepted a Registerer with a constant lease label in group mode")
	}
}

// New checks the group options: Group needs its Elections, Elections need
// Group, and the Elections are the group's Leases, distinct, in order.
func TestNewChecksGroupOptions(t *testing.T) {
	els := func(names ...string) []Election {
		var out []Election
		for _, n := range names {
			out = append(out, newFakeElection(named(n, candidate())))
		}
		return out
	}
	pub := func(names ...string) *group.Publisher {
		var s group.Snapshot
		for _, n := range names {
			snap := named(n, candidate())
			s.Leases = append(s.Leases, &snap)
		}
		return group.NewPublisher(s)
	}
	single := newFakeElection(candidate())
	for name, c := range map[string]struct {
		opts Options
		ok   bool
	}{
		"a group":                    {Options{Group: pub("a", "b"), Elections: els("a", "b")}, true},
		"a group and an Election":    {Options{Group: pub("a", "b"), Elections: els("a", "b"), Election: single}, true},
		"a group without Elections":  {Options{Group: pub("a", "b")}, false},
		"Elections without a group":  {Options{Election: single, Elections: els("orders-leader")}, false},
		"Elections in another order": {Options{Group: pub("a", "b"), Elections: els("b", "a")}, false},
		"fewer Elections":            {Options{Group: pub("a", "b"), Elections: els("a")}, false},
		"more Elections":             {Options{Group: pub("a"), Elections: els("a", "b")}, false},
		"two Elections of one Lease": {Options{Group: pub("a", "a"), Elections: els("a", "a")}, false},
		"a nil Election":             {Options{Group: pub("a"), Elections: []Election{nil}}, false},
		"neither Election nor Group": {Options{}, false},
	} {
		c.opts.Registry, c.opts.LeaseDuration = prometheus.NewRegistry(), time.Second
		if _, err := New(c.opts); (err == nil) != c.ok {
			t.Errorf("%s: New error %v, want ok %v", name, err, c.ok)
		}
	}
}
