package node_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// demoSelector selects the chart's demo pods of a release.
func demoSelector(release string) string {
	return "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/component=demo"
}

// installDemo installs the chart with its demo app into a new namespace:
// the image is make image's, under the chart's appVersion, and the demo
// app's curlimages/curl is the node's tools image under that name, so the
// chart runs as it is. It returns the namespace, the Lease's name and the
// demo pods' selector.
func installDemo(t *testing.T, release string, set ...string) (ns, lease, selector string) {
	t.Helper()
	ns = namespace(t, release)
	args := []string{"install", release, "charts/leasehold", "--namespace", ns, "--set", "demo.enabled=true", "--wait", "--timeout", "3m"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	helm(t, args...)
	return ns, release + "-leasehold", demoSelector(release)
}

// helm install of the chart with the demo app, on a real kubelet: both
// pods start (leasehold as a native sidecar, Ready before the app starts),
// exactly one leads, the Lease names that pod, its fencing token is
// positive, and /readyz and /livez answer 200 on every pod, as the chart's
// startup and liveness probes expect (the kubelet ran them: the pods are
// Ready and never restarted).
func TestHelmInstallDemo(t *testing.T) {
	requireNode(t)
	start := time.Now()
	ns, lease, sel := installDemo(t, "demo")
	installed := time.Since(start)
	ps := waitReady(t, ns, sel, 2, time.Minute)
	lp, st := leader(t, ps, 30*time.Second) // the first leader of a new Lease: one lease duration (15s) after start
	led := time.Since(start)
	l, err := clientset.CoordinationV1().Leases(ns).Get(t.Context(), lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h == nil || holderPod(*h) != lp.Name || *h != st.Identity {
		t.Errorf("Lease holder %v, want %s (pod %s)", h, st.Identity, lp.Name)
	}
	if st.FencingToken <= 0 {
		t.Errorf("fencing token %d, want > 0", st.FencingToken)
	}
	for _, p := range ps {
		for _, path := range []string{"/readyz", "/livez"} {
			code, err := get(t.Context(), fmt.Sprintf("http://%s:%d%s", p.Status.PodIP, opsPort, path))
			if err != nil || code != 200 {
				t.Errorf("%s %s: %d %v, want 200", p.Name, path, code, err)
			}
		}
		sidecar := p.Status.InitContainerStatuses
		if len(sidecar) != 1 || sidecar[0].Name != "leasehold" || sidecar[0].RestartCount != 0 || !sidecar[0].Ready {
			t.Errorf("%s: init container statuses %+v: want leasehold, ready, never restarted", p.Name, sidecar)
		}
		if app := p.Status.ContainerStatuses; len(app) != 1 || app[0].State.Running == nil || sidecar[0].State.Running == nil ||
			app[0].State.Running.StartedAt.Before(&sidecar[0].State.Running.StartedAt) {
			t.Errorf("%s: the app started before its sidecar: %+v", p.Name, app)
		}
	}
	if logs := kubectl(t, "-n", ns, "logs", lp.Name, "-c", "app"); !strings.Contains(logs, `app: leader: {"fencingToken":`) {
		t.Errorf("the leader's app did not log its token:\n%s", logs)
	}
	t.Logf("FIGURES helm install: pods Ready %s after helm install began (helm --wait returned after %s); first leader %s, token %d, after %s",
		ms(installed), ms(installed), lp.Name, st.FencingToken, ms(led))
}
