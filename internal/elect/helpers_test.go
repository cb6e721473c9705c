package elect_test

import (
	"context"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/kubeclient"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

var cluster *kubetest.Cluster

// TestMain runs the tests against one real apiserver, then checks that no
// goroutine of the election outlived its Elector: every Run, watcher and
// timer has a visible end. Connections that client-go's shared transports
// keep alive are not the election's and are ignored.
func TestMain(m *testing.M) {
	os.Exit(kubetest.LeakCheck(kubetest.Main(m, &cluster)))
}

// Timings for most tests: short, and within every rule
// (renewDeadline + retryPeriod < leaseDuration, renewDeadline > 1.2 × retryPeriod).
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	leaseName     = "leader"
)

// generous bounds real-time waits on a shared, noisy machine; it never
// decides an outcome that a tighter bound is asserted for.
const generous = 20 * time.Second

type fixture struct {
	t         *testing.T
	namespace string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ns, err := kubetest.Require(t, cluster).CreateNamespace(t.Context(), "elect")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, namespace: ns}
}

func (f *fixture) adminLeases() interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
} {
	return cluster.Clientset().CoordinationV1().Leases(f.namespace)
}

// candidate is one running Elector with its own request counters.
type candidate struct {
	*elect.Elector
	requests *kubeclient.RequestMetrics
	cancel   context.CancelFunc
	err      chan error
}

type option func(*elect.Config, **rest.Config)

func withTimings(lease, renew, retry time.Duration) option {
	return func(c *elect.Config, _ **rest.Config) {
		c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = lease, renew, retry
	}
}

func withdrawn() option {
	return func(c *elect.Config, _ **rest.Config) { c.StartWithdrawn = true }
}

func withoutRelease() option {
	return func(c *elect.Config, _ **rest.Config) { c.ReleaseOnStop = false }
}

func withUser(u *kubetest.User) option {
	return func(_ *elect.Config, rc **rest.Config) { *rc = rest.CopyConfig(u.Config) }
}

// start runs a candidate named identity until the test ends (or stop).
func (f *fixture) start(identity string, opts ...option) *candidate {
	f.t.Helper()
	rc := rest.CopyConfig(cluster.Admin().Config)
	cfg := elect.Config{Config: decide.Config{
		Namespace: f.namespace, Name: leaseName, Identity: identity,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		ReleaseOnStop: true,
	}}
	for _, o := range opts {
		o(&cfg, &rc)
	}
	c := &candidate{requests: kubeclient.NewRequestMetrics(nil), err: make(chan error, 1)}
	rc.Wrap(c.requests.Wrap)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		f.t.Fatal(err)
	}
	cfg.Leases = cs.CoordinationV1().Leases(cfg.Namespace)
	cfg.Metrics = elect.NewMetrics(nil)
	if c.Elector, err = elect.New(cfg); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.err <- c.Run(ctx) }()
	f.t.Cleanup(func() { c.stop(f.t) })
	return c
}

// stop cancels the candidate and waits for Run to return (release included).
func (c *candidate) stop(t *testing.T) {
	t.Helper()
	c.cancel()
	select {
	case err := <-c.err:
		if err != nil {
			t.Errorf("%s: Run: %v", c.Snapshot().Identity, err)
		}
		c.err <- nil // later stops return at once
	case <-time.After(generous):
		t.Fatalf("%s: Run did not return after cancel", c.Snapshot().Identity)
	}
}

// waitFor blocks until cond holds for c's snapshot, without polling: it
// waits on Snapshot.Changed (and re-checks at least every 50ms, since
// validity ends without a change of index).
func (c *candidate) waitFor(t *testing.T, what string, cond func(*elect.Snapshot) bool) *elect.Snapshot {
	t.Helper()
	deadline := time.After(generous)
	for {
		s := c.Snapshot()
		if cond(s) {
			return s
		}
		select {
		case <-s.Changed():
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: timed out waiting until %s; last snapshot %+v", s.Identity, what, *s)
		}
	}
}

// nextStep waits until c's loop has stepped again after the step that
// published saw (Heartbeat is the time of the loop's last step, and every
// step publishes). It is the event that proves c had its chance to act on
// what saw shows: a request sent at that step has been answered by then, as
// its answer is itself a step (unless a timer fires first, within the
// request's round trip), so its counter has moved.
func (c *candidate) nextStep(t *testing.T, saw *elect.Snapshot) *elect.Snapshot {
	t.Helper()
	return c.waitFor(t, "its loop steps again", func(s *elect.Snapshot) bool { return s.Heartbeat.After(saw.Heartbeat) })
}

// writes is the number of create and update requests c has sent.
func (c *candidate) writes() float64 {
	return c.requests.Count("create", "") + c.requests.Count("update", "")
}

func leading(s *elect.Snapshot) bool    { return s.IsLeader(time.Now()) }
func notLeading(s *elect.Snapshot) bool { return !s.Leading }

func (f *fixture) lease() *coordinationv1.Lease {
	f.t.Helper()
	l, err := f.adminLeases().Get(f.t.Context(), leaseName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// edit changes the Lease as an admin would by hand, retrying on conflicts
// with the candidates' own writes. It returns when the edit is written.
func (f *fixture) edit(change func(*coordinationv1.Lease)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := f.adminLeases().Get(f.t.Context(), leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(l)
		_, err = f.adminLeases().Update(f.t.Context(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// noWatchUser is a user allowed get, create and update on leases but not
// list or watch: its candidates fall back to polling.
func (f *fixture) noWatchUser() *kubetest.User {
	f.t.Helper()
	user, err := cluster.UserWithRole(f.t.Context(), f.namespace, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "no-watch"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"get", "create", "update"},
		}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return user
}

// leaderAndWatcher starts a, waits until it leads (first), then starts b
// and waits until b watches a's Lease. Both use retryPeriod slowRetry, so
// that a takeover faster than slowRetry/2 cannot have come from a poll.
func (f *fixture) leaderAndWatcher(slowRetry time.Duration) (a *candidate, first *elect.Snapshot, b *candidate) {
	f.t.Helper()
	timings := withTimings(5*time.Second, 2500*time.Millisecond, slowRetry)
	a = f.start("a", timings)
	first = a.waitFor(f.t, "a leads", leading)
	b = f.start("b", timings)
	b.waitFor(f.t, "b watches", func(s *elect.Snapshot) bool { return s.WatchUp && s.Holder == "a" })
	return a, first, b
}
