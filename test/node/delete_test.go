package node_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// deletions is how many times TestLeaderPodDeletionHandsOver deletes the
// leader's pod.
const deletions = 10

// podEnd is what a watch saw of one pod's end: when it first saw each
// container terminated, its last status, and when the pod was gone.
type podEnd struct {
	mu         sync.Mutex
	terminated map[string]time.Time // container → first seen terminated
	last       *corev1.Pod
	gone       time.Time
	done       chan struct{}
}

// watchPodEnd watches one pod until it is deleted or ctx ends.
func watchPodEnd(ctx context.Context, t *testing.T, ns, name string) *podEnd {
	t.Helper()
	w, err := clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	e := &podEnd{terminated: map[string]time.Time{}, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			now := time.Now()
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			e.mu.Lock()
			e.last = p
			for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				if _, seen := e.terminated[c.Name]; !seen && c.State.Terminated != nil {
					e.terminated[c.Name] = now
				}
			}
			if ev.Type == watch.Deleted {
				e.gone = now
				e.mu.Unlock()
				return
			}
			e.mu.Unlock()
		}
	}()
	return e
}

// On `kubectl delete pod` of the leader, the kubelet stops the app
// container first (native sidecar order), leasehold releases the Lease
// before the pod is gone, and the other pod leads within the handover
// bound: a candidate watching the Lease takes a released one within a
// round trip, and at worst within retryPeriod (2s, the chart's default),
// when it polls. Ten deletions; the Deployment replaces each pod.
func TestLeaderPodDeletionHandsOver(t *testing.T) {
	requireNode(t)
	ns, lease, sel := installDemo(t, "del")
	rec := recordLease(t, ns, lease)
	const bound = 2 * time.Second
	var handover, toSuccessor, releaseBeforeGone []time.Duration
	for i := range deletions {
		ps := waitReady(t, ns, sel, 2, 2*time.Minute)
		lp, st := leader(t, ps, 30*time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		end := watchPodEnd(ctx, t, ns, lp.Name)
		t0 := time.Now()
		if err := clientset.CoreV1().Pods(ns).Delete(ctx, lp.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-end.done:
		case <-ctx.Done():
		}
		cancel()
		end.mu.Lock()
		gone, term, last := end.gone, end.terminated, end.last
		end.mu.Unlock()
		if gone.IsZero() {
			t.Fatalf("deletion %d: %s not gone within a minute", i+1, lp.Name)
		}
		var release, successor leaseEvent
		eventually(t, 50*time.Millisecond, 10*time.Second, "a successor on the Lease", func() (bool, error) {
			release, successor = leaseEvent{}, leaseEvent{}
			for _, e := range rec.since(t0) {
				if release.at.IsZero() && e.holder != st.Identity {
					release = e
				}
				if e.holder != "" && e.holder != st.Identity {
					successor = e
					return true, nil
				}
			}
			return false, nil
		})
		appAt, appSeen := term["app"]
		sidecarAt, sidecarSeen := term["leasehold"]
		var appFinished, sidecarFinished time.Time
		for _, c := range append(last.Status.InitContainerStatuses, last.Status.ContainerStatuses...) {
			if c.State.Terminated != nil {
				switch c.Name {
				case "app":
					appFinished = c.State.Terminated.FinishedAt.Time
				case "leasehold":
					sidecarFinished = c.State.Terminated.FinishedAt.Time
				}
			}
		}
		switch {
		case !appSeen || !sidecarSeen:
			t.Errorf("deletion %d: terminated containers seen %v: want app and leasehold", i+1, term)
		case sidecarAt.Before(appAt) || sidecarFinished.Before(appFinished):
			t.Errorf("deletion %d: leasehold ended (seen %s, finishedAt %s) before the app (seen %s, finishedAt %s)",
				i+1, sidecarAt.Format(time.StampMilli), sidecarFinished, appAt.Format(time.StampMilli), appFinished)
		}
		if !release.at.Before(gone) {
			t.Errorf("deletion %d: the Lease left %s at %s, not before the pod was gone at %s", i+1, lp.Name,
				release.at.Format(time.StampMilli), gone.Format(time.StampMilli))
		}
		if release.holder != "" && release.holder != successor.holder {
			t.Errorf("deletion %d: the Lease went to %q, then %q", i+1, release.holder, successor.holder)
		}
		if d := successor.at.Sub(release.at); d > bound {
			t.Errorf("deletion %d: the successor led %s after the release, want within %s", i+1, d, bound)
		}
		handover = append(handover, successor.at.Sub(release.at))
		toSuccessor = append(toSuccessor, successor.at.Sub(t0))
		releaseBeforeGone = append(releaseBeforeGone, gone.Sub(release.at))
		t.Logf("deletion %d: %s (token %d): app ended, then leasehold; released %s after the delete, successor %s after the release, pod gone %s after the release",
			i+1, lp.Name, st.FencingToken, ms(release.at.Sub(t0)), ms(successor.at.Sub(release.at)), ms(gone.Sub(release.at)))
	}
	t.Logf("FIGURES leader-pod deletion (%d): release → successor leads p50 %s max %s; delete → successor p50 %s max %s; release landed p50 %s (min %s) before the pod was gone",
		deletions, ms(percentile(handover, 50)), ms(percentile(handover, 100)), ms(percentile(toSuccessor, 50)), ms(percentile(toSuccessor, 100)),
		ms(percentile(releaseBeforeGone, 50)), ms(percentile(releaseBeforeGone, 0)))
}
