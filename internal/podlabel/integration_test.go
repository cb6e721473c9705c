package podlabel

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/elect"
)

// Integration tests: three candidates, each a real Elector and Labeler
// against the real apiserver, each with its own Pod (which stays Pending:
// no kubelet runs) and its own Proxy. The checker (waitConverged) polls
// until exactly the Lease holder's Pod carries true and every other Pod
// carries false.

// threeCandidates creates pod-a, pod-b, pod-c and starts candidates a, b, c.
func (f *fixture) threeCandidates() map[string]*candidate {
	f.t.Helper()
	f.createPods("", "pod-a", "pod-b", "pod-c")
	out := map[string]*candidate{}
	for _, id := range []string{"a", "b", "c"} {
		out[id] = f.start(id, "pod-"+id, nil)
	}
	return out
}

func noFailures(t *testing.T, cs ...*candidate) {
	t.Helper()
	for _, c := range cs {
		if n := c.failures(); n != 0 {
			t.Errorf("%s: %v failed requests", c.id, n)
		}
	}
}

// a) All three converge from a cold start, and a Pod that carries a stale
// true from before a crash is repaired by its own Labeler at start-up: the
// repair is seen while a ghost still holds the Lease, so no leader's
// cleanup can have done it.
func TestStartupConvergesAndRepairsAStaleLabel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createPods("", "pod-a", "pod-b")
	f.createPods("true", "pod-c") // left behind by a crashed leader
	f.ghostLease(leaseDuration)
	var cs []*candidate
	for _, id := range []string{"a", "b", "c"} {
		cs = append(cs, f.start(id, "pod-"+id, nil))
	}
	f.eventually("pod-c's own Labeler repairs its stale true", func() string {
		if v := f.labels()["pod-c"]; v != "false" {
			return "pod-c carries " + v
		}
		return ""
	})
	if h := f.holder(); h != "ghost" {
		t.Fatalf("by the time pod-c read false, %q held the Lease: cannot tell the start-up repair from a leader's cleanup", h)
	}
	leader := f.waitConverged("start-up")
	if leader.cleared() != 0 {
		t.Errorf("leader cleared %v labels; the repair left none to clear", leader.cleared())
	}
	noFailures(t, cs...)
}

// b) A graceful handover (Release): the new leader's Pod carries true, the
// old leader's false, written by the old leader itself.
func TestHandover(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := f.threeCandidates()
	old := f.waitConverged("start-up")
	released, err := old.elector.Release(t.Context(), 10*time.Second)
	if err != nil || !released {
		t.Fatalf("Release = %v, %v", released, err)
	}
	next := f.waitConverged("after the handover", old)
	if next == old {
		t.Fatalf("%s still leads after Release", old.id)
	}
	// A gauge follows the Labeler's own record of its last write, which
	// it updates once the patch's answer arrives: after the API shows it.
	f.eventually("the leader gauges follow the labels", func() string {
		if o, n := value(old.metrics.leader), value(next.metrics.leader); o != 0 || n != 1 {
			return fmt.Sprintf("old %v, new %v", o, n)
		}
		return ""
	})
	noFailures(t, cs["a"], cs["b"], cs["c"])
}

// c) Failover: the leader is cut off (it can write nothing, as if it had
// crashed). When its Lease expires another candidate leads, its Pod carries
// true, and the old leader's stale true is cleared by the new leader's
// cleanup.
func TestFailoverClearsTheOldLeadersLabel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.threeCandidates()
	old := f.waitConverged("start-up")
	old.proxy.Cut()
	next := f.waitConverged("after the failover", old)
	if next == old {
		t.Fatalf("%s still leads although cut off", old.id)
	}
	// Counters move once the patch's answer arrives: after the API shows it.
	f.eventually("the new leader counts the old leader's true as cleared", func() string {
		if n := next.cleared(); n < 1 {
			return fmt.Sprintf("%s cleared %v labels", next.id, n)
		}
		return ""
	})
	f.eventually("the cut-off leader's write of false fails", func() string {
		if n := old.failures(); n < 1 {
			return fmt.Sprintf("%v failures", n)
		}
		return ""
	})
	old.proxy.Heal() // let it catch up before the test stops it
}

// d) Crash and restart: the leader is killed with its traffic cut, so its
// final false never arrives, and a fresh Elector and Labeler start for the
// same Pod at once. The fresh Labeler repairs the label before anyone else
// can lead, and the candidates converge.
func TestCrashRestartRepairsTheLabel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.threeCandidates()
	old := f.waitConverged("start-up")
	old.proxy.Cut()
	old.kill() // its shutdown write of false is held in the cut proxy
	restarted := f.start(old.id+"-restarted", old.pod, nil)
	f.eventually("the restarted Labeler repairs "+old.pod, func() string {
		if v := f.labels()[old.pod]; v != "false" {
			return old.pod + " carries " + v
		}
		return ""
	})
	if h := f.holder(); h != old.id {
		t.Fatalf("by the time %s read false, %q held the Lease: cannot tell the restart's repair from a leader's cleanup", old.pod, h)
	}
	leader := f.waitConverged("after the crash and restart")
	t.Logf("leader after the restart: %s", leader.id)
	old.stop(t) // returns within its own bounds (release and final write time out)
	if restarted.failures() != 0 {
		t.Errorf("restarted candidate: %v failed requests", restarted.failures())
	}
}

// The leader's resync clears a true that lands after its cleanup (an old
// leader's delayed patch) and restores its own true if something set it to
// false (an old leader's delayed cleanup).
func TestResyncRepairsDelayedWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.threeCandidates()
	leader := f.waitConverged("start-up")
	var follower *candidate
	for _, c := range f.running() {
		if c != leader {
			follower = c
			break
		}
	}
	before := leader.cleared()
	f.setLabel(follower.pod, "true")
	f.setLabel(leader.pod, "false")
	if again := f.waitConverged("after the next resync"); again != leader {
		t.Fatalf("leadership moved from %s to %s", leader.id, again.id)
	}
	f.eventually("the leader counts one label cleared at resync", func() string {
		if got := leader.cleared() - before; got != 1 {
			return fmt.Sprintf("cleared %v, want 1", got)
		}
		return ""
	})
	if !strings.Contains(leader.logs.String(), "writing it again") {
		t.Error("leader did not log that it restored its own label")
	}
}

// e) Least privilege: a leader whose user may only list and patch pods
// (besides the Lease verbs the Elector needs) labels itself, clears a stale
// label, and removes its own label on handover, without one forbidden
// request.
func TestLeastPrivilegeSuffices(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createPods("", "pod-a", "pod-b")
	f.createPods("true", "pod-c")
	a := f.start("a", "pod-a", f.userWith("list", "patch"))
	f.eventually("a labels itself and clears pod-c", func() string {
		if l := f.labels(); l["pod-a"] != "true" || l["pod-c"] != "false" {
			return fmt.Sprint(l)
		}
		return ""
	})
	b := f.start("b", "pod-b", nil)
	c := f.start("c", "pod-c", nil)
	if leader := f.waitConverged("with the least-privileged leader"); leader != a {
		t.Fatalf("leader %s, want a", leader.id)
	}
	if _, err := a.elector.Release(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if leader := f.waitConverged("after a's handover", a); leader == a {
		t.Fatal("a still leads")
	}
	noFailures(t, a, b, c)
	f.eventually("a counts pod-c as cleared", func() string {
		if n := a.cleared(); n != 1 {
			return fmt.Sprintf("a cleared %v labels, want 1 (pod-c)", n)
		}
		return ""
	})
	if strings.Contains(strings.ToLower(a.logs.String()), "forbidden") {
		t.Errorf("a logged a forbidden request:\n%s", a.logs)
	}
}

// What breaks without each verb: without list the leader labels itself but
// cannot find stale labels; without patch it can label nothing. Both are
// logged naming the missing verb, and counted as failures.
func TestWhatBreaksWithoutEachVerb(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		verbs            []string
		wantOwn          string // own Pod's label once the leader settled
		wantOther        string // the other Pod's stale true
		failing, logVerb string // "" when nothing fails
	}{
		{name: "list and patch", verbs: []string{"list", "patch"}, wantOwn: "true", wantOther: "false"},
		{name: "patch only", verbs: []string{"patch"}, wantOwn: "true", wantOther: "true", logVerb: "list"},
		{name: "list only", verbs: []string{"list"}, wantOwn: "", wantOther: "true", logVerb: "patch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.createPods("", "own")
			f.createPods("true", "other")
			c := f.start("a", "own", f.userWith(tc.verbs...))
			f.eventually("a leads", func() string {
				if !c.elector.Snapshot().IsLeader(time.Now()) {
					return "not leading"
				}
				return ""
			})
			f.eventually("the labels settle", func() string {
				l := f.labels()
				switch {
				case l["own"] != tc.wantOwn || l["other"] != tc.wantOther:
					return fmt.Sprint(l)
				case tc.logVerb != "" && c.failures() < 2:
					return fmt.Sprintf("%v failures; want retries every period", c.failures())
				}
				return ""
			})
			if tc.logVerb == "" {
				noFailures(t, c)
				return
			}
			if l := f.labels(); l["own"] != tc.wantOwn || l["other"] != tc.wantOther {
				t.Errorf("after %v failures, labels %v", c.failures(), l)
			}
			want := `verb=` + tc.logVerb
			if logs := c.logs.String(); !strings.Contains(logs, want) || !strings.Contains(logs, "level=ERROR") {
				t.Errorf("logs do not name the missing verb (%s) at error level:\n%s", want, logs)
			}
		})
	}
}

// Cleanup patches are conditional on the resourceVersion the list saw: a
// Pod changed since (say, by its new leader's true) is not touched.
func TestCleanupPatchIsConditionalOnTheListedVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createPods("true", "other")
	l, err := New(Config{
		Pods: f.admin.CoreV1().Pods(f.namespace), Namespace: f.namespace, PodName: "own", Key: labelKey,
		LeaseNamespace: f.namespace, LeaseName: leaseName,
		Source: publisherSource{elect.NewPublisher(elect.Snapshot{})}, RetryPeriod: retryPeriod, Resync: resync,
	})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := l.listLabeled(t.Context())
	if err != nil || len(listed) != 1 {
		t.Fatalf("list = %v, %v", listed, err)
	}
	if _, err := f.admin.CoreV1().Pods(f.namespace).Patch(t.Context(), "other", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := l.clearStale(t.Context(), "other", listed[0].ResourceVersion); !apierrors.IsConflict(err) {
		t.Fatalf("patch on a stale resourceVersion: %v, want a conflict", err)
	}
	if v := f.labels()["other"]; v != "true" {
		t.Fatalf("label %q after a conflicting patch, want it untouched", v)
	}
	fresh, err := l.listLabeled(t.Context())
	if err != nil || len(fresh) != 1 {
		t.Fatalf("list = %v, %v", fresh, err)
	}
	if err := l.clearStale(t.Context(), "other", fresh[0].ResourceVersion); err != nil {
		t.Fatal(err)
	}
	if v := f.labels()["other"]; v != "false" {
		t.Fatalf("label %q, want false", v)
	}
}

// A wrong POD_NAME is logged at error level with the Pod's name and retried
// every period; once the Pod exists it is labelled.
func TestMissingOwnPodIsLoggedAndRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	logs, m := &logBuffer{}, NewMetrics(nil)
	l, err := New(Config{
		Pods: f.admin.CoreV1().Pods(f.namespace), Namespace: f.namespace, PodName: "late", Key: labelKey,
		LeaseNamespace: f.namespace, LeaseName: leaseName,
		Source: publisherSource{elect.NewPublisher(elect.Snapshot{})}, RetryPeriod: retryPeriod, Resync: resync,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := l.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	defer wg.Wait()
	defer cancel()
	f.eventually("two failed attempts", func() string {
		if n := value(m.failures); n < 2 {
			return fmt.Sprintf("%v failures", n)
		}
		return ""
	})
	if s := logs.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, f.namespace+"/late not found") {
		t.Errorf("logs do not report the missing Pod at error level:\n%s", s)
	}
	f.createPods("", "late")
	f.eventually("the Pod is labelled once it exists", func() string {
		if v := f.labels()["late"]; v != "false" {
			return "late carries " + v
		}
		return ""
	})
}
