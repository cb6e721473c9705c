package httpapi

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/group"
)

// groupNames are the Leases of the group fixtures, in configured order.
var groupNames = []string{"scheduler", "compactor", "reporter"}

// firstGroupIndex is the Index of every group fixture's first group
// Snapshot: far from each election's (firstIndex), so that a test tells
// the group's Index from a Lease's.
var firstGroupIndex = firstIndex + 1_000_000

// gidx is the group's Index after n changes, and gidxs the same as a
// string.
func gidx(n uint64) uint64 { return firstGroupIndex + n }

func gidxs(n uint64) string { return strconv.FormatUint(gidx(n), 10) }

// named is s for the Lease name.
func named(name string, s elect.Snapshot) elect.Snapshot {
	s.Lease = name
	return s
}

// groupFixture serves a lease group of fakeElections, one per groupNames,
// whose group Snapshots the test publishes by hand through a
// group.Publisher, as the group's loop does.
type groupFixture struct {
	t          *testing.T
	clock      *clocktesting.FakePassiveClock
	els        []*fakeElection // in configured order
	pub        *group.Publisher
	members    int
	membership bool
	reg        *prometheus.Registry
	srv        *Server
}

// newGroupFixture serves a group of len(groupNames) elections whose first
// states are firsts (named after groupNames; each at Index firstIndex),
// with 2 members, at group Index firstGroupIndex.
func newGroupFixture(t *testing.T, firsts []elect.Snapshot, opts ...fixtureOption) *groupFixture {
	t.Helper()
	if len(firsts) != len(groupNames) {
		t.Fatalf("%d first states for %d Leases", len(firsts), len(groupNames))
	}
	g := &groupFixture{
		t:          t,
		clock:      clocktesting.NewFakePassiveClock(t0),
		members:    2,
		membership: true,
		reg:        prometheus.NewRegistry(),
	}
	var elections []Election
	for i, first := range firsts {
		first = named(groupNames[i], first)
		first.Index = firstIndex
		el := newFakeElection(first)
		g.els = append(g.els, el)
		elections = append(elections, el)
	}
	first := g.state()
	first.Index = firstGroupIndex
	g.pub = group.NewPublisher(first)
	o := Options{Group: g.pub, Elections: elections, Clock: g.clock, LeaseDuration: leaseDuration, Registry: g.reg, Version: "v1.2.3"}
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	g.srv = srv
	return g
}

// state is the group's state made of the elections' latest Snapshots.
func (g *groupFixture) state() group.Snapshot {
	s := group.Snapshot{Name: "workers", Members: g.members, Membership: g.membership}
	for _, el := range g.els {
		s.Leases = append(s.Leases, el.Snapshot())
	}
	return s
}

// sync publishes the group's state made of the elections' latest
// Snapshots, and returns it (with its Index).
func (g *groupFixture) sync() *group.Snapshot {
	g.pub.Publish(g.state())
	return g.pub.Snapshot()
}

// publish publishes s (named after Lease i) on election i, then the
// group's state; it returns the election's stored Snapshot.
func (g *groupFixture) publish(i int, s elect.Snapshot) *elect.Snapshot {
	snap := g.els[i].Publish(named(groupNames[i], s))
	g.sync()
	return snap
}

// setMembers publishes the group's state with n members.
func (g *groupFixture) setMembers(n int) *group.Snapshot {
	g.members = n
	return g.sync()
}

// waitWatchers waits until n blocking requests are open.
func (g *groupFixture) waitWatchers(n int64) {
	g.t.Helper()
	(&fixture{t: g.t, srv: g.srv}).waitWatchers(n)
}
