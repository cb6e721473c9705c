package group_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/group"
	groupmember "github.com/leasehold/leasehold/internal/group/member"
	"github.com/leasehold/leasehold/internal/kubeclient"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

var cluster *kubetest.Cluster

// TestMain runs the tests against one real apiserver, then checks that no
// goroutine of a group outlived it.
func TestMain(m *testing.M) {
	os.Exit(kubetest.LeakCheck(kubetest.Main(m, &cluster)))
}

const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// generous bounds real-time waits on a shared, noisy machine; it never
	// decides an outcome.
	generous = 30 * time.Second
)

// eventually polls cond every 10ms until it holds, failing t after generous
// with report's account of the last state cond saw (nil: none).
func eventually(t *testing.T, what string, cond func() bool, report func() string) {
	t.Helper()
	poll.UntilReport(t, generous, 10*time.Millisecond, what, cond, report)
}

type fixture struct {
	t         *testing.T
	namespace string
	client    group.LeaseClient
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ns, err := kubetest.Require(t, cluster).CreateNamespace(t.Context(), "group")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, namespace: ns, client: cluster.Clientset().CoordinationV1().Leases(ns)}
}

func shardNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("orders-%d", i)
	}
	return names
}

// member is one running group instance.
type member struct {
	*group.Group
	id     string
	cancel context.CancelFunc
	err    chan error
	cut    func() // every request of its client fails from now on
}

// cuttable is a Lease client whose requests all fail once cut: a process
// that crashed writes nothing more.
type cuttable struct {
	group.LeaseClient
	cut atomic.Bool
}

var errCut = errors.New("cut off")

func (c *cuttable) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.LeaseClient.Get(ctx, name, opts)
}

func (c *cuttable) Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.LeaseClient.Create(ctx, l, opts)
}

func (c *cuttable) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.LeaseClient.Update(ctx, l, opts)
}

func (c *cuttable) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if c.cut.Load() {
		return errCut
	}
	return c.LeaseClient.Delete(ctx, name, opts)
}

func (f *fixture) start(id string, leases []string, configure ...func(*group.Config)) *member {
	f.t.Helper()
	real, err := kubeclient.NewLeaseClient(rest.CopyConfig(cluster.Admin().Config), f.namespace)
	if err != nil {
		f.t.Fatal(err)
	}
	client := &cuttable{LeaseClient: real}
	cfg := group.Config{
		Name:   "orders",
		Leases: leases,
		Election: decide.Config{
			Namespace: f.namespace, Identity: id,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnStop: true,
		},
		Candidate: true,
		Balance:   true,
		Client:    client,
	}
	for _, c := range configure {
		c(&cfg)
	}
	g, err := group.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{Group: g, id: id, cancel: cancel, err: make(chan error, 1), cut: func() { client.cut.Store(true) }}
	go func() { m.err <- g.Run(ctx) }()
	f.t.Cleanup(func() { m.stop(f.t) })
	return m
}

func (m *member) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	select {
	case err := <-m.err:
		if err != nil {
			t.Errorf("%s: Run: %v", m.id, err)
		}
		m.err <- nil
	case <-time.After(generous):
		t.Fatalf("%s: Run did not return after cancel", m.id)
	}
}

// leases are the latest snapshots of m's elections, in configured order
// (the group's own snapshot follows them a moment later).
func (m *member) leases() []*elect.Snapshot {
	var out []*elect.Snapshot
	for _, e := range m.Elections() {
		out = append(out, e.Snapshot())
	}
	return out
}

// held counts the Leases m leads validly now.
func (m *member) held() int {
	n, now := 0, time.Now()
	for _, e := range m.Elections() {
		if e.Snapshot().IsLeader(now) {
			n++
		}
	}
	return n
}

// waitHeld waits until each member holds the count given, and checks at
// every sample that no Lease has two valid leaders among them.
func waitHeld(t *testing.T, members []*member, want []int) {
	t.Helper()
	waitUntil(t, members, fmt.Sprint(want), func(got []int) bool { return slices.Equal(got, want) })
}

// waitFair waits until the members hold all n Leases, each ⌊n/M⌋ or
// ⌈n/M⌉ of them.
func waitFair(t *testing.T, members []*member, n int) {
	t.Helper()
	lo, hi := n/len(members), (n+len(members)-1)/len(members)
	waitUntil(t, members, fmt.Sprintf("%d or %d each, %d in all", lo, hi, n), func(got []int) bool {
		sum := 0
		for _, c := range got {
			if c < lo || c > hi {
				return false
			}
			sum += c
		}
		return sum == n
	})
}

// waitUntil waits until the members' counts of Leases held satisfy ok,
// checking at every sample that no Lease has two valid leaders among them.
func waitUntil(t *testing.T, members []*member, want string, ok func(held []int) bool) {
	t.Helper()
	var got []int
	eventually(t, "held "+want, func() bool {
		checkOneLeader(t, members)
		got = make([]int, len(members))
		for i, m := range members {
			got[i] = m.held()
		}
		return ok(got)
	}, func() string { return fmt.Sprintf("held %v", got) })
}

func checkOneLeader(t *testing.T, members []*member) {
	t.Helper()
	now := time.Now()
	leaders := map[string][]string{}
	for _, m := range members {
		for _, s := range m.leases() {
			if s.IsLeader(now) {
				leaders[s.Lease] = append(leaders[s.Lease], m.id)
			}
		}
	}
	for lease, ids := range leaders {
		if len(ids) > 1 {
			t.Fatalf("Lease %s has two valid leaders: %v", lease, ids)
		}
	}
}

// moveCounter counts, from a watch on the namespace's Leases, how often a
// shard's holder changed from one identity to another (a release in
// between does not count twice).
type moveCounter struct {
	mu    sync.Mutex
	last  map[string]string
	moves int
	stop  func()
	done  chan struct{}
}

func (f *fixture) countMoves() *moveCounter {
	f.t.Helper()
	w, err := f.client.Watch(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	c := &moveCounter{last: map[string]string{}, stop: w.Stop, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type == watch.Deleted || strings.Contains(l.Name, "-member-") || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				continue
			}
			c.mu.Lock()
			if prev, ok := c.last[l.Name]; ok && prev != *l.Spec.HolderIdentity {
				c.moves++
			}
			c.last[l.Name] = *l.Spec.HolderIdentity
			c.mu.Unlock()
		}
	}()
	f.t.Cleanup(func() { c.stop(); <-c.done })
	return c
}

// settled waits until the counter's watch has delivered every holder the
// members' snapshots report, then returns the moves counted. The members see
// a write as soon as its response arrives; the counter's own watch may lag
// behind that, so counting without catching up first would miss the last
// moves.
func (c *moveCounter) settled(t *testing.T, members []*member) int {
	t.Helper()
	var want map[string]string
	var moves int
	eventually(t, "the move counter's watch caught up with the holders", func() bool {
		now := time.Now()
		want = map[string]string{}
		for _, m := range members {
			for _, s := range m.leases() {
				if s.IsLeader(now) {
					want[s.Lease] = m.id
				}
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		caughtUp := true
		for lease, holder := range want {
			caughtUp = caughtUp && c.last[lease] == holder
		}
		moves = c.moves
		return caughtUp
	}, func() string { return fmt.Sprintf("holders %v", want) })
	return moves
}

// TestScaleUpMovesTheFewestLeases: one member holds all 16 shards; three
// join at once; each ends with 4, and exactly 12 shards changed hands.
// Then one leaves gracefully: its shards are re-held by the others, 6/5/5
// (⌊16/3⌋ or ⌈16/3⌉), and nothing else moves.
func TestScaleUpMovesTheFewestLeases(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(16)
	moves := f.countMoves()
	registry := prometheus.NewRegistry()
	a := f.start("a", leases, func(c *group.Config) { c.Registerer = registry })
	waitHeld(t, []*member{a}, []int{16})
	if got := moves.settled(t, []*member{a}); got != 0 {
		t.Fatalf("%d moves before the scale-up", got)
	}

	b, c, d := f.start("b", leases), f.start("c", leases), f.start("d", leases)
	all := []*member{a, b, c, d}
	waitHeld(t, all, []int{4, 4, 4, 4})
	for _, m := range all {
		if got := m.Snapshot().Members; got != 4 {
			t.Errorf("%s sees %d members, want 4", m.id, got)
		}
	}
	if got := moves.settled(t, all); got != 12 {
		t.Errorf("scale-up 1 → 4 moved %d shards, want exactly 12", got)
	}
	for name, want := range map[string]float64{
		"leasehold_members": 4, `leasehold_lease_moves_total{direction="in"}`: 16, `leasehold_lease_moves_total{direction="out"}`: 12,
	} {
		if got := gathered(t, registry, name); got != want {
			t.Errorf("a's %s = %v, want %v", name, got, want)
		}
	}

	stopped := time.Now()
	d.stop(t)
	remaining := []*member{a, b, c}
	waitFair(t, remaining, 16)
	t.Logf("d's shards re-held %v after it was asked to stop", time.Since(stopped))
	if got := moves.settled(t, remaining); got != 16 {
		t.Errorf("after d left, %d moves in all, want 16 (12 + d's 4)", got)
	}
}

// TestObserverFollowsWithoutCampaigning: an observer reports every Lease's
// holder and token, never holds one, and is not a member.
func TestObserverFollowsWithoutCampaigning(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(3)
	a := f.start("a", leases)
	obs := f.start("observer", leases, func(c *group.Config) { c.Candidate = false })
	waitHeld(t, []*member{a, obs}, []int{3, 0})
	var snap *group.Snapshot
	eventually(t, "the observer following a's holds and tokens", func() bool {
		snap = obs.Snapshot()
		ok := true
		for i, s := range snap.Leases {
			ok = ok && s.Holder == "a" && s.Token == a.leases()[i].Token && !s.Candidate
		}
		return ok
	}, func() string { return fmt.Sprintf("observer's view: %+v", snap.Leases[0]) })
	if got := a.Snapshot().Members; got != 1 {
		t.Errorf("a sees %d members, want 1 (the observer is not one)", got)
	}
	if obs.Snapshot().Membership {
		t.Error("the observer reports a membership")
	}
	if _, err := f.client.Get(t.Context(), group.MemberLeaseName("orders", "observer"), metav1.GetOptions{}); err == nil {
		t.Error("the observer wrote a member Lease")
	}
}

// TestGreedyTakesEverything: with Balance false, the first member keeps
// every Lease even when others join (client-go's behaviour).
func TestGreedyTakesEverything(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(4)
	greedy := func(c *group.Config) { c.Balance = false }
	a := f.start("a", leases, greedy)
	waitHeld(t, []*member{a}, []int{4})
	b := f.start("b", leases, greedy)
	// The chance to hand Leases over: a sees b join, and the membership
	// settles (a balancing member then withdraws from Leases at once, which
	// releases them). The event that shows it did not: b has observed a
	// renewal of every Lease by a written a retry period after that.
	waitUntil(t, []*member{a}, "a sees b join", func([]int) bool { return a.Snapshot().Members == 2 })
	settled := time.Now().Add(2*retryPeriod + retryPeriod) // the settle time (Config), and a plan's round trip
	waitUntil(t, []*member{a, b}, "b sees every Lease renewed by a after the membership settled", func([]int) bool {
		if b.held() != 0 {
			t.Fatalf("b took a Lease from a greedy holder")
		}
		for _, s := range b.leases() {
			if s.Holder != "a" || !s.RenewedAt.After(settled) {
				return false
			}
		}
		return true
	})
	if got := a.held(); got != 4 {
		t.Errorf("a holds %d Leases, want all 4", got)
	}
	if b.Snapshot().Members != 2 {
		t.Errorf("b sees %d members, want 2", b.Snapshot().Members)
	}
}

// TestReleaseWithStayOutHandsTheLeaseOver: a member that releases a Lease
// for a while declines it on its member Lease; another member takes it at
// once, the group settles fairly around the decline (the other member
// hands one of its own Leases over), and the declined Lease does not come
// back to its decliner during the stay-out.
//
// The stay-out is read from the Leases, in the order etcd wrote them (one
// admin watch): the decliner's member Lease with the decline, then without
// it (the stay-out over, no earlier than stayOut after the release); no
// write between the release and that lift names the decliner holder of
// the declined Lease.
func TestReleaseWithStayOutHandsTheLeaseOver(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(4)
	a, b := f.start("a", leases), f.start("b", leases)
	waitHeld(t, []*member{a, b}, []int{2, 2})
	var mine group.Election
	for _, e := range a.Elections() {
		if e.Snapshot().IsLeader(time.Now()) {
			mine = e
			break
		}
	}
	// The writes from now on (a's renewals of the Lease it is about to
	// release included).
	list, err := f.client.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := f.client.Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	released := time.Now()
	stayOut := 4 * leaseDuration
	if ok, err := mine.Release(t.Context(), stayOut); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	declined := mine.Snapshot().Lease
	waitUntil(t, []*member{a, b}, "b holding "+declined+", 2 each", func(held []int) bool {
		return b.Elections()[slices.IndexFunc(b.leases(), func(s *elect.Snapshot) bool { return s.Lease == declined })].Snapshot().IsLeader(time.Now()) && slices.Equal(held, []int{2, 2})
	})
	t.Logf("b holds the declined Lease %s and the group is fair again %v after the release", declined, time.Since(released))

	own := group.MemberLeaseName("orders", "a")
	declines := func(l *coordinationv1.Lease) bool {
		var until map[string]string
		_ = json.Unmarshal([]byte(l.Annotations[groupmember.DeclinedAnnotation]), &until) // none or malformed: no decline
		_, ok := until[declined]
		return ok
	}
	limit := stayOut + generous
	deadline := time.After(limit)
	sample := time.NewTicker(10 * time.Millisecond)
	defer sample.Stop()
	for gone, written := false, false; ; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the admin watch of the Leases closed")
			}
			l, isLease := ev.Object.(*coordinationv1.Lease)
			if !isLease || ev.Type == watch.Deleted {
				continue
			}
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			switch {
			case l.Name == declined && holder != "a":
				gone = true // a's release, or b's term
			case l.Name == declined && gone:
				t.Fatalf("a wrote itself holder of %s %v after declining it for %v, before it lifted the decline", declined, time.Since(released), stayOut)
			case l.Name == own && declines(l):
				written = true
			case l.Name == own && written:
				if took := time.Since(released); took < stayOut {
					t.Errorf("a lifted its decline of %s %v after the release; want the whole stay-out, %v", declined, took, stayOut)
				} else {
					t.Logf("a lifted its decline of %s %v after the release (stay-out %v)", declined, took, stayOut)
				}
				waitFair(t, []*member{a, b}, 4)
				return
			}
		case <-sample.C:
			checkOneLeader(t, []*member{a, b})
		case <-deadline:
			t.Fatalf("a's member Lease did not show the decline of %s and then lift it within %v of the release", declined, limit)
		}
	}
}

// gathered is the value of the series name (with its labels, as
// name{k="v"}) in registry, -1 when absent.
func gathered(t *testing.T, registry *prometheus.Registry, series string) float64 {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			id := f.GetName()
			if len(m.GetLabel()) > 0 {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				id += "{" + strings.Join(labels, ",") + "}"
			}
			if id != series {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
