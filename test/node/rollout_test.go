package node_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rollouts restarts the demo Deployment n times with kubectl rollout
// restart, and returns the holder changes of each rollout and whether its
// last holder is a pod of the new ReplicaSet.
func rollouts(t *testing.T, n int, set ...string) (changes []int, toNew []bool, took []time.Duration) {
	t.Helper()
	release := "roll"
	ns, lease, sel := installDemo(t, release, append([]string{"demo.replicas=3"}, set...)...)
	deploy := release + "-leasehold-demo"
	rec := recordLease(t, ns, lease)
	ps := waitReady(t, ns, sel, 3, 2*time.Minute)
	_, st := leader(t, ps, 30*time.Second)
	holder := st.Identity
	for i := range n {
		t0 := time.Now()
		kubectl(t, "-n", ns, "rollout", "restart", "deployment/"+deploy)
		kubectl(t, "-n", ns, "rollout", "status", "deployment/"+deploy, "--timeout=3m")
		// rollout status returns once the new pods are available; the old
		// ones may still be shutting down, and handing over: wait until
		// they are gone, so that every pod left is of the new ReplicaSet.
		eventually(t, 200*time.Millisecond, 2*time.Minute, "the old pods gone", func() (bool, error) {
			list, err := clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: sel})
			return err == nil && len(list.Items) == 3, err
		})
		ps = waitReady(t, ns, sel, 3, 2*time.Minute)
		lp, st := leader(t, ps, 30*time.Second)
		took = append(took, time.Since(t0))
		c, last := holderChanges(holder, rec.since(t0))
		if last != st.Identity {
			t.Errorf("rollout %d: the Lease's last holder %s, the leader's status says %s", i+1, last, st.Identity)
		}
		newRS := false
		for _, p := range ps {
			newRS = newRS || (p.Name == lp.Name && p.CreationTimestamp.Time.After(t0.Add(-time.Second)))
		}
		changes = append(changes, c)
		toNew = append(toNew, newRS)
		t.Logf("rollout %d: %d leadership change(s), %s → %s, %s", i+1, c, holderPod(holder), lp.Name, ms(time.Since(t0)))
		holder = st.Identity
	}
	return changes, toNew, took
}

// kubectl rollout restart of a 3-replica Deployment with handover:
// successor: in each of 10 rollouts leadership changes exactly once, to a
// pod of the new ReplicaSet (every pod left after the rollout is one).
func TestRolloutRestartWithSuccessorHandover(t *testing.T) {
	requireNode(t)
	const n = 10
	changes, toNew, took := rollouts(t, n, "handover=successor")
	once := 0
	for i := range n {
		if changes[i] == 1 && toNew[i] {
			once++
		} else {
			t.Errorf("rollout %d: %d leadership changes (to the new ReplicaSet: %v), want exactly 1", i+1, changes[i], toNew[i])
		}
	}
	t.Logf("FIGURES rollout restart, handover successor: exactly one change to the new ReplicaSet in %d of %d rollouts; changes %v; rollout p50 %s max %s",
		once, n, changes, ms(percentile(took, 50)), ms(percentile(took, 100)))
}

// The same with the default handover (any): reported, not required.
func TestRolloutRestartWithDefaultHandover(t *testing.T) {
	requireNode(t)
	const n = 5
	changes, toNew, took := rollouts(t, n)
	total := 0
	for _, c := range changes {
		total += c
	}
	t.Logf("FIGURES rollout restart, default handover: %d leadership changes in %d rollouts (%v), to the new ReplicaSet %v; rollout p50 %s",
		total, n, changes, toNew, ms(percentile(took, 50)))
}
