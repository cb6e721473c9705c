package node_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// summary is the part of the kubelet's /stats/summary the test reads.
type summary struct {
	Pods []struct {
		PodRef     struct{ Name, Namespace string } `json:"podRef"`
		Containers []struct {
			Name   string `json:"name"`
			Memory struct {
				WorkingSetBytes uint64 `json:"workingSetBytes"`
			} `json:"memory"`
		} `json:"containers"`
	} `json:"pods"`
}

// workingSets reads each container's working set in a pod from the
// kubelet's /stats/summary (through the apiserver's node proxy).
func workingSets(t *testing.T, ns, pod string) map[string]uint64 {
	t.Helper()
	data, err := clientset.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/leasehold-node/proxy/stats/summary").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, p := range s.Pods {
		if p.PodRef.Namespace == ns && p.PodRef.Name == pod {
			for _, c := range p.Containers {
				out[c.Name] = c.Memory.WorkingSetBytes
			}
		}
	}
	return out
}

// sampleWorkingSets samples n times, every, and returns each container's
// median.
func sampleWorkingSets(t *testing.T, ns, pod string, n int, every time.Duration) map[string]uint64 {
	t.Helper()
	samples := map[string][]uint64{}
	for i := range n {
		if i > 0 {
			time.Sleep(every)
		}
		for c, ws := range workingSets(t, ns, pod) {
			samples[c] = append(samples[c], ws)
		}
	}
	out := map[string]uint64{}
	for c, s := range samples {
		slices.Sort(s)
		out[c] = s[len(s)/2]
	}
	return out
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// metric reads one unlabelled gauge from a pod's OPS /metrics.
func metric(t *testing.T, podIP, name string) float64 {
	t.Helper()
	resp, err := httpClient.Get(fmt.Sprintf("http://%s:%d/metrics", podIP, opsPort))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + `(?:\{[^}]*\})? (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// Memory as the kubelet reports it (the working set in /stats/summary): the
// chart's own pod spec (its demo Deployment, leasehold as a native sidecar
// with the chart's resources and limit) plus two containers: the bench's
// client-go LeaderElector (the baseline, on a Lease of its own) and a
// client that opens 1,000 long-poll watches on leasehold's API some time
// after the pod starts (maxBlockingRequests raised to 1,000 for it: the
// default bound is 300 per listener). leasehold's container idle, then with 1,000
// watchers, beside the baseline's idle: the per-pod cost users pay, within
// the chart's memory limit.
func TestMemoryBesideClientGo(t *testing.T) {
	requireNode(t)
	const release = "mem"
	ns := namespace(t, release)
	helm(t, "install", release, "charts/leasehold", "--namespace", ns, "--wait")
	rendered := helm(t, "template", release, "charts/leasehold", "--namespace", ns, "--set", "demo.enabled=true,demo.replicas=1,maxBlockingRequests=1000",
		"--show-only", "templates/demo-deployment.yaml")
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(rendered), &d); err != nil {
		t.Fatal(err)
	}
	spec := &d.Spec.Template.Spec
	sidecar := spec.InitContainers[0]
	limit, request := sidecar.Resources.Limits.Memory().Value(), sidecar.Resources.Requests.Memory().Value()
	baselineEnv := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "LEASEHOLD_LEASE_NAME", Value: "baseline"},
		{Name: "LEASEHOLD_API_ADDR", Value: "127.0.0.1:5040"},
		{Name: "LEASEHOLD_OPS_ADDR", Value: ":5041"},
	}
	tools := "localhost/leasehold-node/tools:1"
	spec.Containers = append(spec.Containers,
		corev1.Container{Name: "baseline", Image: tools, ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/baseline"}, Env: baselineEnv,
			SecurityContext: sidecar.SecurityContext},
		corev1.Container{Name: "watchers", Image: tools, ImagePullPolicy: corev1.PullNever,
			Command:         []string{"/bin/sh", "-c", "until [ -e /tmp/go ]; do sleep 1; done; exec /bin/watchers -n 1000 -api http://127.0.0.1:4040"},
			SecurityContext: &corev1.SecurityContext{RunAsUser: sidecar.SecurityContext.RunAsUser, RunAsNonRoot: sidecar.SecurityContext.RunAsNonRoot}})
	if _, err := clientset.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "baseline"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "list", "watch"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clientset.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "baseline"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "baseline"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: spec.ServiceAccountName, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clientset.AppsV1().Deployments(ns).Create(t.Context(), &d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := demoSelector(release)
	ps := waitReady(t, ns, sel, 1, 2*time.Minute)
	pod := ps[0]
	leader(t, ps, 40*time.Second)
	eventually(t, time.Second, time.Minute, "the baseline leading", func() (bool, error) {
		code, err := get(t.Context(), fmt.Sprintf("http://%s:5041/metrics", pod.Status.PodIP))
		return code == http.StatusOK, err
	})
	const rest, samples, every = 20 * time.Second, 5, 4 * time.Second
	time.Sleep(rest) // let start-up garbage be collected and the kubelet's stats catch up
	idle := sampleWorkingSets(t, ns, pod.Name, samples, every)

	kubectl(t, "-n", ns, "exec", pod.Name, "-c", "watchers", "--", "touch", "/tmp/go")
	eventually(t, 500*time.Millisecond, time.Minute, "1,000 watchers on leasehold", func() (bool, error) {
		return metric(t, pod.Status.PodIP, "leasehold_watchers") >= 1000, nil
	})
	time.Sleep(rest)
	loaded := sampleWorkingSets(t, ns, pod.Name, samples, every)
	p, err := clientset.CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restarts := p.Status.InitContainerStatuses[0].RestartCount
	if restarts != 0 {
		t.Errorf("leasehold restarted %d times (OOM at the chart's limit of %d MiB?)", restarts, limit>>20)
	}
	if loaded["leasehold"] == 0 || idle["leasehold"] == 0 || idle["baseline"] == 0 {
		t.Fatalf("working sets idle %v, with watchers %v", idle, loaded)
	}
	if loaded["leasehold"] >= uint64(limit) {
		t.Errorf("leasehold's working set with 1,000 watchers %s, at or over the chart's limit %s", mib(loaded["leasehold"]), mib(uint64(limit)))
	}
	t.Logf("FIGURES memory (kubelet /stats/summary working set, median of 5 samples): leasehold idle %s, with 1,000 watchers %s (chart limit %s); client-go LeaderElector (bench baseline) idle %s, same pod",
		mib(idle["leasehold"]), mib(loaded["leasehold"]), mib(uint64(limit)), mib(idle["baseline"]))
	writeBenchJSON(t, nodeFigures{
		Samples: samples, Every: every.String(), Rest: rest.String(), Watchers: 1000, Request: request, Limit: limit,
		Idle: int64(idle["leasehold"]), WithWatchers: int64(loaded["leasehold"]), Baseline: int64(idle["baseline"]), Restarts: restarts,
	})
}
