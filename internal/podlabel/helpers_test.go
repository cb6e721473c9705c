package podlabel

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// Timings of the integration tests: short, and within the Elector's rules.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	resync        = leaseDuration // what the sidecar wires
	leaseName     = "leader"
	labelKey      = "leasehold.io/leader"
)

// generous bounds real-time waits on a shared, noisy machine; it never
// decides an outcome that a tighter bound is asserted for.
const generous = 20 * time.Second

type fixture struct {
	t         *testing.T
	namespace string
	admin     kubernetes.Interface

	mu         sync.Mutex
	candidates []*candidate
}

// newFixture creates a fresh namespace with its default ServiceAccount (no
// controller-manager runs to create it, and the ServiceAccount admission
// plugin wants it for every Pod).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := kubetest.Require(t, cluster)
	ns, err := c.CreateNamespace(t.Context(), "podlabel")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, namespace: ns, admin: c.Clientset()}
	if _, err := f.admin.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return f
}

// createPods creates minimal Pods. When v is not "", they carry label value
// v and the election label of the Lease leaseName, as the Labelers of that
// election write them.
func (f *fixture) createPods(v string, names ...string) {
	f.t.Helper()
	for _, name := range names {
		var l map[string]string
		if v != "" {
			l = map[string]string{labelKey: v, LeaseKey: leaseName}
		}
		f.createPod(name, l)
	}
}

// createPod creates a minimal Pod (no kubelet runs: it stays Pending) with
// labels.
func (f *fixture) createPod(name string, labels map[string]string) {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if _, err := f.admin.CoreV1().Pods(f.namespace).Create(f.t.Context(), p, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// setLabel writes a label value by hand, as an old leader's delayed patch
// (or a person) would.
func (f *fixture) setLabel(pod, v string) {
	f.t.Helper()
	if _, err := f.admin.CoreV1().Pods(f.namespace).Patch(f.t.Context(), pod, types.MergePatchType,
		labelPatch(labels.Set{labelKey: v}, ""), metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// labels returns every Pod's leader label value ("" when it has none).
func (f *fixture) labels() map[string]string {
	f.t.Helper()
	return f.labelValues(labelKey)
}

// labelValues returns every Pod's value of the label key ("" when it has
// none).
func (f *fixture) labelValues(key string) map[string]string {
	f.t.Helper()
	pods, err := f.admin.CoreV1().Pods(f.namespace).List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Labels[key]
	}
	return out
}

// holder returns the holder of the Lease leaseName, "" when none or no Lease.
func (f *fixture) holder() string {
	f.t.Helper()
	return f.holderOf(leaseName)
}

// holderOf returns the holder of the Lease lease, "" when none or no Lease.
func (f *fixture) holderOf(lease string) string {
	f.t.Helper()
	l, err := f.admin.CoordinationV1().Leases(f.namespace).Get(f.t.Context(), lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// eventually polls cond every 50ms until it returns "" (no problem) or
// generous has passed, then fails with the last problem.
func (f *fixture) eventually(what string, cond func() string) {
	f.t.Helper()
	f.eventuallyWithin(generous, what, cond)
}

// eventuallyWithin is eventually with a deadline of its own, for waits that
// are meant to take long.
func (f *fixture) eventuallyWithin(timeout time.Duration, what string, cond func() string) {
	f.t.Helper()
	var problem string
	poll.UntilReport(f.t, timeout, 50*time.Millisecond, what, func() bool {
		problem = cond()
		return problem == ""
	}, func() string { return problem })
}

// waitConverged waits until the Lease names a running candidate that leads
// (other than the ones in not), that candidate's Pod carries true, every
// other Pod carries false, and every Pod carries the election label of the
// Lease leaseName. It returns the leader.
func (f *fixture) waitConverged(what string, not ...*candidate) *candidate {
	f.t.Helper()
	var leader *candidate
	f.eventually(what+": only the leader's Pod carries true", func() string {
		leader = nil
		h := f.holder()
		for _, c := range f.running() {
			if c.id == h {
				leader = c
			}
		}
		if leader == nil {
			return fmt.Sprintf("holder %q is not a running candidate", h)
		}
		if slices.Contains(not, leader) {
			return fmt.Sprintf("holder is still %q", h)
		}
		if !leader.elector.Snapshot().IsLeader(time.Now()) {
			return fmt.Sprintf("holder %q does not lead", h)
		}
		var wrong []string
		for pod, got := range f.labels() {
			want := "false"
			if pod == leader.pod {
				want = "true"
			}
			if got != want {
				wrong = append(wrong, fmt.Sprintf("%s=%q (want %q)", pod, got, want))
			}
		}
		for pod, got := range f.labelValues(LeaseKey) {
			if got != leaseName {
				wrong = append(wrong, fmt.Sprintf("%s: election label %q (want %q)", pod, got, leaseName))
			}
		}
		sort.Strings(wrong)
		if len(wrong) > 0 {
			return fmt.Sprintf("leader %s (pod %s); wrong labels: %s", leader.id, leader.pod, strings.Join(wrong, ", "))
		}
		return ""
	})
	return leader
}

func (f *fixture) running() []*candidate {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*candidate
	for _, c := range f.candidates {
		if !c.isStopped() {
			out = append(out, c)
		}
	}
	return out
}

// candidate is one sidecar in-process: an Elector and a Labeler sharing one
// client whose traffic crosses its own Proxy.
type candidate struct {
	id, pod, lease string
	proxy          *kubetest.Proxy
	elector        *elect.Elector
	labeler        *Labeler
	metrics        *Metrics
	logs           *logBuffer
	rounds         roundCounter

	cancel context.CancelFunc
	done   chan struct{} // closed when both Runs returned
	errs   [2]error

	mu      sync.Mutex
	stopped bool
}

// start runs a candidate named id for pod as user (nil: admin), contending
// for the Lease leaseName, until the test ends or stop.
func (f *fixture) start(id, pod string, user *kubetest.User) *candidate {
	f.t.Helper()
	return f.startFor(leaseName, id, pod, user)
}

// startFor is start for the Lease lease (one app of several in the
// namespace).
func (f *fixture) startFor(lease, id, pod string, user *kubetest.User) *candidate {
	f.t.Helper()
	return f.startWith(election{lease: lease, key: labelKey}, id, pod, user)
}

// election is what a candidate's Elector and Labeler are for: the Lease,
// the label key (Config.Key) and, for a Lease of a lease group, the group.
type election struct{ group, lease, key string }

// startWith is start for the election e: a single Lease with any key, or
// one Lease of a group (a member of a group runs one candidate per Lease,
// all for the same Pod).
func (f *fixture) startWith(e election, id, pod string, user *kubetest.User) *candidate {
	f.t.Helper()
	t := f.t
	lease := e.lease
	proxy, err := cluster.NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() }) // after the candidate's stop (cleanups run last-in first-out)
	if user == nil {
		user = cluster.Admin()
	}
	via, err := user.Through(proxy)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(via.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := &candidate{id: id, pod: pod, lease: lease, proxy: proxy, metrics: NewMetrics(nil), logs: &logBuffer{}, done: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("candidate", id)
	if c.elector, err = elect.New(elect.Config{
		Config: decide.Config{
			Namespace: f.namespace, Name: lease, Identity: id,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnStop: true,
		},
		Leases: cs.CoordinationV1().Leases(f.namespace), Logger: log,
	}); err != nil {
		t.Fatal(err)
	}
	if c.labeler, err = New(Config{
		Pods: cs.CoreV1().Pods(f.namespace), Namespace: f.namespace, PodName: pod, Key: e.key,
		LeaseNamespace: f.namespace, LeaseName: lease, Group: e.group, Source: c.elector,
		RetryPeriod: retryPeriod, Resync: resync, Logger: log, Metrics: c.metrics,
	}); err != nil {
		t.Fatal(err)
	}
	c.labeler.idle = c.rounds.record
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	var wg sync.WaitGroup
	wg.Go(func() { c.errs[0] = c.elector.Run(ctx) })
	wg.Go(func() { c.errs[1] = c.labeler.Run(ctx) })
	go func() { wg.Wait(); close(c.done) }()
	f.mu.Lock()
	f.candidates = append(f.candidates, c)
	f.mu.Unlock()
	t.Cleanup(func() {
		c.stop(t)
		if t.Failed() {
			t.Logf("logs of %s:\n%s", id, c.logs)
		}
	})
	return c
}

// kill ends the candidate without waiting: it counts as gone at once.
func (c *candidate) kill() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
}

// stop ends the candidate and waits for both Runs to return.
func (c *candidate) stop(t *testing.T) {
	t.Helper()
	c.kill()
	select {
	case <-c.done:
		for _, err := range c.errs {
			if err != nil {
				t.Errorf("%s: Run: %v", c.id, err)
			}
		}
	case <-time.After(generous):
		t.Fatalf("%s: Run did not return after cancel", c.id)
	}
}

func (c *candidate) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// roundCounter counts the Labeler's timer rounds: the times its loop blocked
// with a wake time other than the last one. A leader's wake time moves only
// when a cleanup ends (or a failed write is to be retried), so while the
// own label is written each round is one cleanup: a list, and the clearing
// of what it found.
type roundCounter struct {
	mu   sync.Mutex
	n    int
	last time.Time
}

func (r *roundCounter) record(wake time.Time, armed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if armed && !wake.Equal(r.last) {
		r.n++
		r.last = wake
	}
}

func (r *roundCounter) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (c *candidate) failures() float64 { return value(c.metrics.failures) }
func (c *candidate) cleared() float64  { return value(c.metrics.cleared) }

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// leaseRule grants what the Elector needs on Leases.
var leaseRule = rbacv1.PolicyRule{
	APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
	Verbs: []string{"get", "create", "update", "list", "watch"},
}

// userWith returns a user bound only to the Lease rule and podVerbs on pods.
func (f *fixture) userWith(podVerbs ...string) *kubetest.User {
	f.t.Helper()
	rules := []rbacv1.PolicyRule{leaseRule}
	if len(podVerbs) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: podVerbs})
	}
	user, err := cluster.UserWithRole(f.t.Context(), f.namespace, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecar"},
		Rules:      rules,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return user
}

// ghostLease creates the Lease held by "ghost" for duration, just renewed:
// nobody may lead until candidates have watched it that long.
func (f *fixture) ghostLease(duration time.Duration) {
	f.t.Helper()
	now := metav1.NowMicro()
	if _, err := f.admin.CoordinationV1().Leases(f.namespace).Create(f.t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("ghost"), LeaseDurationSeconds: ptr.To(int32(duration / time.Second)),
			AcquireTime: &now, RenewTime: &now,
		},
	}, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}
