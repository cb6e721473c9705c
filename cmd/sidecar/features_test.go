package main_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/podlabel"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/pkg/api"
)

// app is a stand-in for the app container's health endpoint: it answers
// code, or refuses connections once closed (a crashed app).
type app struct {
	code   atomic.Int32
	server *httptest.Server
}

func newApp(t *testing.T, code int) *app {
	a := &app{}
	a.code.Store(int32(code))
	a.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(int(a.code.Load()))
	}))
	t.Cleanup(a.server.Close)
	return a
}

// Health probing timings of these tests: an unhealthy leader steps down
// after threshold × interval at most, well inside leaseDuration.
const (
	healthInterval  = 200 * time.Millisecond
	healthThreshold = 2
)

// withApp returns f with the app-health settings for a.
func withApp(f fleet.Config, a *app) fleet.Config {
	f.Env = append(slices.Clone(f.Env),
		"LEASEHOLD_APP_HEALTH_URL="+a.server.URL+"/healthz",
		"LEASEHOLD_APP_HEALTH_INTERVAL="+healthInterval.String(),
		"LEASEHOLD_APP_HEALTH_TIMEOUT=100ms",
		"LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD=2",
	)
	return f
}

// Health-gated candidacy, process level: an instance whose app is not
// healthy never leads and says why; when the leader's app turns unhealthy
// (here it crashes: connections refused), the leader steps down and
// releases, and the instance with a healthy app takes over well before the
// lease could have expired.
func TestAppHealthGatesCandidacy(t *testing.T) {
	f := newFleet(t)
	appA, appB := newApp(t, http.StatusOK), newApp(t, http.StatusServiceUnavailable)
	a := start(t, withApp(f, appA), "a")
	b := start(t, withApp(f, appB), "b")
	both := []*fleet.Instance{a, b}

	leader, _, err := fleet.WaitLeader(t.Context(), both, 10*time.Millisecond)
	if err != nil || leader != a {
		t.Fatalf("leader %v (err %v), want a: b's app is unhealthy", leader, err)
	}
	st := waitStatus(t, b, "b reports its unhealthy app", func(st api.Status) bool {
		return st.AppHealth != nil && st.AppHealth.ConsecutiveFailures >= healthThreshold
	})
	if st.Candidate || st.AppHealth.Healthy || st.AppHealth.LastError != "status 503" || st.AppHealth.LastSuccessAt != "" {
		t.Errorf("b: candidate=%v appHealth=%+v; want out of the election, unhealthy after status 503, never healthy", st.Candidate, *st.AppHealth)
	}

	appB.code.Store(http.StatusNoContent)
	waitStatus(t, b, "b is a candidate again", func(st api.Status) bool {
		return st.Candidate && st.AppHealth != nil && st.AppHealth.Healthy
	})
	if st, err := b.Status(t.Context()); err != nil || st.Leader {
		t.Fatalf("b leads (err %v) while a, healthy, holds the Lease", err)
	}
	before, err := a.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	writes := watchLease(t, f.Namespace, "app")
	crashed := time.Now()
	appA.server.CloseClientConnections()
	appA.server.Listener.Close() // refused from now on: a crash-looping app
	_, after, err := fleet.WaitLeader(t.Context(), []*fleet.Instance{b}, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(crashed)
	t.Logf("b leads %v after a's app crashed (threshold %d × interval %v); token %d → %d", took, healthThreshold, healthInterval, before.FencingToken, after.FencingToken)
	// a released (the first write not naming it is its own signed
	// release): b did not wait for the Lease to expire.
	release := writes.next(t, "a write that does not name a", func(l *coordinationv1.Lease) bool { return holderOf(l) != before.Identity })
	if holderOf(release) != "" || release.Annotations[elect.ReleasedByAnnotation] != before.Identity {
		t.Errorf("first write after the crash not naming a: holder %q, %s %q; want a's own release",
			holderOf(release), elect.ReleasedByAnnotation, release.Annotations[elect.ReleasedByAnnotation])
	}
	// The promise is a takeover within about threshold × interval plus a
	// handover (600ms here); several times that, so that only a step-down
	// that waits for something else, not a loaded machine, exceeds it.
	if bound := 5 * (healthThreshold*healthInterval + healthInterval); took > bound {
		t.Errorf("takeover %v after the crash, want within 5 × (threshold × interval + one interval) = %v", took, bound)
	}
	if after.FencingToken <= before.FencingToken {
		t.Errorf("b's token %d not above a's %d", after.FencingToken, before.FencingToken)
	}
	st, err = a.Status(t.Context())
	if err != nil || st.Leader || st.Candidate || st.AppHealth == nil || st.AppHealth.Healthy {
		t.Errorf("a after its app crashed: %+v (err %v); want neither leader nor candidate, unhealthy", st, err)
	}
	m, err := a.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantElectionLabels(t, m, st.Namespace, st.Lease)
	if m.Sum("leasehold_app_healthy", nil) != 0 || m.Sum("leasehold_candidate", nil) != 0 ||
		m.Sum("leasehold_app_health_checks_total", map[string]string{"result": "failure"}) < healthThreshold {
		t.Errorf("a's metrics: app_healthy %v candidate %v failures %v", m.Sum("leasehold_app_healthy", nil),
			m.Sum("leasehold_candidate", nil), m.Sum("leasehold_app_health_checks_total", map[string]string{"result": "failure"}))
	}
}

// waitStatus polls inst's status until cond holds.
func waitStatus(t *testing.T, inst *fleet.Instance, what string, cond func(api.Status) bool) api.Status {
	t.Helper()
	var st api.Status
	var err error
	eventually(t, what, func() bool {
		st, err = inst.Status(t.Context())
		return err == nil && cond(st)
	}, func() string { return fmt.Sprintf("last status %+v (err %v)", st, err) })
	return st
}

const leaderLabel = "leasehold.io/leader"

// The leader label, process level: after start-up, a handover (SIGTERM), a
// failover (SIGKILL: the dead leader cannot take its own label off) and a
// crash-restart (the killed instance back, with a stale "true" put on its
// Pod by hand), exactly the leader's Pod carries "true" and every other
// Pod "false", each with the election label naming the Lease.
func TestPodLabelFollowsLeadership(t *testing.T) {
	f := newFleet(t)
	f.Env = append(f.Env, "LEASEHOLD_POD_LABEL="+leaderLabel)
	pods := cluster.Clientset().CoreV1().Pods(f.Namespace)
	names := []string{"a", "b", "c"}
	// No controller manager runs to create the default ServiceAccount that
	// admission looks up for every Pod.
	if _, err := cluster.Clientset().CoreV1().ServiceAccounts(f.Namespace).Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, err := pods.Create(t.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "demo"}},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: new(false),
				Containers:                   []corev1.Container{{Name: "app", Image: "example.com/app:1"}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setLabel := func(pod, value string) {
		t.Helper()
		patch := `{"metadata":{"labels":{"` + leaderLabel + `":"` + value + `"}}}`
		if _, err := pods.Patch(t.Context(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// onlyLeaderLabelled waits until exactly leader's Pod says "true" and
	// every other Pod "false", and every Pod carries the election label
	// (the Lease's name, which lives in the Pods' namespace).
	onlyLeaderLabelled := func(what string, leader *fleet.Instance) {
		t.Helper()
		var got, elections map[string]string
		eventually(t, what+": true on "+leader.Name+" only, and "+podlabel.LeaseKey+"="+f.Lease+" on every Pod", func() bool {
			got, elections = map[string]string{}, map[string]string{}
			list, err := pods.List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ok := len(list.Items) == len(names)
			for _, p := range list.Items {
				got[p.Name] = p.Labels[leaderLabel]
				elections[p.Name] = p.Labels[podlabel.LeaseKey]
				want := "false"
				if p.Name == leader.Name {
					want = "true"
				}
				ok = ok && got[p.Name] == want && elections[p.Name] == f.Lease
			}
			return ok
		}, func() string { return fmt.Sprintf("labels %v, election labels %v", got, elections) })
	}
	waitLeader := func(instances ...*fleet.Instance) *fleet.Instance {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		leader, _, err := fleet.WaitLeader(ctx, instances, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return leader
	}

	// Start-up: c's Pod carries a stale "true" from a previous life.
	setLabel("c", "true")
	instances := map[string]*fleet.Instance{}
	for _, name := range names {
		instances[name] = start(t, f, name)
	}
	all := func() []*fleet.Instance {
		return []*fleet.Instance{instances["a"], instances["b"], instances["c"]}
	}
	leader := waitLeader(all()...)
	onlyLeaderLabelled("start-up", leader)

	// Handover: SIGTERM the leader; it takes its own label off on the way out.
	if err := leader.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-leader.Exited()
	rest := slices.DeleteFunc(all(), func(i *fleet.Instance) bool { return i == leader })
	stopped := leader
	leader = waitLeader(rest...)
	onlyLeaderLabelled("handover", leader)
	instances[stopped.Name] = start(t, f, stopped.Name)

	// Failover: SIGKILL the leader; its "true" stays until the next leader
	// clears it.
	leader.Stop()
	rest = slices.DeleteFunc(all(), func(i *fleet.Instance) bool { return i == leader })
	killed := leader
	leader = waitLeader(rest...)
	onlyLeaderLabelled("failover", leader)

	// Crash-restart: the killed instance comes back to a stale "true".
	setLabel(killed.Name, "true")
	instances[killed.Name] = start(t, f, killed.Name)
	onlyLeaderLabelled("crash-restart", leader)
	if leader != waitLeader(all()...) {
		t.Fatal("leadership moved during the crash-restart")
	}
	m, err := leader.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if m["leasehold_pod_label_leader"] == nil {
		t.Error("no leasehold_pod_label_leader in the leader's metrics")
	}
	wantElectionLabels(t, m, f.Namespace, f.Lease)
}

// wantElectionLabels checks that every leasehold_* series of a scrape, and
// client-go's leader_election_master_status, carries the election's
// namespace and lease (constant labels, so alerts and dashboards group by
// Lease), and that the Go runtime's and the process's series do not.
func wantElectionLabels(t *testing.T, m fleet.Metrics, namespace, lease string) {
	t.Helper()
	var leasehold int
	for name, family := range m {
		ours := strings.HasPrefix(name, "leasehold_") || name == "leader_election_master_status"
		if ours {
			leasehold++
		}
		for _, metric := range family.GetMetric() {
			got := map[string]string{}
			for _, l := range metric.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			switch {
			case ours && (got["namespace"] != namespace || got["lease"] != lease):
				t.Errorf("%s%v: want namespace=%q, lease=%q", name, got, namespace, lease)
			case !ours && (got["namespace"] != "" || got["lease"] != ""):
				t.Errorf("%s%v: the process's own series carries the election's labels", name, got)
			}
		}
	}
	if leasehold < 15 {
		t.Errorf("only %d leasehold families in the scrape", leasehold)
	}
}

// scriptedApp is a health endpoint that answers its probes from a script,
// one status per probe, the last one for every probe after; the test
// replaces the script at will. It records when it answered each probe.
type scriptedApp struct {
	mu       sync.Mutex
	script   []int
	answered []time.Time // when each probe was answered, in order
	server   *httptest.Server
}

func newScriptedApp(t *testing.T, script ...int) *scriptedApp {
	a := &scriptedApp{script: script}
	a.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		code := a.script[0]
		if len(a.script) > 1 {
			a.script = a.script[1:]
		}
		a.answered = append(a.answered, time.Now())
		a.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(a.server.Close)
	return a
}

// play replaces the script and returns the number of probes answered
// before.
func (a *scriptedApp) play(script ...int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.script = script
	return len(a.answered)
}

// probe is when probe n (counted from 0) was answered, and ok once it
// was; probes is how many were answered.
func (a *scriptedApp) probe(n int) (at time.Time, ok bool, probes int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n >= len(a.answered) {
		return time.Time{}, false, len(a.answered)
	}
	return a.answered[n], true, len(a.answered)
}

// Damping, process level: with LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD=3
// (failure threshold 2), a leader whose app check starts to flap steps
// down and releases once 2 probes in a row fail, and then writes nothing
// while the check goes on flapping with never 3 passes in a row: the first
// write naming it again comes only after the third pass in a row of the
// script's end. Without damping, its first passing probe would put it back
// in the election and it would take the released Lease at once.
func TestAppHealthDampingKeepsAFlappingAppOut(t *testing.T) {
	f := newFleet(t)
	app := newScriptedApp(t, http.StatusOK)
	f.Env = append(slices.Clone(f.Env),
		"LEASEHOLD_APP_HEALTH_URL="+app.server.URL+"/healthz",
		"LEASEHOLD_APP_HEALTH_INTERVAL="+healthInterval.String(),
		"LEASEHOLD_APP_HEALTH_TIMEOUT=100ms",
		"LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD=2",
		"LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD=3",
	)
	a, st := startLeader(t, f, "a")

	writes := watchLease(t, f.Namespace, "app")
	flap := []int{503, 503, 200, 503, 200, 200, 503, 204, 503, 200, 200, 500, 200, 503}
	script := append(slices.Clone(flap), 200, 200, 200)
	first := app.play(script...)
	rejoin := first + len(script) - 1 // the third pass in a row at the script's end

	release := writes.next(t, "a's release", func(l *coordinationv1.Lease) bool { return holderOf(l) != st.Identity })
	if holderOf(release) != "" || release.Annotations[elect.ReleasedByAnnotation] != st.Identity {
		t.Fatalf("first write not naming a: holder %q, %s %q; want a's own release", holderOf(release),
			elect.ReleasedByAnnotation, release.Annotations[elect.ReleasedByAnnotation])
	}
	writes.next(t, "a write naming a again", func(l *coordinationv1.Lease) bool { return holderOf(l) == st.Identity })
	seen := time.Now()
	if at, ok, probes := app.probe(rejoin); !ok || at.After(seen) {
		t.Fatalf("a took the Lease again before its app passed 3 probes in a row: after %d of the script's %d probes",
			probes-first, len(script))
	}
	if _, after, err := fleet.WaitLeader(t.Context(), []*fleet.Instance{a}, 10*time.Millisecond); err != nil || after.FencingToken <= st.FencingToken {
		t.Fatalf("a leads again with token %d (err %v), want above %d", after.FencingToken, err, st.FencingToken)
	}
}
