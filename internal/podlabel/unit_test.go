package podlabel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/rule"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// Narrow unit tests on a fake clock and a fake clientset: they prove the
// loop's timing and what it sends (a fake clientset cannot prove the
// apiserver's rules, which the integration tests do).

const (
	unitNS     = "ns"
	unitPod    = "a"
	unitKey    = "leasehold.io/leader"
	unitLease  = "orders" // in unitNS: the election label's value is the name
	unitGroup  = "shop"   // the lease group of group-mode tests, in unitNS
	unitRetry  = 2 * time.Second
	unitResync = 15 * time.Second
)

// publisherSource adapts a hand-driven Publisher to Source.
type publisherSource struct{ *elect.Publisher }

func (p publisherSource) Snapshot() *elect.Snapshot { return p.Load() }

// idleRecorder counts the times the loop blocked, and with what timer.
type idleRecorder struct {
	mu    sync.Mutex
	n     int
	wake  time.Time
	armed bool
}

func (r *idleRecorder) record(wake time.Time, armed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.wake, r.armed = wake, armed
}

func (r *idleRecorder) get() (int, time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.wake, r.armed
}

type unitEnv struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	cs      *fake.Clientset
	pub     *elect.Publisher
	metrics *Metrics
	idle    idleRecorder
	cancel  context.CancelFunc
	done    chan error
	term    fence.Token
	group   string // the Labeler's Group: "" for a single Lease
}

// leaderKey is the label the Labeler keeps: unitKey, or its Lease's key in
// a group.
func (e *unitEnv) leaderKey() string {
	if e.group != "" {
		return GroupLeaderKey(unitKey, unitLease)
	}
	return unitKey
}

// electionLabel is the election label the Labeler writes on its own Pod.
func (e *unitEnv) electionLabel() labels.Set {
	if e.group != "" {
		return labels.Set{GroupKey: e.group}
	}
	return labels.Set{LeaseKey: unitLease}
}

// newUnitEnv creates Pods (name → label value, "" for none) in a fake
// clientset, and a Publisher that stands in for the Elector. A Pod with a
// value carries the election label of unitLease too, as its Labeler writes
// it.
func newUnitEnv(t *testing.T, pods map[string]string) *unitEnv {
	t.Helper()
	withLabels := map[string]map[string]string{}
	for name, v := range pods {
		withLabels[name] = nil
		if v != "" {
			withLabels[name] = map[string]string{unitKey: v, LeaseKey: unitLease}
		}
	}
	return newUnitEnvLabels(t, withLabels)
}

// newUnitEnvLabels is newUnitEnv with each Pod's labels given in full.
func newUnitEnvLabels(t *testing.T, pods map[string]map[string]string) *unitEnv {
	t.Helper()
	var objs []runtime.Object
	for name, l := range pods {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: unitNS, Labels: l}})
	}
	return &unitEnv{
		t:       t,
		clock:   clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		cs:      fake.NewClientset(objs...),
		pub:     elect.NewPublisher(elect.Snapshot{Identity: "a"}),
		metrics: NewMetrics(nil),
		done:    make(chan error, 1),
	}
}

// failPatches makes patches of pod fail while fail returns an error.
func (e *unitEnv) failPatches(fail func(pod string) error) {
	e.cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if err := fail(a.(k8stesting.PatchAction).GetName()); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
}

func (e *unitEnv) start() {
	e.t.Helper()
	l, err := New(Config{
		Pods: e.cs.CoreV1().Pods(unitNS), Namespace: unitNS, PodName: unitPod, Key: unitKey,
		LeaseNamespace: unitNS, LeaseName: unitLease, Group: e.group, Source: publisherSource{e.pub}, RetryPeriod: unitRetry, Resync: unitResync,
		Clock: e.clock, Metrics: e.metrics,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	l.idle = e.idle.record
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.done <- l.Run(ctx) }()
	e.t.Cleanup(func() { e.stop() })
}

// stop cancels Run and waits for it to return.
func (e *unitEnv) stop() {
	e.t.Helper()
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Errorf("Run: %v", err)
		}
		e.done <- nil
	case <-time.After(generous):
		e.t.Fatal("Run did not return after cancel")
	}
}

// lead publishes a new term (valid for an hour of fake time); follow ends it.
func (e *unitEnv) lead() {
	e.term++
	e.pub.Publish(elect.Snapshot{Identity: "a", Leading: true, Holder: "a", Token: e.term, ValidUntil: e.clock.Now().Add(time.Hour)})
}

func (e *unitEnv) follow() { e.pub.Publish(elect.Snapshot{Identity: "a", Holder: "b"}) }

// waitIdle waits (in real time) until the loop has blocked more than after
// times, and returns the count and its timer.
func (e *unitEnv) waitIdle(after int) (int, time.Time, bool) {
	e.t.Helper()
	var n int
	var wake time.Time
	var armed bool
	poll.UntilReport(e.t, generous, time.Millisecond, fmt.Sprintf("the loop blocked again after %d times", after), func() bool {
		n, wake, armed = e.idle.get()
		return n > after
	}, func() string { return "actions " + e.describe() })
	return n, wake, armed
}

// act does something to the loop and waits until it has blocked again.
func (e *unitEnv) act(do func()) (time.Time, bool) {
	e.t.Helper()
	n, _, _ := e.idle.get()
	do()
	_, wake, armed := e.waitIdle(n)
	return wake, armed
}

type sent struct {
	verb, pod, value, rv string
}

// sent returns the pod requests sent so far: patches with their label
// value and resourceVersion precondition, and lists. It checks that every
// patch sets only the leader label and, on the own Pod, the election
// label, and that every list selects this election's true.
func (e *unitEnv) sent() []sent {
	e.t.Helper()
	var out []sent
	for _, a := range e.cs.Actions() {
		if a.GetResource() != (schema.GroupVersionResource{Version: "v1", Resource: "pods"}) {
			continue
		}
		switch a := a.(type) {
		case k8stesting.PatchAction:
			var p struct {
				Metadata struct {
					ResourceVersion string            `json:"resourceVersion"`
					Labels          map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(a.GetPatch(), &p); err != nil {
				e.t.Fatalf("patch %s is not JSON: %v", a.GetPatch(), err)
			}
			value, valueSet := p.Metadata.Labels[e.leaderKey()]
			want := labels.Set{e.leaderKey(): value}
			if a.GetName() == unitPod {
				want = labels.Merge(want, e.electionLabel())
			}
			if !valueSet || !labels.Equals(p.Metadata.Labels, want) {
				e.t.Errorf("patch %s of %s sets labels %v, want %v", a.GetPatch(), a.GetName(), p.Metadata.Labels, want)
			}
			out = append(out, sent{"patch", a.GetName(), value, p.Metadata.ResourceVersion})
		case k8stesting.ListAction:
			selector := labels.SelectorFromSet(labels.Merge(labels.Set{e.leaderKey(): "true"}, e.electionLabel())).String()
			if sel := a.GetListRestrictions().Labels.String(); sel != selector {
				e.t.Errorf("list with selector %q, want %q", sel, selector)
			}
			out = append(out, sent{verb: "list"})
		}
	}
	return out
}

func (e *unitEnv) describe() string {
	var b strings.Builder
	for _, s := range e.sent() {
		b.WriteString(s.verb + " " + s.pod + "=" + s.value + "; ")
	}
	return b.String()
}

func (e *unitEnv) label(pod string) string {
	e.t.Helper()
	p, err := e.cs.CoreV1().Pods(unitNS).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Labels[e.leaderKey()]
}

func patchOf(pod, value string) sent { return sent{verb: "patch", pod: pod, value: value} }

var list = sent{verb: "list"}

func expectSent(t *testing.T, got []sent, want ...sent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	for i := range want {
		if got[i].verb != want[i].verb || got[i].pod != want[i].pod || got[i].value != want[i].value {
			t.Fatalf("sent %v, want %v", got, want)
		}
	}
}

// At start the value on the Pod is unknown (a crash may have left true):
// the follower writes false at once. Then, with nothing changing, it arms no
// timer at all: it writes and lists nothing however much time passes.
func TestStartupRepairsOnceThenStaysQuiet(t *testing.T) {
	e := newUnitEnv(t, map[string]string{unitPod: "true"})
	e.start()
	_, _, armed := e.waitIdle(0)
	if armed {
		t.Fatal("follower with its label written armed a timer")
	}
	expectSent(t, e.sent(), patchOf(unitPod, "false"))
	if got := e.label(unitPod); got != "false" {
		t.Fatalf("label %q after the start-up repair, want false", got)
	}
	// A renewal (which does not even wake the loop) and a day of time
	// change nothing.
	e.pub.Publish(elect.Snapshot{Identity: "a", RenewedAt: e.clock.Now()})
	e.clock.Step(24 * time.Hour)
	if e.clock.HasWaiters() {
		t.Fatal("the loop waits on the clock while nothing is due")
	}
	e.act(func() { e.follow() }) // a change of holder, still following
	expectSent(t, e.sent(), patchOf(unitPod, "false"))
	if g := value(e.metrics.leader); g != 0 {
		t.Errorf("leader gauge %v, want 0", g)
	}
}

// A failed write is retried after RetryPeriod, not before, and what is
// written then is the latest desired value: the changes that arrived in
// between are coalesced into one write.
func TestRetryAfterFailureWritesOnlyTheLatestValue(t *testing.T) {
	e := newUnitEnv(t, map[string]string{unitPod: ""})
	var mu sync.Mutex
	failing := true
	e.failPatches(func(string) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return errors.New("connection reset by peer")
		}
		return nil
	})
	start := e.clock.Now()
	e.start()
	_, wake, armed := e.waitIdle(0)
	if !armed || !wake.Equal(start.Add(unitRetry)) {
		t.Fatalf("after a failed write the loop waits until %v (armed %v); want %v", wake, armed, start.Add(unitRetry))
	}
	if f := value(e.metrics.failures); f != 1 {
		t.Fatalf("failures %v, want 1", f)
	}
	mu.Lock()
	failing = false
	mu.Unlock()

	for _, change := range []func(){e.lead, e.follow, e.lead, e.follow, e.lead} {
		if wake, _ := e.act(change); !wake.Equal(start.Add(unitRetry)) {
			t.Fatalf("a change moved the retry to %v", wake)
		}
	}
	e.clock.Step(unitRetry - time.Nanosecond)
	e.act(e.follow) // still before the retry: nothing is sent
	e.act(e.lead)
	expectSent(t, e.sent(), patchOf(unitPod, "false"))

	e.act(func() { e.clock.Step(time.Nanosecond) })
	expectSent(t, e.sent(), patchOf(unitPod, "false"), patchOf(unitPod, "true"), list)
	if got := e.label(unitPod); got != "true" {
		t.Fatalf("label %q, want true", got)
	}
	if g := value(e.metrics.leader); g != 1 {
		t.Errorf("leader gauge %v, want 1", g)
	}
}

// When the context ends, the Labeler writes false once more if the Pod may
// carry true (true written, or a write that failed), and not otherwise.
func TestFinalFalseOnContextEnd(t *testing.T) {
	t.Run("leader", func(t *testing.T) {
		e := newUnitEnv(t, map[string]string{unitPod: ""})
		e.lead()
		e.start()
		e.waitIdle(0)
		expectSent(t, e.sent(), patchOf(unitPod, "true"), list)
		e.stop()
		expectSent(t, e.sent(), patchOf(unitPod, "true"), list, patchOf(unitPod, "false"))
		if got := e.label(unitPod); got != "false" {
			t.Fatalf("label %q after shutdown, want false", got)
		}
		if g := value(e.metrics.leader); g != 0 {
			t.Errorf("leader gauge %v after shutdown, want 0", g)
		}
	})
	t.Run("follower", func(t *testing.T) {
		e := newUnitEnv(t, map[string]string{unitPod: ""})
		e.start()
		e.waitIdle(0)
		e.stop()
		expectSent(t, e.sent(), patchOf(unitPod, "false"))
	})
	t.Run("after a failed write", func(t *testing.T) {
		e := newUnitEnv(t, map[string]string{unitPod: "true"})
		var calls int
		e.failPatches(func(string) error {
			calls++ // the loop's goroutine alone patches
			if calls == 1 {
				return apierrors.NewServiceUnavailable("etcd leader changed")
			}
			return nil
		})
		e.start()
		e.waitIdle(0)
		e.stop()
		expectSent(t, e.sent(), patchOf(unitPod, "false"), patchOf(unitPod, "false"))
		if got := e.label(unitPod); got != "false" {
			t.Fatalf("label %q after shutdown, want false", got)
		}
	})
}

// The leader lists (and clears) when its term starts and every Resync while
// it leads; a follower never lists.
func TestResyncListsOnlyWhileLeading(t *testing.T) {
	e := newUnitEnv(t, map[string]string{unitPod: ""})
	e.start()
	e.waitIdle(0)
	e.clock.Step(3 * unitResync)
	expectSent(t, e.sent(), patchOf(unitPod, "false"))

	wake, armed := e.act(e.lead)
	expectSent(t, e.sent(), patchOf(unitPod, "false"), patchOf(unitPod, "true"), list)
	if !armed || !wake.Equal(e.clock.Now().Add(unitResync)) {
		t.Fatalf("leader's next wake %v (armed %v), want now + resync", wake, armed)
	}
	e.act(func() { e.clock.Step(unitResync) })
	expectSent(t, e.sent(), patchOf(unitPod, "false"), patchOf(unitPod, "true"), list, list)

	// A new term without a step-down the loop saw (coalesced) counts as a
	// new term: clear at once.
	e.act(e.lead)
	expectSent(t, e.sent(), patchOf(unitPod, "false"), patchOf(unitPod, "true"), list, list, list)

	_, armed = e.act(e.follow)
	if armed {
		t.Fatal("follower armed a timer")
	}
	e.clock.Step(3 * unitResync)
	e.act(func() { e.pub.Publish(elect.Snapshot{Identity: "a", Holder: "c"}) })
	expectSent(t, e.sent(), patchOf(unitPod, "false"), patchOf(unitPod, "true"), list, list, list, patchOf(unitPod, "false"))
}

// The leader's Snapshot can say Leading after its validity ran out, until
// the Elector publishes the step-down: the own value follows Leading, but
// no other Pod is touched without valid leadership.
func TestCleanupNeedsValidLeadership(t *testing.T) {
	e := newUnitEnv(t, map[string]string{unitPod: "", "b": "true"})
	e.pub.Publish(elect.Snapshot{Identity: "a", Leading: true, Holder: "a", Token: 1, ValidUntil: e.clock.Now()})
	e.start()
	_, wake, armed := e.waitIdle(0)
	expectSent(t, e.sent(), patchOf(unitPod, "true"))
	if !armed || !wake.Equal(e.clock.Now().Add(unitRetry)) {
		t.Fatalf("wake %v (armed %v), want a check after retryPeriod", wake, armed)
	}
	e.act(func() { e.follow() })
	expectSent(t, e.sent(), patchOf(unitPod, "true"), patchOf(unitPod, "false"))
	if got := e.label("b"); got != "true" {
		t.Fatalf("b's label %q: touched without valid leadership", got)
	}
}

// Cleanup sets every other Pod that carries true to false, conditional on
// the listed resourceVersion, and leaves the own Pod and the others alone.
// A conflict (the Pod changed since the list) brings the next cleanup
// forward to RetryPeriod. If the own Pod no longer carries true, the
// leader writes it again.
func TestCleanupClearsOthersAndRestoresOwn(t *testing.T) {
	e := newUnitEnv(t, map[string]string{unitPod: "", "b": "true", "c": "true", "d": "false", "e": ""})
	conflictOnce := true
	e.failPatches(func(pod string) error {
		if pod == "c" && conflictOnce {
			conflictOnce = false
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "c", errors.New("the object has been modified"))
		}
		return nil
	})
	e.lead()
	e.start()
	_, wake, _ := e.waitIdle(0)
	got := e.sent()
	expectSent(t, got, patchOf(unitPod, "true"), list, patchOf("b", "false"), patchOf("c", "false"))
	if got[0].rv != "" {
		t.Errorf("own patch carries a precondition %q", got[0].rv)
	}
	if !wake.Equal(e.clock.Now().Add(unitRetry)) {
		t.Fatalf("after a conflict the next cleanup is at %v, want now + retryPeriod", wake)
	}
	e.act(func() { e.clock.Step(unitRetry) })
	expectSent(t, e.sent()[4:], list, patchOf("c", "false"))
	for pod, want := range map[string]string{unitPod: "true", "b": "false", "c": "false", "d": "false", "e": ""} {
		if got := e.label(pod); got != want {
			t.Errorf("pod %s: label %q, want %q", pod, got, want)
		}
	}
	if c := value(e.metrics.cleared); c != 2 {
		t.Errorf("cleared %v, want 2", c)
	}
	if f := value(e.metrics.failures); f != 0 {
		t.Errorf("failures %v, want 0 (a conflict is not a failure)", f)
	}

	// Someone sets the leader's own label to false, or removes its election
	// label: the next resync sees the own Pod missing from the list and
	// writes both again.
	for what, edit := range map[string]func(map[string]string){
		"leader label false":     func(l map[string]string) { l[unitKey] = "false" },
		"election label removed": func(l map[string]string) { delete(l, LeaseKey) },
	} {
		e.editByHand(unitPod, edit)
		before := len(e.sent())
		e.act(func() { e.clock.Step(unitResync) })
		expectSent(t, e.sent()[before:], list, patchOf(unitPod, "true"))
		p, err := e.cs.CoreV1().Pods(unitNS).Get(context.Background(), unitPod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Labels[unitKey] != "true" || p.Labels[LeaseKey] != unitLease {
			t.Errorf("%s: own labels %v after resync, want both restored", what, p.Labels)
		}
	}
}

// editByHand changes a Pod's labels in the fake's store directly, as
// someone other than the Labeler would: no action is recorded.
func (e *unitEnv) editByHand(pod string, edit func(map[string]string)) {
	e.t.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	obj, err := e.cs.Tracker().Get(gvr, unitNS, pod)
	if err != nil {
		e.t.Fatal(err)
	}
	p := obj.(*corev1.Pod).DeepCopy()
	edit(p.Labels)
	if err := e.cs.Tracker().Update(gvr, p, unitNS); err != nil {
		e.t.Fatal(err)
	}
}

// Cleanup touches only this election's Pods: another app's (another
// Lease's) true in the same namespace, one of a Lease with the same name in
// another namespace, and one written by a leasehold that wrote no election
// label all stay true, at acquisition and at every resync.
func TestCleanupTouchesOnlyItsOwnElection(t *testing.T) {
	e := newUnitEnvLabels(t, map[string]map[string]string{
		unitPod:     nil,
		"same":      {unitKey: "true", LeaseKey: unitLease},
		"other-app": {unitKey: "true", LeaseKey: "payments"},
		"elsewhere": {unitKey: "true", LeaseKey: "platform_" + unitLease},
		"legacy":    {unitKey: "true"},
	})
	e.lead()
	e.start()
	e.waitIdle(0)
	expectSent(t, e.sent(), patchOf(unitPod, "true"), list, patchOf("same", "false"))
	e.act(func() { e.clock.Step(unitResync) })
	e.act(func() { e.clock.Step(unitResync) })
	expectSent(t, e.sent(), patchOf(unitPod, "true"), list, patchOf("same", "false"), list, list)
	for pod, want := range map[string]string{unitPod: "true", "same": "false", "other-app": "true", "elsewhere": "true", "legacy": "true"} {
		if got := e.label(pod); got != want {
			t.Errorf("pod %s: label %q, want %q", pod, got, want)
		}
	}
	p, err := e.cs.CoreV1().Pods(unitNS).Get(context.Background(), unitPod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Labels[LeaseKey]; got != unitLease {
		t.Errorf("own Pod's election label %q, want %q", got, unitLease)
	}
	if c := value(e.metrics.cleared); c != 1 {
		t.Errorf("cleared %v, want 1", c)
	}
}

// In a lease group the Labeler of a Lease keeps that Lease's key, writes
// the group's election label (not the single Lease's) on its own Pod, and
// its cleanup clears only its key on the Pods of its group: not another
// Lease's key, not another group's Pods, not the Pods of a single Lease
// whose key or Lease name is the same.
func TestGroupLabelerKeepsItsLeasesKeyInItsGroup(t *testing.T) {
	key, other := GroupLeaderKey(unitKey, unitLease), GroupLeaderKey(unitKey, "payments")
	if key != "leasehold.io/leader-orders" {
		t.Fatalf("GroupLeaderKey = %q", key)
	}
	e := newUnitEnvLabels(t, map[string]map[string]string{
		unitPod:       nil,
		"same":        {key: "true", other: "true", GroupKey: unitGroup},
		"other-lease": {other: "true", GroupKey: unitGroup},
		"other-group": {key: "true", GroupKey: "cart"},
		"single":      {key: "true", LeaseKey: unitLease},
		"single-base": {unitKey: "true", LeaseKey: unitLease},
	})
	e.group = unitGroup
	e.lead()
	e.start()
	e.waitIdle(0)
	expectSent(t, e.sent(), patchOf(unitPod, "true"), list, patchOf("same", "false"))
	e.act(func() { e.clock.Step(unitResync) })
	e.act(e.follow)
	expectSent(t, e.sent(), patchOf(unitPod, "true"), list, patchOf("same", "false"), list, patchOf(unitPod, "false"))
	pods, err := e.cs.CoreV1().Pods(unitNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]labels.Set{
		unitPod:       {key: "false", GroupKey: unitGroup},
		"same":        {key: "false", other: "true", GroupKey: unitGroup},
		"other-lease": {other: "true", GroupKey: unitGroup},
		"other-group": {key: "true", GroupKey: "cart"},
		"single":      {key: "true", LeaseKey: unitLease},
		"single-base": {unitKey: "true", LeaseKey: unitLease},
	}
	for _, p := range pods.Items {
		if got := labels.Set(p.Labels); !labels.Equals(got, want[p.Name]) {
			t.Errorf("pod %s: labels %v, want %v", p.Name, got, want[p.Name])
		}
	}
}

// TestNewRejectsBadConfig is the table of Config's rules (Validate), plus
// the clients New needs: each broken rule is reported naming the field it
// is about, with its value.
func TestNewRejectsBadConfig(t *testing.T) {
	good := func() Config {
		return Config{
			Pods: fake.NewClientset().CoreV1().Pods("ns"), Namespace: "ns", PodName: "p", Key: "leasehold.io/leader",
			LeaseNamespace: "ns", LeaseName: "orders",
			Source: publisherSource{elect.NewPublisher(elect.Snapshot{})}, RetryPeriod: time.Second, Resync: time.Second,
		}
	}
	if _, err := New(good()); err != nil {
		t.Fatalf("good config: %v", err)
	}
	longest := good()
	longest.Group, longest.LeaseName = "shop", strings.Repeat("a", 56) // leader-aaa…: 63 characters
	if _, err := New(longest); err != nil {
		t.Fatalf("group config with the longest key: %v", err)
	}
	for name, tc := range map[string]struct {
		change func(*Config)
		want   string
		field  string // the field the *rule.Error is about; "" for a missing client
	}{
		"no client":           {func(c *Config) { c.Pods = nil }, "podlabel: Pods client is required", ""},
		"no source":           {func(c *Config) { c.Source = nil }, "podlabel: Source is required", ""},
		"no namespace":        {func(c *Config) { c.Namespace = "" }, `podlabel: the Pod's namespace "" is required`, "Namespace"},
		"bad namespace":       {func(c *Config) { c.Namespace = "Bad" }, `podlabel: the Pod's namespace "Bad" is not a valid DNS label: `, "Namespace"},
		"no pod name":         {func(c *Config) { c.PodName = "" }, `podlabel: podName "" is required`, "PodName"},
		"bad pod name":        {func(c *Config) { c.PodName = "Pod_1" }, `podlabel: podName "Pod_1" is not a valid Pod name: `, "PodName"},
		"empty key":           {func(c *Config) { c.Key = "" }, `podlabel: "" is not a valid label key: `, "Key"},
		"key with a space":    {func(c *Config) { c.Key = "leader label" }, `"leader label" is not a valid label key`, "Key"},
		"key with two slash":  {func(c *Config) { c.Key = "a/b/c" }, `"a/b/c" is not a valid label key`, "Key"},
		"bad prefix":          {func(c *Config) { c.Key = "Leasehold_IO/leader" }, `"Leasehold_IO/leader" is not a valid label key`, "Key"},
		"prefix only":         {func(c *Config) { c.Key = "leasehold.io/" }, `"leasehold.io/" is not a valid label key`, "Key"},
		"election key":        {func(c *Config) { c.Key = LeaseKey }, `podlabel: "leasehold.io/lease" is the election label that leasehold writes next to the leader label; choose another key, such as leasehold.io/leader`, "Key"},
		"no lease namespace":  {func(c *Config) { c.LeaseNamespace = "" }, `the Lease's namespace "" is not a valid DNS label`, "LeaseNamespace"},
		"bad lease namespace": {func(c *Config) { c.LeaseNamespace = "a.b" }, `the Lease's namespace "a.b" is not a valid DNS label`, "LeaseNamespace"},
		"no lease name":       {func(c *Config) { c.LeaseName = "" }, `the Lease's name "" is not a valid DNS subdomain`, "LeaseName"},
		"bad lease name":      {func(c *Config) { c.LeaseName = "Orders" }, `the Lease's name "Orders" is not a valid DNS subdomain`, "LeaseName"},
		"long lease name":     {func(c *Config) { c.LeaseName = strings.Repeat("a", 254) }, "is not a valid DNS subdomain", "LeaseName"},
		"group key too long": {func(c *Config) { c.Group, c.LeaseName = "shop", strings.Repeat("a", 57) }, // leader-aaa…: 64 characters
			`podlabel: "leasehold.io/leader" with the Lease "` + strings.Repeat("a", 57) + `" of the group makes the leader label key "leasehold.io/leader-` + strings.Repeat("a", 57) + `", which is not a valid label key: name part must be no more than 63 bytes; shorten the key or the Lease's name`, "Key"},
		"zero retry":  {func(c *Config) { c.RetryPeriod = 0 }, "podlabel: retryPeriod (0s) must be greater than 0", "RetryPeriod"},
		"zero resync": {func(c *Config) { c.Resync = 0 }, "podlabel: resync (0s) must be greater than 0", "Resync"},
	} {
		t.Run(name, func(t *testing.T) {
			c := good()
			tc.change(&c)
			_, err := New(c)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error %q, want it to contain %q", err, tc.want)
			}
			re, ok := errors.AsType[*rule.Error](err)
			switch {
			case tc.field == "" && ok:
				t.Errorf("a missing client reported as a rule: %v", err)
			case tc.field != "" && (!ok || re.Fields[0].Name != tc.field):
				t.Errorf("New error %v (%T): want a *rule.Error about %s", err, err, tc.field)
			}
		})
	}
}

// value reads a gauge or counter. (prometheus/testutil would need
// github.com/kylelemons/godebug in go.mod; client_model is read instead.)
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

func TestMetricsAreRegisteredUnderTheirNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	m.failures.Inc()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]dto.MetricType{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf.GetType()
	}
	for name, kind := range map[string]dto.MetricType{
		"leasehold_pod_label_leader":         dto.MetricType_GAUGE,
		"leasehold_pod_label_failures_total": dto.MetricType_COUNTER,
		"leasehold_pod_label_cleared_total":  dto.MetricType_COUNTER,
	} {
		if k, ok := got[name]; !ok || k != kind {
			t.Errorf("%s: registered %v (%v), want %v", name, ok, k, kind)
		}
	}
}
