package podlabel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// resyncRounds is how many cleanups each leader completes while the
// two-app test watches.
const resyncRounds = 3

// Two apps in one namespace, each with its own Lease and two candidates,
// all with the same label key: each app's leader keeps true through
// several cleanups of both leaders, because a cleanup touches only the
// Pods of its own election. A watch on the Pods, opened before any
// candidate starts, sees every change of the label; no leader's Pod may
// ever go from true to false while its leader leads. A Pod labelled true
// by an older leasehold (no election label) is no one's to clear.
func TestTwoAppsInOneNamespaceKeepEachOthersLabel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	apps := []string{"alpha", "beta"}
	for _, app := range apps {
		f.createPods("", app+"-0", app+"-1")
	}
	f.createPod("legacy", map[string]string{labelKey: "true"})
	w := f.watchLabels()
	for _, app := range apps {
		for _, pod := range []string{app + "-0", app + "-1"} {
			f.startFor(app, pod, pod, nil)
		}
	}

	leaders := map[string]*candidate{} // app → its leader
	f.eventually("each app has a leader", func() string {
		for _, app := range apps {
			h := f.holderOf(app)
			leaders[app] = nil
			for _, c := range f.running() {
				if c.lease == app && c.id == h && c.elector.Snapshot().IsLeader(time.Now()) {
					leaders[app] = c
				}
			}
			if leaders[app] == nil {
				return fmt.Sprintf("%s: holder %q does not lead", app, h)
			}
		}
		return ""
	})
	from := w.count()
	index, base := map[string]uint64{}, map[string]int{}
	for app, l := range leaders {
		index[app], base[app] = l.elector.Snapshot().Index, l.rounds.count()
	}
	f.eventuallyWithin(generous+resyncRounds*resync, fmt.Sprintf("each leader completes %d more cleanups", resyncRounds), func() string {
		for app, l := range leaders {
			if n := l.rounds.count() - base[app]; n < resyncRounds {
				return fmt.Sprintf("%s (%s): %d cleanups", l.id, app, n)
			}
		}
		return ""
	})
	// Index moves with every change of Leading, Holder, Term or Token: if it
	// did not, neither leader's own Labeler wanted false meanwhile, and any
	// true → false of its Pod was someone else's write.
	for app, l := range leaders {
		if got := l.elector.Snapshot().Index; got != index[app] {
			t.Fatalf("%s (%s) stepped down or began a new term while watched (index %d → %d): cannot tell whose write cleared its label; the machine may be too slow for these timings", l.id, app, index[app], got)
		}
	}
	if err := w.err(); err != nil {
		t.Fatal(err)
	}

	for _, tr := range w.since(0) {
		if tr.pod == "legacy" {
			t.Errorf("legacy's true, written without an election label, was changed: %v", tr)
		}
	}
	window := w.since(from)
	cleared := 0
	for _, tr := range window {
		for _, l := range leaders {
			if tr.pod == l.pod && tr.from == "true" {
				cleared++
			}
		}
	}
	if cleared != 0 {
		t.Errorf("leaders' labels went from true to false %d times while they led, over %d cleanups of each leader: %v", cleared, resyncRounds, window)
	}

	want := map[string][2]string{"legacy": {"true", ""}} // pod → leader label, election label
	for _, app := range apps {
		want[app+"-0"], want[app+"-1"] = [2]string{"false", app}, [2]string{"false", app}
		want[leaders[app].pod] = [2]string{"true", app}
	}
	f.eventually("each leader's Pod carries true, its follower's false, each with its app's election label", func() string {
		leader, election := f.labels(), f.labelValues(LeaseKey)
		var wrong []string
		for pod, v := range want {
			if got := [2]string{leader[pod], election[pod]}; got != v {
				wrong = append(wrong, fmt.Sprintf("%s: %q (want %q)", pod, got, v))
			}
		}
		slices.Sort(wrong)
		return strings.Join(wrong, ", ")
	})
	noFailures(t, f.running()...)
}

// labelWatch records every change of the label's value on the Pods of a
// namespace, as one watch sees them in order.
type labelWatch struct {
	mu          sync.Mutex
	last        map[string]string // pod → value ("" when absent)
	transitions []transition
	failure     error // the watch ended or failed before the test did
}

// transition is one change of a Pod's label value.
type transition struct{ pod, from, to string }

func (tr transition) String() string { return fmt.Sprintf("%s %q→%q", tr.pod, tr.from, tr.to) }

// watchLabels lists the namespace's Pods and watches them from the list's
// resourceVersion until the test ends.
func (f *fixture) watchLabels() *labelWatch {
	f.t.Helper()
	pods := f.admin.CoreV1().Pods(f.namespace)
	list, err := pods.List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	w := &labelWatch{last: map[string]string{}}
	for _, p := range list.Items {
		w.last[p.Name] = p.Labels[labelKey]
	}
	ctx, cancel := context.WithCancel(context.Background())
	watcher, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.follow(ctx, watcher)
	}()
	f.t.Cleanup(func() {
		cancel()
		watcher.Stop()
		<-done
	})
	return w
}

// follow records the watch's events until ctx ends.
func (w *labelWatch) follow(ctx context.Context, watcher watch.Interface) {
	for ev := range watcher.ResultChan() {
		w.mu.Lock()
		switch p, ok := ev.Object.(*corev1.Pod); {
		case ev.Type == watch.Error || !ok:
			w.failure = fmt.Errorf("the Pod watch failed: %v", ev.Object)
		default:
			if v := p.Labels[labelKey]; v != w.last[p.Name] {
				w.transitions = append(w.transitions, transition{p.Name, w.last[p.Name], v})
				w.last[p.Name] = v
			}
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ctx.Err() == nil && w.failure == nil {
		w.failure = fmt.Errorf("the Pod watch ended early")
	}
}

func (w *labelWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.transitions)
}

// since returns the transitions recorded after the first n.
func (w *labelWatch) since(n int) []transition {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]transition(nil), w.transitions[n:]...)
}

// err reports whether the watch failed or ended: then it may have missed
// changes.
func (w *labelWatch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure
}
