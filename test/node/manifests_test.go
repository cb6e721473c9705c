package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The examples' Deployments run their pods as app.kubernetes.io/name=<this>.
const (
	exampleApp       = "app.kubernetes.io/name=my-app"
	exampleLegacyApp = "app.kubernetes.io/name=my-app-legacy"
	exampleLease     = "my-app-leader"
)

// apply applies the examples' manifests, as they are, into a new
// namespace, and returns it.
func apply(t *testing.T, name string, manifests ...string) string {
	t.Helper()
	ns := namespace(t, name)
	args := []string{"-n", ns, "apply"}
	for _, m := range manifests {
		args = append(args, "-f", "examples/manifests/"+m)
	}
	kubectl(t, args...)
	return ns
}

// leaseHolderIn waits until the Lease is held by one of the pods and that
// pod says it leads, and returns it.
func leaseHolderIn(t *testing.T, ns string, ps []corev1.Pod) corev1.Pod {
	t.Helper()
	lp, st := leader(t, ps, 40*time.Second)
	l, err := clientset.CoordinationV1().Leases(ns).Get(t.Context(), exampleLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != st.Identity {
		t.Fatalf("Lease %s holder %v, the leader says %s", exampleLease, l.Spec.HolderIdentity, st.Identity)
	}
	return lp
}

// examples/manifests/deployment-native-sidecar.yaml with rbac.yaml,
// applied as they are: both pods Ready, one leads, and its app (the node's
// my-app image, which asks the sidecar before each write) writes with its
// token.
func TestExampleNativeSidecar(t *testing.T) {
	requireNode(t)
	ns := apply(t, "ex-native", "rbac.yaml", "deployment-native-sidecar.yaml")
	ps := waitReady(t, ns, exampleApp, 2, 2*time.Minute)
	lp := leaseHolderIn(t, ns, ps)
	eventually(t, 500*time.Millisecond, 30*time.Second, "the leader's app writing with its token", func() (bool, error) {
		return strings.Contains(kubectl(t, "-n", ns, "logs", lp.Name, "-c", "app"), `my-app: leader, writing with {"fencingToken":`), nil
	})
}

// examples/manifests/deployment-prestop.yaml (plain containers, the
// pre-1.29 form) with rbac.yaml: one leads; deleting its pod runs the
// preStop hook (the image's own binary: leasehold release), and the other
// pod leads with a larger token.
func TestExamplePreStop(t *testing.T) {
	requireNode(t)
	ns := apply(t, "ex-prestop", "rbac.yaml", "deployment-prestop.yaml")
	ps := waitReady(t, ns, exampleLegacyApp, 2, 2*time.Minute)
	lp, st := leader(t, ps, 40*time.Second)
	t0 := time.Now()
	if err := clientset.CoreV1().Pods(ns).Delete(t.Context(), lp.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var other corev1.Pod
	for _, p := range ps {
		if p.Name != lp.Name {
			other = p
		}
	}
	var next int64
	eventually(t, 50*time.Millisecond, 20*time.Second, "the other pod leading", func() (bool, error) {
		s, err := status(t.Context(), other.Status.PodIP)
		next = int64(s.FencingToken)
		return s.Leader, err
	})
	if next <= int64(st.FencingToken) {
		t.Errorf("the successor's token %d, want > %d", next, st.FencingToken)
	}
	t.Logf("FIGURES example deployment-prestop: the other pod led %s after the leader's pod was deleted (token %d → %d)", ms(time.Since(t0)), st.FencingToken, next)
}

// leadingLine is a line run-mode.yaml's command writes while it runs.
var leadingLine = regexp.MustCompile(`^(\S+) leading: term \d+, fencing token (\d+)$`)

// runLines returns, for a pod's app container, the times and tokens of its
// command's "leading" lines.
func runLines(t *testing.T, ns, pod string) (times []time.Time, tokens []int64) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), kubectlPath(), "--kubeconfig", kubeconfig, "-n", ns, "logs", "--timestamps", pod, "-c", "app")
	out, _ := cmd.Output() // a pod being deleted may have no logs to give
	for line := range strings.Lines(string(out)) {
		m := leadingLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := strconv.ParseInt(m[2], 10, 64)
		times, tokens = append(times, ts), append(tokens, tok)
	}
	return times, tokens
}

// examples/manifests/run-mode.yaml with rbac.yaml, as they are: `leasehold
// install` copies the binary into the emptyDir, and `leasehold run` runs
// the command on the leading pod alone, with its token; after the leading
// pod is deleted, the command runs on one other pod (the other one, or the
// one replacing the deleted pod) with a larger token, and only after the
// first pod's last run line.
func TestExampleRunMode(t *testing.T) {
	requireNode(t)
	ns := apply(t, "ex-run", "rbac.yaml", "run-mode.yaml")
	ps := waitReady(t, ns, exampleApp, 2, 2*time.Minute)
	lp, st := leader(t, ps, 40*time.Second)
	var other corev1.Pod
	for _, p := range ps {
		if p.Name != lp.Name {
			other = p
		}
	}
	eventually(t, 500*time.Millisecond, 30*time.Second, "the command running on the leader with its token", func() (bool, error) {
		_, toks := runLines(t, ns, lp.Name)
		return len(toks) > 0 && toks[len(toks)-1] == int64(st.FencingToken), fmt.Errorf("tokens %v", toks)
	})
	if _, toks := runLines(t, ns, other.Name); len(toks) > 0 {
		t.Fatalf("the command also runs on %s (tokens %v)", other.Name, toks)
	}
	firstTimes, _ := runLines(t, ns, lp.Name)
	t0 := time.Now()
	if err := clientset.CoreV1().Pods(ns).Delete(t.Context(), lp.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first pod's lines, read until its logs are gone.
	last := firstTimes[len(firstTimes)-1]
	// The successor is the other pod or the one replacing the deleted pod,
	// whichever leads first.
	var nextTimes []time.Time
	var nextTokens []int64
	var next string
	eventually(t, 200*time.Millisecond, time.Minute, "the command running on another pod", func() (bool, error) {
		if ts, _ := runLines(t, ns, lp.Name); len(ts) > 0 && ts[len(ts)-1].After(last) {
			last = ts[len(ts)-1]
		}
		for _, p := range pods(t, ns, exampleApp) {
			if p.Name == lp.Name {
				continue
			}
			if nextTimes, nextTokens = runLines(t, ns, p.Name); len(nextTokens) > 0 {
				next = p.Name
				return true, nil
			}
		}
		return false, nil
	})
	for _, p := range pods(t, ns, exampleApp) {
		if _, toks := runLines(t, ns, p.Name); p.Name != next && p.Name != lp.Name && len(toks) > 0 {
			t.Errorf("the command runs on %s too (tokens %v)", p.Name, toks)
		}
	}
	if nextTokens[0] <= int64(st.FencingToken) {
		t.Errorf("the second run's token %d, want > %d", nextTokens[0], st.FencingToken)
	}
	if !nextTimes[0].After(last) {
		t.Errorf("the second run started at %s, before the first run's last line at %s", nextTimes[0], last)
	}
	t.Logf("FIGURES example run-mode: the command ran on one pod at a time; after the deletion it ran on %s %s later (token %d → %d), %s after the first run's last line",
		next, ms(time.Since(t0)), st.FencingToken, nextTokens[0], ms(nextTimes[0].Sub(last)))
}

// The leader label with examples/manifests/leader-service.yaml: the
// native-sidecar example with LEASEHOLD_POD_LABEL added to the sidecar's
// env (as the manifest says), behind the Service selecting
// leasehold.io/leader=true. Requests through the Service's ClusterIP
// (kube-proxy's rules, real EndpointSlices) through repeated handovers
// (`leasehold release --for 5s` in the leader's container) reach only the
// leader's pod, but for a window after each change of leader: the time the
// label and the EndpointSlice take to follow. The test measures it.
//
// The host sends the requests: a route for the one ClusterIP onto the
// node's port-less bridge lh0 (removed with it) lets kube-proxy's OUTPUT
// rules take them (the node's catch-all unreachable route otherwise stops
// host packets for the Service range before NAT).
func TestLeaderServiceRoutesToTheLeader(t *testing.T) {
	requireNode(t)
	ns := apply(t, "ex-service", "rbac.yaml", "deployment-native-sidecar.yaml", "leader-service.yaml")
	kubectl(t, "-n", ns, "set", "env", "deployment/my-app", "-c", "leasehold", "LEASEHOLD_POD_LABEL=leasehold.io/leader")
	kubectl(t, "-n", ns, "rollout", "status", "deployment/my-app", "--timeout=3m")
	eventually(t, 200*time.Millisecond, time.Minute, "the old pods gone", func() (bool, error) {
		list, err := clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: exampleApp})
		return err == nil && len(list.Items) == 2, err
	})
	ps := waitReady(t, ns, exampleApp, 2, 2*time.Minute)
	svc, err := clientset.CoreV1().Services(ns).Get(t.Context(), "my-app-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := svc.Spec.ClusterIP
	if out, err := exec.Command("ip", "route", "replace", ip+"/32", "dev", "lh0").CombinedOutput(); err != nil {
		t.Fatalf("ip route replace %s/32 dev lh0: %v %s", ip, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "route", "del", ip+"/32", "dev", "lh0").Run() })
	rec := recordLease(t, ns, exampleLease)
	url := "http://" + ip + "/cgi-bin/pod"
	ask := func() (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultTransport.RoundTrip(req) // a new connection each time: kube-proxy picks per connection
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(body)), err
	}
	lp := leaseHolderIn(t, ns, ps)
	eventually(t, 100*time.Millisecond, 30*time.Second, "the Service answering from the leader", func() (bool, error) {
		who, err := ask()
		return who == lp.Name, err
	})

	const handovers = 6
	var windows, gaps []time.Duration
	misrouted, failed, total := 0, 0, 0
	for i := range handovers {
		_, st := leader(t, ps, 30*time.Second)
		old := holderPod(st.Identity)
		tRelease := time.Now()
		kubectl(t, "-n", ns, "exec", old, "-c", "leasehold", "--", "/leasehold", "release", "--for", "5s")
		var changed time.Time
		for _, e := range rec.since(tRelease) {
			if e.holder != "" && e.holder != st.Identity && changed.IsZero() {
				changed = e.at
			}
		}
		// Requests for at least 4s after the release, and until the new
		// leader has answered one (within a generous 30s); the last one
		// answered by the old leader after the change ends the window.
		var lastOld, firstNew time.Time
		end, giveUp := time.Now().Add(4*time.Second), time.Now().Add(30*time.Second)
		for now := time.Now(); now.Before(end) || (firstNew.IsZero() && now.Before(giveUp)); now = time.Now() {
			sent := time.Now()
			who, err := ask()
			total++
			switch {
			case err != nil:
				failed++
			case who == old:
				lastOld = sent
			case firstNew.IsZero():
				firstNew = sent
			}
			time.Sleep(20 * time.Millisecond)
			if changed.IsZero() {
				for _, e := range rec.since(tRelease) {
					if e.holder != "" && e.holder != st.Identity {
						changed = e.at
						break
					}
				}
			}
		}
		if changed.IsZero() {
			t.Fatalf("handover %d: the Lease never left %s", i+1, old)
		}
		w := time.Duration(0)
		if lastOld.After(changed) {
			w = lastOld.Sub(changed)
			misrouted++
		}
		windows = append(windows, w)
		if firstNew.IsZero() {
			t.Errorf("handover %d: no request reached the new leader within 30s", i+1)
		} else {
			gaps = append(gaps, firstNew.Sub(changed))
		}
		t.Logf("handover %d: from %s; requests reached it up to %s after the Lease changed; the new leader answered from %s after it",
			i+1, old, ms(w), ms(firstNew.Sub(changed)))
		time.Sleep(time.Until(tRelease.Add(5 * time.Second))) // the old leader's stay-out (--for 5s) ends: the next release can hand back
	}
	if ok := total - failed; ok == 0 {
		t.Fatal("no request answered")
	}
	t.Logf("FIGURES leader Service (ClusterIP, kube-proxy, EndpointSlices), %d handovers, %d requests every 20ms (%d failed: no endpoint): after a change of leader, requests reached the old leader for up to p50 %s max %s (in %d of %d handovers); the new leader answered through the Service from p50 %s max %s after the change",
		handovers, total, failed, ms(percentile(windows, 50)), ms(percentile(windows, 100)), misrouted, handovers, ms(percentile(gaps, 50)), ms(percentile(gaps, 100)))
}
