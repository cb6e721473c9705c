// Package node_test runs leasehold the way users run it: its image, in real
// pods on a real kubelet (make node: the single node of hack/node),
// installed with Helm or with the examples' manifests as they are. Each
// scenario of issue 25 is a test; each logs its figures on lines starting
// "FIGURES", which make node-e2e prints.
//
// The tests need a running node: LEASEHOLD_NODE_KUBECONFIG names its admin
// kubeconfig (make node-e2e starts the node, runs them and takes it down);
// without it they skip. helm comes from $LEASEHOLD_HELM (make helm-bin).
// The host reaches every pod's OPS port (the read-only /v1/status) on its
// pod IP, through the node's pod bridge.
package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/testing/poll"
	"github.com/leasehold/leasehold/pkg/api"
)

const (
	kubeconfigEnv = "LEASEHOLD_NODE_KUBECONFIG"
	helmEnv       = "LEASEHOLD_HELM"
	opsPort       = 4041
)

var (
	kubeconfig string
	restConfig *rest.Config
	clientset  *kubernetes.Clientset
	helmBin    string
	root       string // the repository
)

func TestMain(m *testing.M) {
	kubeconfig = os.Getenv(kubeconfigEnv)
	if kubeconfig != "" {
		var err error
		if restConfig, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		restConfig.QPS, restConfig.Burst = 100, 200
		if clientset, err = kubernetes.NewForConfig(restConfig); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if root, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		helmBin = os.Getenv(helmEnv)
	}
	os.Exit(m.Run())
}

// requireNode skips the test unless a node is running.
func requireNode(t *testing.T) {
	t.Helper()
	if clientset == nil {
		t.Skipf("no node: set %s (make node-e2e does)", kubeconfigEnv)
	}
}

// namespace creates a namespace for the test, deleted at its end.
func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}
	ns, err := clientset.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = clientset.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		// The pods' shutdown is part of the test's cost: wait for it, so the
		// next test starts on an idle node.
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := clientset.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
			return err != nil, nil
		})
	})
	return ns.Name
}

// helm runs helm with the node's kubeconfig.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	if helmBin == "" {
		t.Fatalf("no helm: set %s (make helm-bin builds it)", helmEnv)
	}
	cmd := exec.CommandContext(t.Context(), helmBin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubectl runs the node's kubectl (next to its kubelet) with its kubeconfig.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), kubectlPath(), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubeAssets is the folder of the node's binaries (make sets it).
func kubeAssets() string { return os.Getenv("LEASEHOLD_KUBE_ASSETS") }

// kubectlPath is the node's kubectl.
func kubectlPath() string { return kubeAssets() + "/kubectl" }

// eventually calls cond every interval until it returns true, failing the
// test after timeout with what and the error of cond's last call (an error
// does not end the wait).
func eventually(t *testing.T, interval, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	poll.UntilReport(t, timeout, interval, what, func() bool {
		var ok bool
		ok, last = cond()
		return ok
	}, func() string { return fmt.Sprintf("last error: %v", last) })
}

// pods lists the namespace's pods matching selector that are not being
// deleted.
func pods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	list, err := clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// ready reports whether every container of the pod is running and ready:
// the app containers and the native sidecars; the other init containers
// have completed.
func ready(p corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.InitContainerStatuses {
		if done := c.State.Terminated; done != nil && done.ExitCode == 0 && !sidecar(p, c.Name) {
			continue
		}
		if c.State.Running == nil || !c.Ready {
			return false
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil || !c.Ready {
			return false
		}
	}
	return true
}

// sidecar reports whether the pod's init container name is a native
// sidecar (restartPolicy: Always).
func sidecar(p corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

// waitReady waits for exactly n pods matching selector, all ready, and
// returns them.
func waitReady(t *testing.T, ns, selector string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var got []corev1.Pod
	eventually(t, 200*time.Millisecond, timeout, fmt.Sprintf("%d ready pods %s in %s", n, selector, ns), func() (bool, error) {
		got = pods(t, ns, selector)
		if len(got) != n {
			return false, fmt.Errorf("%d pods", len(got))
		}
		for _, p := range got {
			if !ready(p) {
				return false, fmt.Errorf("%s not ready", p.Name)
			}
		}
		return true, nil
	})
	return got
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// status asks a pod's sidecar for its status on the OPS port.
func status(ctx context.Context, podIP string) (api.Status, error) {
	var st api.Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%d/v1/status", podIP, opsPort), nil)
	if err != nil {
		return st, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /v1/status: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// get returns the HTTP status code of GET url.
func get(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// leaders waits until exactly one of the pods reports itself leader, and
// returns it and its status.
func leader(t *testing.T, ps []corev1.Pod, timeout time.Duration) (corev1.Pod, api.Status) {
	t.Helper()
	var lp corev1.Pod
	var lst api.Status
	eventually(t, 100*time.Millisecond, timeout, "exactly one leader", func() (bool, error) {
		n := 0
		for _, p := range ps {
			st, err := status(t.Context(), p.Status.PodIP)
			if err != nil {
				return false, err
			}
			if st.Leader {
				n++
				lp, lst = p, st
			}
		}
		return n == 1, fmt.Errorf("%d leaders", n)
	})
	return lp, lst
}

// holderPod is the pod of a holder identity (<pod name>_<suffix>).
func holderPod(identity string) string {
	pod, _, _ := strings.Cut(identity, "_")
	return pod
}

// leaseEvent is one version of a Lease as the test's watch saw it.
type leaseEvent struct {
	at     time.Time
	holder string
	rv     string
}

// leaseRecorder watches one Lease and records every version it sees.
type leaseRecorder struct {
	mu     sync.Mutex
	events []leaseEvent
	cancel context.CancelFunc
	done   chan struct{}
}

// recordLease starts watching the Lease; the watch ends with the test.
func recordLease(t *testing.T, ns, name string) *leaseRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &leaseRecorder{cancel: cancel, done: make(chan struct{})}
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	w, err := clientset.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				l, isLease := ev.Object.(*coordinationv1.Lease)
				if !isLease || ev.Type == watch.Deleted {
					continue
				}
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				r.mu.Lock()
				r.events = append(r.events, leaseEvent{time.Now(), holder, l.ResourceVersion})
				r.mu.Unlock()
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *leaseRecorder) stop() {
	r.cancel()
	<-r.done
}

// since returns the versions seen at or after t.
func (r *leaseRecorder) since(t time.Time) []leaseEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []leaseEvent
	for _, e := range r.events {
		if !e.at.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// holderChanges counts the changes of non-empty holder in events, starting
// from holder from: a release to nobody and the next acquire count once.
func holderChanges(from string, events []leaseEvent) (changes int, last string) {
	last = from
	for _, e := range events {
		if e.holder != "" && e.holder != last {
			changes++
			last = e.holder
		}
	}
	return changes, last
}

// percentile is the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }
