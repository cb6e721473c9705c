package node_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testing/overlap"
)

// observer polls every pod's /v1/status (OPS port) every 50ms and keeps
// each answer as an observation for the project's overlap judge.
type observer struct {
	mu     sync.Mutex
	obs    []overlap.Observation[string]
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func observe(t *testing.T, ps []corev1.Pod) *observer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{cancel: cancel}
	for _, p := range ps {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			for ctx.Err() == nil {
				sent := time.Now()
				st, err := status(ctx, p.Status.PodIP)
				if err == nil {
					o.mu.Lock()
					o.obs = append(o.obs, overlap.Observation[string]{Member: p.Name, Sent: sent, Recv: time.Now(), Leader: st.Leader, Token: st.FencingToken})
					o.mu.Unlock()
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	t.Cleanup(o.stop)
	return o
}

func (o *observer) stop() {
	o.cancel()
	o.wg.Wait()
}

// check stops the observer and fails the test on any certain overlap.
func (o *observer) check(t *testing.T, what string) int {
	t.Helper()
	o.stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range overlap.Check(o.obs) {
		t.Errorf("%s: two leaders at once: %+v", what, p)
	}
	return len(o.obs)
}

// ctr runs containerd's ctr against the node's containerd.
func ctr(t *testing.T, args ...string) {
	t.Helper()
	sock := os.Getenv("LEASEHOLD_NODE_STATE") + "/run/containerd/containerd.sock"
	out, err := exec.CommandContext(t.Context(), "ctr", append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %v: %v\n%s", args, err, out)
	}
}

// containerID is a container's ID in containerd.
func containerID(t *testing.T, p corev1.Pod, name string) string {
	t.Helper()
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if c.Name == name {
			_, id, _ := strings.Cut(c.ContainerID, "://")
			return id
		}
	}
	t.Fatalf("%s has no container %s", p.Name, name)
	return ""
}

// newLeader waits until a pod other than old's identity leads, and returns
// how long that took from t0.
func newLeader(t *testing.T, ns, sel, oldIdentity string, t0 time.Time, timeout time.Duration) (corev1.Pod, time.Duration) {
	t.Helper()
	var lp corev1.Pod
	eventually(t, 50*time.Millisecond, timeout, "a new leader", func() (bool, error) {
		for _, p := range pods(t, ns, sel) {
			if st, err := status(t.Context(), p.Status.PodIP); err == nil && st.Leader && st.Identity != oldIdentity {
				lp = p
				return true, nil
			}
		}
		return false, nil
	})
	return lp, time.Since(t0)
}

// Faults a node brings, on the chart's demo (default timings: lease 15s,
// renew deadline 10s, retry 2s), judged by the overlap checker over every
// pod's /v1/status polled every 50ms:
//   - the sidecar's process killed (SIGKILL through containerd): the
//     kubelet restarts the container; a successor (either pod, under a new
//     identity) leads once the dead term's Lease expires, within
//     leaseDuration + retryPeriod;
//   - the app container killed: the kubelet restarts it; leadership stays
//     (the demo's candidacy is not health-gated);
//   - the leader pod's traffic to the apiserver cut (iptables, in the
//     node's own chain), then healed: the cut leader stops saying leader
//     by renewDeadline, the other pod leads within leaseDuration +
//     retryPeriod of the cut, and the healed one follows.
//
// No overlap in any of them.
func TestNodeFaults(t *testing.T) {
	requireNode(t)
	ns, _, sel := installDemo(t, "faults")
	const bound = 15*time.Second + 2*time.Second + 2*time.Second // leaseDuration + retryPeriod, plus a margin for the watch's and the test's polls

	ps := waitReady(t, ns, sel, 2, 2*time.Minute)
	lp, st := leader(t, ps, 40*time.Second)
	o := observe(t, ps)
	t0 := time.Now()
	ctr(t, "tasks", "kill", "-s", "SIGKILL", containerID(t, lp, "leasehold"))
	_, took := newLeader(t, ns, sel, st.Identity, t0, 2*bound)
	if took > bound {
		t.Errorf("sidecar killed: a successor led after %s, want within %s", took, bound)
	}
	eventually(t, 200*time.Millisecond, time.Minute, "the kubelet restarting the sidecar", func() (bool, error) {
		p, err := clientset.CoreV1().Pods(ns).Get(t.Context(), lp.Name, metav1.GetOptions{})
		return err == nil && p.Status.InitContainerStatuses[0].RestartCount >= 1 && ready(*p), err
	})
	n := o.check(t, "sidecar killed")
	t.Logf("FIGURES fault: sidecar process killed: successor led %s after the kill (bound %s), the kubelet restarted the container; %d observations, no overlap", ms(took), bound, n)

	ps = waitReady(t, ns, sel, 2, 2*time.Minute)
	lp, st = leader(t, ps, 40*time.Second)
	o = observe(t, ps)
	ctr(t, "tasks", "kill", "-s", "SIGKILL", containerID(t, lp, "app"))
	eventually(t, 200*time.Millisecond, time.Minute, "the kubelet restarting the app", func() (bool, error) {
		p, err := clientset.CoreV1().Pods(ns).Get(t.Context(), lp.Name, metav1.GetOptions{})
		return err == nil && p.Status.ContainerStatuses[0].RestartCount >= 1 && ready(*p), err
	})
	if now, err := status(t.Context(), lp.Status.PodIP); err != nil || !now.Leader || now.Identity != st.Identity {
		t.Errorf("app killed: the leader's sidecar now says %+v, %v; want it still leading", now, err)
	}
	n = o.check(t, "app killed")
	t.Logf("FIGURES fault: app container killed: restarted by the kubelet, leadership stayed with %s; %d observations, no overlap", lp.Name, n)

	ps = waitReady(t, ns, sel, 2, 2*time.Minute)
	lp, st = leader(t, ps, 40*time.Second)
	o = observe(t, ps)
	// The cut is a rule in a chain of the node's own (LH-), which
	// make node-down removes whatever happens here.
	for _, args := range [][]string{
		{"-N", "LH-CUT"},
		{"-I", "INPUT", "1", "-j", "LH-CUT"},
		{"-A", "LH-CUT", "-s", lp.Status.PodIP, "-d", "10.200.0.1", "-p", "tcp", "--dport", "6443", "-j", "DROP"},
	} {
		if out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %v: %v %s", args, err, out)
		}
	}
	heal := func() {
		if out, err := exec.Command("iptables", "-w", "-F", "LH-CUT").CombinedOutput(); err != nil {
			t.Errorf("iptables -F LH-CUT: %v %s", err, out)
		}
	}
	t.Cleanup(heal)
	t0 = time.Now()
	var stepDown time.Duration
	eventually(t, 50*time.Millisecond, 2*bound, "the cut leader stepping down", func() (bool, error) {
		s, err := status(t.Context(), lp.Status.PodIP)
		stepDown = time.Since(t0)
		return err == nil && !s.Leader, err
	})
	successor, took := newLeader(t, ns, sel, st.Identity, t0, 2*bound)
	if took > bound {
		t.Errorf("traffic cut: a successor led after %s, want within %s", took, bound)
	}
	heal()
	eventually(t, 200*time.Millisecond, time.Minute, "the healed pod following", func() (bool, error) {
		s, err := status(t.Context(), lp.Status.PodIP)
		return err == nil && !s.Leader && s.Holder != "" && s.Holder != st.Identity, err
	})
	n = o.check(t, "traffic cut")
	t.Logf("FIGURES fault: leader's traffic to the apiserver cut: it stopped saying leader %s after the cut (renewDeadline 10s), %s led %s after the cut (bound %s); healed, it follows; %d observations, no overlap",
		ms(stepDown), successor.Name, ms(took), bound, n)
}
