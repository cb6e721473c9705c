package chart_test

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/podlabel"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// modeVars are the sidecar's settings of a lease group, of observer mode
// and of handover, as the chart renders them.
var modeVars = []string{"LEASEHOLD_LEASES", "LEASEHOLD_SHARDS", "LEASEHOLD_GROUP", "LEASEHOLD_BALANCE", "LEASEHOLD_CANDIDATE", "LEASEHOLD_HANDOVER", "LEASEHOLD_PRIORITY"}

// chartSetup is a sidecar configured exactly as the chart configures it,
// and the chart's Role.
type chartSetup struct {
	role   *rbacv1.Role
	lease  string   // LEASEHOLD_LEASE_NAME ("" with named roles)
	env    []string // the modeVars the chart sets
	leases []string // every Lease the sidecar follows, in order
	group  string   // LEASEHOLD_GROUP ("" for a single Lease)
}

// chartSidecar renders the chart (release "rbac", demo on) with args into
// namespace ns, and returns its Role and the demo sidecar's settings, after
// checking that every rule naming Leases names exactly the sidecar's.
func chartSidecar(t testing.TB, ns string, args ...string) chartSetup {
	t.Helper()
	objs := render(t, "rbac", ns, chartDir, append([]string{"--set", "demo.enabled=true"}, args...)...)
	s := chartSetup{role: convert[rbacv1.Role](t, one(t, objs, "Role"))}
	d := convert[appsv1.Deployment](t, one(t, objs, "Deployment"))
	c := container(d.Spec.Template.Spec.InitContainers, "leasehold")
	if c == nil {
		t.Fatal("no leasehold sidecar in the demo")
	}
	s.lease, _ = envValue(c, "LEASEHOLD_LEASE_NAME")
	for _, name := range modeVars {
		if v, ok := envValue(c, name); ok {
			s.env = append(s.env, name+"="+v)
		}
	}
	s.group, _ = envValue(c, "LEASEHOLD_GROUP")
	if roles, ok := envValue(c, "LEASEHOLD_LEASES"); ok {
		s.leases = strings.Split(roles, ",")
	} else if shards, ok := envValue(c, "LEASEHOLD_SHARDS"); ok {
		n, err := strconv.Atoi(shards)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			s.leases = append(s.leases, fmt.Sprintf("%s-%d", s.lease, i))
		}
	} else {
		s.leases = []string{s.lease}
	}
	for _, rule := range s.role.Rules {
		if len(rule.ResourceNames) > 0 && slices.Contains(rule.Resources, "leases") && !slices.Equal(rule.ResourceNames, s.leases) {
			t.Fatalf("Role names %v; the sidecar follows %v", rule.ResourceNames, s.leases)
		}
	}
	return s
}

// fleet is a fleet of such sidecars with the credentials of a user bound
// to role only (nil: the cluster's admin), in namespace ns.
func (s chartSetup) fleet(t testing.TB, ns string, role *rbacv1.Role) fleet.Config {
	t.Helper()
	var user *kubetest.User
	if role != nil {
		var err error
		if user, err = cluster.UserWithRole(t.Context(), ns, role); err != nil {
			t.Fatal(err)
		}
	}
	f := fleetConfig(t, ns, s.lease, user)
	f.Env = append(f.Env, s.env...)
	return f
}

// verbsOf is the set of verbs a Role grants, on any rule.
func verbsOf(role *rbacv1.Role) map[string]bool {
	verbs := map[string]bool{}
	for _, rule := range role.Rules {
		for _, v := range rule.Verbs {
			verbs[v] = true
		}
	}
	return verbs
}

// groupState asks inst for GET /v1/leases (the unnamed /v1/status answers
// 409 with a lease group).
func groupState(t testing.TB, inst *fleet.Instance) httpapi.Leases {
	t.Helper()
	l, err := inst.Leases(t.Context())
	if err != nil {
		t.Fatalf("%s: %v (log %s)", inst.Name, err, inst.LogPath)
	}
	return l
}

// heldBy lists the Leases inst says it validly leads.
func heldBy(t testing.TB, inst *fleet.Instance) []string {
	t.Helper()
	var held []string
	for _, st := range groupState(t, inst).Leases {
		if st.Leader {
			held = append(held, st.Lease)
		}
	}
	return held
}

// identityOf is inst's identity, as its API reports it.
func identityOf(t testing.TB, inst *fleet.Instance) string {
	t.Helper()
	l := groupState(t, inst)
	if len(l.Leases) == 0 || l.Leases[0].Identity == "" {
		t.Fatalf("%s: no identity in %+v", inst.Name, l)
	}
	return l.Leases[0].Identity
}

// members lists the group's member Leases, by their label.
func members(t testing.TB, ns, groupName string) []string {
	t.Helper()
	list, err := cluster.Clientset().CoordinationV1().Leases(ns).List(t.Context(),
		metav1.ListOptions{LabelSelector: group.MemberLabel + "=" + groupName})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	return names
}

// holders maps each Lease to its holder in the API server ("" if released,
// "<missing>" if absent).
func holders(t testing.TB, ns string, leases []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range leases {
		l, err := getLease(t, ns, name)
		switch {
		case apierrors.IsNotFound(err):
			out[name] = "<missing>"
		case err != nil:
			t.Fatal(err)
		default:
			out[name] = holder(l)
		}
	}
	return out
}

// noForbiddenInLogs fails t if any instance logged a forbidden request.
func noForbiddenInLogs(t testing.TB, insts ...*fleet.Instance) {
	t.Helper()
	for _, inst := range insts {
		if log, err := os.ReadFile(inst.LogPath); err != nil || strings.Contains(strings.ToLower(string(log)), "forbidden") {
			t.Errorf("%s: a request was forbidden (err %v):\n%s", inst.Name, err, log)
		}
	}
}

// settled waits until a and b hold one Lease each of the two, and a sees
// both held and two members.
func settled(t testing.TB, a, b *fleet.Instance) {
	t.Helper()
	eventually(t, generous, "a and b hold one Lease each, a sees both held by 2 members", func() bool {
		if len(heldBy(t, a)) != 1 || len(heldBy(t, b)) != 1 {
			return false
		}
		l := groupState(t, a)
		for _, st := range l.Leases {
			if st.Holder == "" {
				return false
			}
		}
		return l.Members != nil && *l.Members == 2
	})
}

// With a lease group (shards=2), the real sidecars, with the credentials of
// a user bound to nothing but the chart's rendered Role, create the shard
// Leases and their member Leases, find each other and settle one Lease
// each; on SIGTERM a member deletes its member Lease (the other sees it go
// well within the member TTL) and releases its Lease, which the other
// takes; the last one releases everything. No request is ever forbidden.
func TestChartGroupRoleLetsMembersShareTheLeases(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	ns := newNamespace(t, "group")
	s := chartSidecar(t, ns, "--set", "shards=2")
	if s.group != "rbac-leasehold" || !slices.Contains(s.env, "LEASEHOLD_BALANCE=true") || !slices.Equal(s.leases, []string{"rbac-leasehold-0", "rbac-leasehold-1"}) {
		t.Fatalf("group %q, env %v, leases %v: want the full name as the group's name, balanced, two shards", s.group, s.env, s.leases)
	}
	f := s.fleet(t, ns, s.role)
	a := start(t, f, "a")
	b := start(t, f, "b")
	settled(t, a, b)
	idA, idB := identityOf(t, a), identityOf(t, b)
	if got := slices.Sorted(maps.Values(holders(t, ns, s.leases))); !slices.Equal(got, slices.Sorted(slices.Values([]string{idA, idB}))) {
		t.Errorf("holders in the API server %v, want one Lease each for %s and %s", got, idA, idB)
	}
	wantMembers := []string{group.MemberLeaseName(s.group, idA), group.MemberLeaseName(s.group, idB)}
	if got := members(t, ns, s.group); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(wantMembers))) {
		t.Errorf("member Leases %v, want %v", got, wantMembers)
	}
	for _, inst := range []*fleet.Instance{a, b} {
		eventually(t, 5*time.Second, inst.Name+": every watch up", func() bool {
			return metric(t, inst, "leasehold_watch_up", nil) == float64(len(s.leases))
		})
	}

	// b leaves: its member Lease is deleted (gone from the API server:
	// expiry deletes nothing, so it did not just run out), and a takes the
	// Lease b released.
	stopGracefully(t, b)
	eventually(t, generous, "b's member Lease deleted, a sees 1 member and holds both Leases", func() bool {
		l := groupState(t, a)
		return len(members(t, ns, s.group)) == 1 && l.Members != nil && *l.Members == 1 && len(heldBy(t, a)) == 2
	})
	if n := forbidden(t, a, ""); n != 0 {
		t.Errorf("a: %v requests forbidden", n)
	}

	// a leaves: every Lease released, no member Lease left.
	stopGracefully(t, a)
	for name, h := range holders(t, ns, s.leases) {
		if h != "" {
			t.Errorf("Lease %s held by %q after the last SIGTERM, want released", name, h)
		}
	}
	if got := members(t, ns, s.group); len(got) != 0 {
		t.Errorf("member Leases %v left after every member left", got)
	}
	noForbiddenInLogs(t, a, b)
}

// With a lease group of two Leases (leases={alpha,beta}) and
// podLabel.enabled, the real sidecars, with the credentials of a user bound
// to nothing but the chart's rendered Role (its pods rule applies in group
// mode too), label each Lease's leader's Pod <key>-<lease>=true and the
// other Pod false, clear a crashed member's stale true of its Lease, move
// the labels with the Leases when a member leaves, and take every true off
// on SIGTERM; no request is ever forbidden.
func TestChartGroupRoleLetsMembersLabelEachLeasesLeader(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	const key = "leasehold.io/leader"
	ns := newNamespace(t, "group-label")
	s := chartSidecar(t, ns, "--set", "leases={alpha,beta}", "--set", "podLabel.enabled=true", "--set", "podLabel.key="+key)
	if !slices.ContainsFunc(s.role.Rules, func(r rbacv1.PolicyRule) bool {
		return ruleDiff([]rbacv1.PolicyRule{r}, []rbacv1.PolicyRule{podLabelRule}) == ""
	}) {
		t.Fatalf("the group's Role has no pods rule %v: %s", podLabelRule, rulesString(s.role.Rules))
	}
	keys := map[string]string{"alpha": podlabel.GroupLeaderKey(key, "alpha"), "beta": podlabel.GroupLeaderKey(key, "beta")}
	if _, err := cluster.Clientset().CoreV1().ServiceAccounts(ns).Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err) // admission looks it up; no controller manager creates it here
	}
	pods := cluster.Clientset().CoreV1().Pods(ns)
	for name, l := range map[string]map[string]string{
		"a": nil, "b": nil,
		// A crashed member's labels: alpha's true, with the group's election label.
		"c": {keys["alpha"]: "true", podlabel.GroupKey: s.group},
	} {
		if _, err := pods.Create(t.Context(), restrictedPod(name, l), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f := s.fleet(t, ns, s.role)
	f.Env = append(f.Env, "LEASEHOLD_POD_LABEL="+key)
	a, b := start(t, f, "a"), start(t, f, "b")
	settled(t, a, b)
	pod := map[string]string{identityOf(t, a): "a", identityOf(t, b): "b"}
	labels := func() map[string]string { // "<pod> <lease>" → value
		out := map[string]string{}
		for _, name := range []string{"a", "b", "c"} {
			p, err := pods.Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for lease, k := range keys {
				out[name+" "+lease] = p.Labels[k]
			}
			out[name+" group"] = p.Labels[podlabel.GroupKey]
		}
		return out
	}
	// want: each Lease's leader's Pod (by the Leases' holders) true, the
	// other member's false, c's stale alpha cleared.
	want := func(leaders map[string]string, stopped ...string) map[string]string {
		w := map[string]string{"c alpha": "false", "c beta": "", "c group": s.group, "a group": s.group, "b group": s.group}
		for lease := range keys {
			for _, name := range []string{"a", "b"} {
				w[name+" "+lease] = strconv.FormatBool(leaders[lease] == name && !slices.Contains(stopped, name))
			}
		}
		return w
	}
	leaders := func() map[string]string {
		out := map[string]string{}
		for lease, h := range holders(t, ns, []string{"alpha", "beta"}) {
			out[lease] = pod[h]
		}
		return out
	}
	var got, w map[string]string
	eventually(t, generous, "each Lease's leader's Pod carries its label true, the other member's false", func() bool {
		got, w = labels(), want(leaders())
		return maps.Equal(got, w)
	})
	if l := leaders(); l["alpha"] == l["beta"] {
		t.Errorf("one member leads both Leases: %v", l)
	}

	stopGracefully(t, b)
	eventually(t, generous, "a leads both and carries both labels, b's are false", func() bool {
		got, w = labels(), want(map[string]string{"alpha": "a", "beta": "a"})
		return maps.Equal(got, w)
	})
	stopGracefully(t, a)
	if got, w = labels(), want(nil, "a", "b"); !maps.Equal(got, w) {
		t.Errorf("after every member's SIGTERM: labels %v, want %v", got, w)
	}
	if t.Failed() {
		t.Logf("labels %v, want %v", got, w)
	}
	noForbiddenInLogs(t, a, b)
}

// Each verb of the chart's Role for a lease group (shards=2) is needed:
// with the Role minus that verb, the API server forbids a request of the
// real sidecar and something the group must do fails.
func TestEveryVerbOfTheGroupRoleIsNeeded(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	args := []string{"--set", "shards=2"}
	verbs := verbsOf(chartSidecar(t, "probe", args...).role)
	// nothingHeld waits until inst has been refused verb twice more (each
	// refusal an attempt to write a Lease: a shard's or its member Lease),
	// checking at every poll that it holds nothing.
	nothingHeld := func(t *testing.T, inst *fleet.Instance, verb string) {
		t.Helper()
		whileRefused(t, inst, verb, func() {
			if held := heldBy(t, inst); len(held) != 0 {
				t.Fatalf("holds %v, want nothing", held)
			}
		})
	}
	cases := map[string]func(t *testing.T, s chartSetup, f fleet.Config){
		// No shard Lease exists yet and none can be created; nor can the
		// member Lease: nobody ever leads, no member is ever seen.
		"create": func(t *testing.T, s chartSetup, f fleet.Config) {
			inst := start(t, f, "a")
			eventually(t, 5*time.Second, "a create is forbidden", func() bool { return forbidden(t, inst, "create") > 0 })
			nothingHeld(t, inst, "create")
			for name, h := range holders(t, f.Namespace, s.leases) {
				if h != "<missing>" {
					t.Errorf("Lease %s: holder %q, want it missing", name, h)
				}
			}
			if got := members(t, f.Namespace, s.group); len(got) != 0 {
				t.Errorf("member Leases %v, want none", got)
			}
		},
		// The placeholders are created, but acquiring one is an update,
		// forbidden; so is renewing the member Lease.
		"update": func(t *testing.T, s chartSetup, f fleet.Config) {
			inst := start(t, f, "a")
			eventually(t, 10*time.Second, "an update is forbidden", func() bool { return forbidden(t, inst, "update") > 0 })
			nothingHeld(t, inst, "update")
			for name, h := range holders(t, f.Namespace, s.leases) {
				if h != "" {
					t.Errorf("Lease %s: holder %q, want the unheld placeholder", name, h)
				}
			}
		},
		// Another holder's terms are running out when the member's link
		// to the apiserver is cut: an acquire goes unanswered, so its
		// election no longer knows what is stored (the acquire may have
		// landed) and must read the Lease before it writes again. Without
		// get it never can: a never leads that Lease.
		"get": func(t *testing.T, s chartSetup, f fleet.Config) {
			heldByAnother(t, f.Namespace, s.leases...)
			inst := f.StartTestVia(t, "a", true)
			var seen time.Time // when a last saw one of those terms begin
			eventually(t, generous, "a sees the other holder of each Lease", func() bool {
				for _, l := range groupState(t, inst).Leases {
					at, err := time.Parse(time.RFC3339Nano, l.ObservedAt)
					if l.Holder != otherHolder || err != nil {
						return false
					}
					seen = later(seen, at)
				}
				return true
			})
			// a campaigns for each Lease leaseDuration after it saw the
			// term, and stays a member until leaseDuration after its
			// member Lease's last renewal (every leaseDuration/3). Cut a
			// second before the campaign: the acquires go out into the
			// cut, at least a second before a could stop being a member.
			eventually(t, generous, "a second before a campaigns", func() bool {
				return !time.Now().Before(seen.Add(leaseDuration - time.Second))
			})
			failed := lostAnAnswer(t, inst, func() []string {
				var at []string
				for _, l := range groupState(t, inst).Leases {
					// Only an unanswered acquire: a Lease a took just
					// before the cut fails a renewal, and a leads it on.
					if l.LastError != nil && strings.HasPrefix(*l.LastError, "acquire the Lease") {
						at = append(at, l.LastErrorAt)
					} else {
						at = append(at, "")
					}
				}
				return at
			})
			whileRefused(t, inst, "get", func() {
				for _, i := range failed {
					if l := groupState(t, inst).Leases[i]; l.Leader {
						t.Fatalf("a leads %s, whose acquire went unanswered, without reading it", l.Lease)
					}
				}
			})
		},
		// A member that leaves cannot delete its member Lease: the others
		// keep counting it as a member until it expires, and so leave the
		// Lease it released alone in the meantime (not a candidate for it:
		// the plan keeps it for the member they count), then take it.
		// Longer timings: b renewed its member Lease (TTL one lease
		// duration) at most a third of that before it left, so a counts b
		// for over 5s after b has gone: time enough to ask a.
		"delete": func(t *testing.T, s chartSetup, f fleet.Config) {
			f.LeaseDuration, f.RenewDeadline, f.RetryPeriod = 8*time.Second, 5*time.Second, time.Second
			a := start(t, f, "a")
			b := start(t, f, "b")
			settled(t, a, b)
			idB := identityOf(t, b)
			released := heldBy(t, b)[0]
			stopGracefully(t, b)
			if got := members(t, f.Namespace, s.group); !slices.Contains(got, group.MemberLeaseName(s.group, idB)) {
				t.Errorf("member Leases %v after b left: want b's still there", got)
			}
			if log, _ := os.ReadFile(b.LogPath); !strings.Contains(string(log), "member Lease delete failed") {
				t.Errorf("b's log does not report the failed delete:\n%s", log)
			}
			eventually(t, generous, "a sees "+released+" released while it counts b, and stays out of it", func() bool {
				l := groupState(t, a)
				if l.Members == nil || *l.Members != 2 {
					t.Fatalf("a sees %v members before it saw %s released, want still 2 (b's member Lease stays)", l.Members, released)
				}
				for _, st := range l.Leases {
					if st.Lease == released && st.Holder == "" {
						if st.Leader || st.Candidate {
							t.Fatalf("a, counting b, campaigns for the Lease b released: %+v", st)
						}
						return true
					}
				}
				return false
			})
			eventually(t, generous, "b's member Lease expires in a's view and a takes both Leases", func() bool {
				l := groupState(t, a)
				return l.Members != nil && *l.Members == 1 && len(heldBy(t, a)) == 2
			})
		},
		// Neither the members nor any Lease can be listed: membership is
		// never known, so a balanced member never campaigns, and no Lease
		// is ever observed: the sidecar never gets ready (its pod's app
		// would never start).
		"list": func(t *testing.T, s chartSetup, f fleet.Config) {
			f.Unready = true
			inst := start(t, f, "a")
			eventually(t, 5*time.Second, "a list is forbidden", func() bool { return forbidden(t, inst, "list") > 0 })
			whileRefusedTimes(t, inst, "list", watchers(s), func() { // twice each watcher
				if ready, err := inst.ReadyNow(t.Context()); err != nil || ready {
					t.Fatalf("/readyz: ready %v (err %v), want 503 without list", ready, err)
				}
			})
			if held := heldBy(t, inst); len(held) != 0 {
				t.Errorf("holds %v, want nothing", held)
			}
		},
		// The lists work but no watch opens: the elections poll every
		// retryPeriod, and the members see each other only when their
		// watcher lists again (with a backoff growing to 30s).
		"watch": func(t *testing.T, s chartSetup, f fleet.Config) {
			inst := start(t, f, "a")
			eventually(t, 5*time.Second, "a watch is forbidden", func() bool { return forbidden(t, inst, "watch") > 0 })
			whileRefusedTimes(t, inst, "watch", watchers(s), func() { // twice each watcher
				if up := metric(t, inst, "leasehold_watch_up", nil); up != 0 {
					t.Fatalf("leasehold_watch_up = %v without watch, want 0", up)
				}
			})
		},
	}
	for verb := range verbs {
		if cases[verb] == nil {
			t.Errorf("the chart's group Role grants %q, which no case shows to be needed", verb)
		}
	}
	for verb, run := range cases {
		t.Run("without "+verb, func(t *testing.T) {
			t.Parallel()
			if !verbs[verb] {
				t.Fatalf("the chart's group Role does not grant %q", verb)
			}
			ns := newNamespace(t, "group-no-"+verb)
			s := chartSidecar(t, ns, args...)
			run(t, s, s.fleet(t, ns, without(s.role, verb)))
		})
	}
}

// observerModes are the observer's renderings the tests run: one Lease,
// and a lease group.
var observerModes = map[string][]string{
	"single Lease": {"--set", "candidate=false"},
	"lease group":  {"--set", "candidate=false", "--set", "shards=2"},
}

// observed starts an admin-run candidate of s's Leases (the same settings,
// as a candidate) and waits until it holds every one; it returns the
// candidate and its identity.
func observed(t *testing.T, s chartSetup, ns string) (*fleet.Instance, string) {
	t.Helper()
	f := s.fleet(t, ns, nil)
	f.Env = slices.DeleteFunc(slices.Clone(f.Env), func(v string) bool { return strings.HasPrefix(v, "LEASEHOLD_CANDIDATE=") })
	leader := start(t, f, "leader")
	eventually(t, generous, "the candidate holds every Lease", func() bool { return len(heldBy(t, leader)) == len(s.leases) })
	return leader, identityOf(t, leader)
}

// With candidate=false, the chart's Role grants only list and watch on the
// Lease(s), by name: nothing that writes. With it, the real sidecar as an
// observer follows Leases held by an admin-run candidate (holder, token),
// keeps no member Lease, sees a release within a round trip, and nothing it
// asks is forbidden. For one Lease and for a group.
func TestChartObserverRoleFollowsWithoutWriting(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	for mode, args := range observerModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t, "observer")
			s := chartSidecar(t, ns, args...)
			if !slices.Contains(s.env, "LEASEHOLD_CANDIDATE=false") {
				t.Fatalf("env %v: want LEASEHOLD_CANDIDATE=false", s.env)
			}
			want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				ResourceNames: s.leases, Verbs: []string{"list", "watch"}}}
			if diff := ruleDiff(s.role.Rules, want); diff != "" {
				t.Fatalf("observer Role: %s", diff)
			}
			leader, id := observed(t, s, ns)
			tokens := map[string]int64{}
			for _, st := range groupState(t, leader).Leases {
				tokens[st.Lease] = int64(st.FencingToken)
			}
			obs := start(t, s.fleet(t, ns, s.role), "observer")
			eventually(t, 5*time.Second, "the observer reports every Lease held by the candidate, with its token", func() bool {
				l := groupState(t, obs)
				for _, st := range l.Leases {
					if st.Leader || st.Holder != id || int64(st.FencingToken) != tokens[st.Lease] {
						return false
					}
				}
				return len(l.Leases) == len(s.leases) && l.Members == nil
			})
			if s.group != "" {
				if got := members(t, ns, s.group); len(got) != 1 {
					t.Errorf("member Leases %v: want the candidate's only (an observer is no member)", got)
				}
			}
			if s.group == "" {
				if st, err := obs.Status(t.Context()); err != nil || st.Leader || st.Holder != id {
					t.Fatalf("observer /v1/status %+v (err %v): want holder %s, not leader", st, err, id)
				}
			}
			eventually(t, 5*time.Second, "the observer's watch is up", func() bool {
				return metric(t, obs, "leasehold_watch_up", nil) == float64(len(s.leases))
			})
			stopGracefully(t, leader)
			eventually(t, time.Second, "the observer sees every Lease released", func() bool {
				for _, st := range groupState(t, obs).Leases {
					if st.Holder != "" {
						return false
					}
				}
				return true
			})
			if n := forbidden(t, obs, ""); n != 0 {
				t.Errorf("observer: %v requests forbidden", n)
			}
			noForbiddenInLogs(t, obs)
		})
	}
}

// Each verb of the observer's Role is needed, for one Lease and for a
// group.
func TestEveryVerbOfTheObserverRoleIsNeeded(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	cases := map[string]func(t *testing.T, s chartSetup, f fleet.Config){
		// Nothing can be listed: no Lease is ever observed, so the observer
		// never gets ready and reports no holder.
		"list": func(t *testing.T, s chartSetup, f fleet.Config) {
			observed(t, s, f.Namespace)
			f.Unready = true
			inst := start(t, f, "observer")
			eventually(t, 5*time.Second, "a list is forbidden", func() bool { return forbidden(t, inst, "list") > 0 })
			whileRefusedTimes(t, inst, "list", watchers(s), func() { // twice each watcher
				if ready, err := inst.ReadyNow(t.Context()); err != nil || ready {
					t.Fatalf("/readyz: ready %v (err %v), want 503 without list", ready, err)
				}
			})
			for _, st := range groupState(t, inst).Leases {
				if st.Holder != "" {
					t.Errorf("Lease %s: reports holder %q it cannot have seen", st.Lease, st.Holder)
				}
			}
		},
		// It observes by listing, but no watch opens: it learns of a change
		// only when its watcher lists again (with a growing backoff).
		"watch": func(t *testing.T, s chartSetup, f fleet.Config) {
			inst := start(t, f, "observer")
			eventually(t, 5*time.Second, "a watch is forbidden", func() bool { return forbidden(t, inst, "watch") > 0 })
			whileRefusedTimes(t, inst, "watch", watchers(s), func() { // twice each watcher
				if up := metric(t, inst, "leasehold_watch_up", nil); up != 0 {
					t.Fatalf("leasehold_watch_up = %v without watch, want 0", up)
				}
			})
		},
	}
	for mode, args := range observerModes {
		verbs := verbsOf(chartSidecar(t, "probe", args...).role)
		for verb := range verbs {
			if cases[verb] == nil {
				t.Errorf("%s: the observer's Role grants %q, which no case shows to be needed", mode, verb)
			}
		}
		for verb, run := range cases {
			t.Run(mode+" without "+verb, func(t *testing.T) {
				t.Parallel()
				if !verbs[verb] {
					t.Fatalf("the observer's Role does not grant %q", verb)
				}
				ns := newNamespace(t, "observer-no-"+verb)
				s := chartSidecar(t, ns, args...)
				run(t, s, s.fleet(t, ns, without(s.role, verb)))
			})
		}
	}
}

// watchers is twice the number of watches s's sidecar opens: one on each
// Lease, and one on the member Leases of a group.
func watchers(s chartSetup) float64 {
	n := len(s.leases)
	if s.group != "" {
		n++
	}
	return float64(2 * n)
}

// With handover: successor on one Lease, the real sidecars, with the
// credentials of a user bound to nothing but the chart's rendered Role,
// keep member Leases under the Lease's name, and on the leader's SIGTERM
// the newest member leads: the handover went to it. No request is ever
// forbidden.
func TestChartHandoverRoleHandsToTheNewest(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	ns := newNamespace(t, "handover")
	s := chartSidecar(t, ns, "--set", "handover=successor")
	if !slices.Contains(s.env, "LEASEHOLD_HANDOVER=successor") || len(s.leases) != 1 {
		t.Fatalf("env %v, leases %v: want one Lease handed to a successor", s.env, s.leases)
	}
	f := s.fleet(t, ns, s.role)
	a := start(t, f, "a")
	eventually(t, generous, "a leads", func() bool { return len(heldBy(t, a)) == 1 })
	b := start(t, f, "b")
	c := start(t, f, "c")
	for _, inst := range []*fleet.Instance{a, b, c} {
		eventually(t, generous, inst.Name+" sees 3 members", func() bool {
			return metric(t, inst, "leasehold_members", nil) == 3
		})
	}
	if got := members(t, ns, s.lease); len(got) != 3 {
		t.Errorf("member Leases %v under %s, want 3", got, s.lease)
	}
	stopGracefully(t, a)
	eventually(t, generous, "c (the newest) leads", func() bool { return len(heldBy(t, c)) == 1 })
	if len(heldBy(t, b)) != 0 {
		t.Error("b leads too")
	}
	noForbiddenInLogs(t, a, b, c)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
