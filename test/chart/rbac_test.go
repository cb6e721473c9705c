package chart_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/podlabel"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// generous bounds real-time waits for an event on a shared, noisy machine;
// the event, not the bound, decides the outcome.
const generous = 30 * time.Second

func fleetConfig(t testing.TB, ns, lease string, user *kubetest.User) fleet.Config {
	t.Helper()
	return fleet.Config{
		Binary: sidecar, Cluster: cluster, User: user, Namespace: ns, Lease: lease,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Dir: t.TempDir(),
	}
}

func start(t testing.TB, f fleet.Config, name string) *fleet.Instance {
	t.Helper()
	return f.StartTest(t, name)
}

// chartRole renders the chart (release "rbac", demo on) into namespace ns
// and returns its Role and the Lease name its sidecar is configured with,
// after checking that the Role is made for that Lease.
func chartRole(t testing.TB, ns string, args ...string) (*rbacv1.Role, string) {
	t.Helper()
	objs := render(t, "rbac", ns, chartDir, append([]string{"--set", "demo.enabled=true"}, args...)...)
	role := convert[rbacv1.Role](t, one(t, objs, "Role"))
	d := convert[appsv1.Deployment](t, one(t, objs, "Deployment"))
	c := container(d.Spec.Template.Spec.InitContainers, "leasehold")
	if c == nil {
		t.Fatal("no leasehold sidecar in the demo")
	}
	lease, _ := envValue(c, "LEASEHOLD_LEASE_NAME")
	for _, rule := range role.Rules {
		if len(rule.ResourceNames) > 0 && !slices.Equal(rule.ResourceNames, []string{lease}) {
			t.Fatalf("Role names %v; the sidecar uses lease %q", rule.ResourceNames, lease)
		}
	}
	return role, lease
}

// waitLeader waits until inst leads and returns its status.
func waitLeader(t testing.TB, inst *fleet.Instance) httpapi.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, st, err := fleet.WaitLeader(ctx, []*fleet.Instance{inst}, 5*time.Millisecond)
	if err != nil {
		t.Fatalf("%s: %v (log %s)", inst.Name, err, inst.LogPath)
	}
	return st
}

// eventually polls cond every 20ms until it holds, failing t once timeout
// has passed.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, timeout, 20*time.Millisecond, what, cond)
}

func metric(t testing.TB, inst *fleet.Instance, name string, labels map[string]string) float64 {
	t.Helper()
	m, err := inst.Metrics(t.Context())
	if err != nil {
		t.Fatalf("%s: %v", inst.Name, err)
	}
	return m.Sum(name, labels)
}

func forbidden(t testing.TB, inst *fleet.Instance, verb string) float64 {
	t.Helper()
	labels := map[string]string{"code": "403"}
	if verb != "" {
		labels["verb"] = verb
	}
	return metric(t, inst, "leasehold_kube_requests_total", labels)
}

func getLease(t testing.TB, ns, name string) (*coordinationv1.Lease, error) {
	t.Helper()
	return cluster.Clientset().CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// stopGracefully sends SIGTERM and waits for exit status 0. How soon it
// exits is not what these tests prove (the fault suite and cmd/sidecar bound
// it); generous only catches a sidecar that never exits.
func stopGracefully(t testing.TB, inst *fleet.Instance) {
	t.Helper()
	took, err := inst.Terminate(generous)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s exited %v after SIGTERM", inst.Name, took.Round(time.Millisecond))
	if code := inst.ExitCode(); code != 0 {
		t.Fatalf("%s exit status %d after SIGTERM, want 0", inst.Name, code)
	}
}

// The real sidecar, with the credentials of a user bound to nothing but the
// chart's rendered Role, creates the Lease and leads, renews it past several
// lease durations, watches it, hands it over on SIGTERM within a round trip
// and releases it on the last SIGTERM. No request is ever forbidden.
func TestChartRoleLetsTheSidecarElectRenewWatchAndRelease(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	ns := newNamespace(t, "rbac")
	role, lease := chartRole(t, ns)
	user, err := cluster.UserWithRole(t.Context(), ns, role)
	if err != nil {
		t.Fatal(err)
	}
	f := fleetConfig(t, ns, lease, user)
	a := start(t, f, "a")
	first := waitLeader(t, a)
	created, err := getLease(t, ns, lease)
	if err != nil {
		t.Fatalf("elect: the Lease was not created: %v", err)
	}
	if holder(created) != first.Identity {
		t.Fatalf("elect: holder %q, want %q", holder(created), first.Identity)
	}
	b := start(t, f, "b")

	// Renew: a renews the Lease until its renewTime is two lease durations
	// past the first, and still leads, in the same term. The renewals are
	// the event waited for; without them the wait fails.
	renewedPast := created.Spec.RenewTime.Add(2 * leaseDuration)
	eventually(t, generous, "a renews the Lease past two lease durations", func() bool {
		l, err := getLease(t, ns, lease)
		if err != nil || holder(l) != first.Identity {
			t.Fatalf("renew: Lease %v, holder %q (err %v); want still %q", l, holder(l), err, first.Identity)
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(renewedPast)
	})
	st, err := a.Status(t.Context())
	if err != nil || !st.Leader || st.FencingToken != first.FencingToken {
		t.Fatalf("renew: after %v of renewals a reports %+v (err %v), want leader with token %d", 2*leaseDuration, st, err, first.FencingToken)
	}

	// Watch: both watch the Lease through list+watch on its name.
	for _, inst := range []*fleet.Instance{a, b} {
		eventually(t, 5*time.Second, inst.Name+": leasehold_watch_up == 1", func() bool {
			return metric(t, inst, "leasehold_watch_up", nil) == 1
		})
	}

	// Hand over: SIGTERM a; b takes the released Lease.
	sent := time.Now()
	stopGracefully(t, a)
	second := waitLeader(t, b)
	t.Logf("handover after SIGTERM: %v; token %d → %d", time.Since(sent), first.FencingToken, second.FencingToken)
	if second.FencingToken <= first.FencingToken {
		t.Errorf("successor token %d not above %d", second.FencingToken, first.FencingToken)
	}
	if n := forbidden(t, b, ""); n != 0 {
		t.Errorf("b: %v requests forbidden", n)
	}

	// Release: SIGTERM the last leader; the Lease is left with no holder.
	stopGracefully(t, b)
	released, err := getLease(t, ns, lease)
	if err != nil {
		t.Fatal(err)
	}
	if h := holder(released); h != "" {
		t.Fatalf("release: holder %q after SIGTERM, want \"\"", h)
	}
	for _, inst := range []*fleet.Instance{a, b} {
		if log, err := os.ReadFile(inst.LogPath); err != nil || strings.Contains(strings.ToLower(string(log)), "forbidden") {
			t.Errorf("%s: a request was forbidden (err %v):\n%s", inst.Name, err, log)
		}
	}
}

// With podLabel.enabled, the chart's Role lets the real sidecar keep the
// leader label on its own Pod and clear a stale one on another Pod (in a
// namespace enforcing the "restricted" Pod Security Standard), and nothing
// it asks is forbidden. The label and the rule it needs are off by default
// (TestTemplateCIValues).
func TestChartRoleLetsTheSidecarLabelItsPod(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	const key = "leasehold.io/leader"
	ns := newNamespace(t, "label")
	role, lease := chartRole(t, ns, "--set", "podLabel.enabled=true", "--set", "podLabel.key="+key)
	user, err := cluster.UserWithRole(t.Context(), ns, role)
	if err != nil {
		t.Fatal(err)
	}
	pods := cluster.Clientset().CoreV1().Pods(ns)
	if _, err := cluster.Clientset().CoreV1().ServiceAccounts(ns).Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err) // admission looks it up; no controller manager creates it here
	}
	for _, name := range []string{"a", "b"} {
		// b: a crashed leader's labels, the leader label with its election's
		stale := map[string]string{key: "true", podlabel.LeaseKey: lease}
		if name == "a" {
			stale = nil
		}
		if _, err := pods.Create(t.Context(), restrictedPod(name, stale), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f := fleetConfig(t, ns, lease, user)
	f.Env = append(f.Env, "LEASEHOLD_POD_LABEL="+key)
	a := start(t, f, "a")
	waitLeader(t, a)
	labels := func() string {
		pa, errA := pods.Get(t.Context(), "a", metav1.GetOptions{})
		pb, errB := pods.Get(t.Context(), "b", metav1.GetOptions{})
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		return pa.Labels[key] + "," + pb.Labels[key]
	}
	eventually(t, 10*time.Second, "a's Pod true, b's stale true cleared", func() bool { return labels() == "true,false" })
	if n := forbidden(t, a, ""); n != 0 {
		t.Errorf("%v requests forbidden", n)
	}
	stopGracefully(t, a)
	if got := labels(); got != "false,false" {
		t.Errorf("after SIGTERM: labels %s, want false,false", got)
	}
}

// restrictedPod is a Pod the "restricted" Pod Security Standard admits.
func restrictedPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "app", Image: "example.com/app:1",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// without returns role minus one verb; a rule left with no verb goes.
func without(role *rbacv1.Role, verb string) *rbacv1.Role {
	r := role.DeepCopy()
	r.Name += "-no-" + verb
	r.Rules = nil
	for _, rule := range role.Rules {
		rule = *rule.DeepCopy()
		rule.Verbs = slices.DeleteFunc(rule.Verbs, func(v string) bool { return v == verb })
		if len(rule.Verbs) > 0 {
			r.Rules = append(r.Rules, rule)
		}
	}
	return r
}

// Each verb of the chart's Role is needed: with the Role minus that verb,
// the API server forbids a request of the real sidecar and something it must
// do fails. So the Role has no surplus rule.
func TestEveryVerbOfTheChartRoleIsNeeded(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	verbs := map[string]bool{}
	role, _ := chartRole(t, "probe")
	for _, rule := range role.Rules {
		for _, v := range rule.Verbs {
			verbs[v] = true
		}
	}
	cases := map[string]func(t *testing.T, f fleet.Config){
		// The Lease does not exist yet: the sidecar cannot create it, so
		// nobody ever leads.
		"create": func(t *testing.T, f fleet.Config) {
			inst := start(t, f, "a")
			eventually(t, 5*time.Second, "a create is forbidden", func() bool { return forbidden(t, inst, "create") > 0 })
			wantNotLeader(t, inst, "create")
			if _, err := getLease(t, f.Namespace, f.Lease); !apierrors.IsNotFound(err) {
				t.Errorf("Lease: %v, want NotFound", err)
			}
		},
		// A released Lease exists: acquiring it is an update, forbidden.
		"update": func(t *testing.T, f fleet.Config) {
			now := metav1.NowMicro()
			if _, err := cluster.Clientset().CoordinationV1().Leases(f.Namespace).Create(t.Context(), &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: f.Lease},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](1), RenewTime: &now},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			inst := start(t, f, "a")
			eventually(t, 5*time.Second, "an update is forbidden", func() bool { return forbidden(t, inst, "update") > 0 })
			wantNotLeader(t, inst, "update")
			if l, err := getLease(t, f.Namespace, f.Lease); err != nil || holder(l) != "" {
				t.Errorf("Lease: %v, holder %q; want it still released", err, holder(l))
			}
		},
		// Another holder's term is running out when the sidecar's link to
		// the apiserver is cut: its acquire goes unanswered, so it no
		// longer knows what is stored (the acquire may have landed) and
		// must read the Lease before it writes again. Without get it
		// never can: it never leads, though nobody else campaigns.
		"get": func(t *testing.T, f fleet.Config) {
			heldByAnother(t, f.Namespace, f.Lease)
			inst := f.StartTestVia(t, "a", true)
			eventually(t, generous, "a sees the other holder", func() bool {
				st, err := inst.Status(t.Context())
				return err == nil && st.Holder == otherHolder
			})
			lostAnAnswer(t, inst, func() []string {
				st, err := inst.Status(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return []string{st.LastErrorAt}
			})
			wantNotLeader(t, inst, "get")
		},
		// The watch cannot start without its initial list: candidates poll.
		"list": func(t *testing.T, f fleet.Config) { wantNoWatch(t, f, "list") },
		// The list works but the watch is forbidden: candidates poll.
		"watch": func(t *testing.T, f fleet.Config) { wantNoWatch(t, f, "watch") },
	}
	for verb := range verbs {
		if cases[verb] == nil {
			t.Errorf("the chart's Role grants %q, which no case shows to be needed", verb)
		}
	}
	for verb, run := range cases {
		t.Run("without "+verb, func(t *testing.T) {
			t.Parallel()
			if !verbs[verb] {
				t.Fatalf("the chart's Role does not grant %q", verb)
			}
			ns := newNamespace(t, "no-"+verb)
			role, lease := chartRole(t, ns)
			user, err := cluster.UserWithRole(t.Context(), ns, without(role, verb))
			if err != nil {
				t.Fatal(err)
			}
			run(t, fleetConfig(t, ns, lease, user))
		})
	}
}

// otherHolder is the holder heldByAnother writes.
const otherHolder = "another-instance"

// heldByAnother creates the Leases names in namespace ns, held by
// otherHolder for a lease of 2s that nobody renews.
func heldByAnother(t *testing.T, ns string, names ...string) {
	t.Helper()
	now := metav1.NowMicro()
	for _, name := range names {
		if _, err := cluster.Clientset().CoordinationV1().Leases(ns).Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(otherHolder), LeaseDurationSeconds: ptr.To[int32](2),
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// lostAnAnswer cuts inst's link to the apiserver (it holds every byte
// while cut, so requests go unanswered) until at least one of inst's
// elections reports a new error (errorsAt: each election's lastErrorAt, ""
// for none), then heals it. It returns which elections did.
func lostAnAnswer(t *testing.T, inst *fleet.Instance, errorsAt func() []string) (failed []int) {
	t.Helper()
	before := errorsAt()
	inst.Proxy.Cut()
	eventually(t, generous, inst.Name+" reports a request unanswered", func() bool {
		failed = failed[:0]
		for i, at := range errorsAt() {
			if at != "" && (i >= len(before) || at != before[i]) {
				failed = append(failed, i)
			}
		}
		return len(failed) > 0
	})
	inst.Proxy.Heal()
	return failed
}

// wantNotLeader waits until inst has been refused verb twice more (two more
// attempts to take the Lease, each of them a chance to lead), then checks
// that it does not lead.
func wantNotLeader(t *testing.T, inst *fleet.Instance, verb string) {
	t.Helper()
	refused := forbidden(t, inst, verb)
	eventually(t, generous, fmt.Sprintf("a refused %s twice more, or leads", verb), func() bool {
		if st, err := inst.Status(t.Context()); err != nil || st.Leader {
			t.Fatalf("status %+v (err %v), want not leader", st, err)
		}
		return forbidden(t, inst, verb) >= refused+2
	})
	if st, err := inst.Status(t.Context()); err != nil || st.Leader {
		t.Errorf("status %+v (err %v), want not leader", st, err)
	}
}

// wantNoWatch checks that without verb the sidecar still elects, by
// polling, and that its watch never comes up across two more of the
// watcher's attempts (each refused verb is one).
func wantNoWatch(t *testing.T, f fleet.Config, verb string) {
	t.Helper()
	inst := start(t, f, "a")
	waitLeader(t, inst) // it still elects, by polling
	eventually(t, 5*time.Second, "a "+verb+" is forbidden", func() bool { return forbidden(t, inst, verb) > 0 })
	whileRefused(t, inst, verb, func() {
		if up := metric(t, inst, "leasehold_watch_up", nil); up != 0 {
			t.Fatalf("leasehold_watch_up = %v without %s, want 0", up, verb)
		}
	})
}

// whileRefused waits until inst has been refused verb twice more (two more
// attempts, each a chance to do what the test says it must not), calling
// check at every poll and once after.
func whileRefused(t *testing.T, inst *fleet.Instance, verb string, check func()) {
	t.Helper()
	whileRefusedTimes(t, inst, verb, 2, check)
}

// whileRefusedTimes is whileRefused for n more refusals (twice each of
// several watchers or elections that send verb).
func whileRefusedTimes(t *testing.T, inst *fleet.Instance, verb string, n float64, check func()) {
	t.Helper()
	refused := forbidden(t, inst, verb)
	eventually(t, generous, fmt.Sprintf("%s refused %s %v times more", inst.Name, verb, n), func() bool {
		check()
		return forbidden(t, inst, verb) >= refused+n
	})
	check()
}
