package kubetest_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &cluster)) }

func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := kubetest.Require(t, cluster).CreateNamespace(t.Context(), "kubetest")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func lease(name string) *coordinationv1.Lease {
	now := metav1.NowMicro()
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("a"),
			LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}
}

// The apiserver parses MicroTime strictly: six fractional digits or a 400.
// A fake clientset would accept any of these bodies.
func TestMicroTimeWithoutSixDigitsIsRejected(t *testing.T) {
	ns := newNamespace(t)
	rest := cluster.Clientset().CoordinationV1().RESTClient()
	post := func(name, renewTime string) error {
		body := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name +
			`"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15,"renewTime":"` + renewTime + `"}}`
		return rest.Post().Namespace(ns).Resource("leases").Body([]byte(body)).
			SetHeader("Content-Type", "application/json").Do(t.Context()).Error()
	}
	for _, bad := range []string{"2026-11-30T10:00:00Z", "2026-11-30T10:00:00.123Z", "2026-11-30T10:00:00.1234567Z"} {
		err := post("bad", bad)
		if !apierrors.IsBadRequest(err) {
			t.Errorf("renewTime %q: got %v, want 400 Bad Request", bad, err)
		}
	}
	if err := post("good", "2026-11-30T10:00:00.123456Z"); err != nil {
		t.Fatalf("control with six digits: %v", err)
	}
}

// A write carrying a stale resourceVersion gets 409 Conflict.
func TestStaleResourceVersionConflicts(t *testing.T) {
	ns := newNamespace(t)
	leases := cluster.Clientset().CoordinationV1().Leases(ns)
	created, err := leases.Create(t.Context(), lease("l"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := created.DeepCopy()
	first.Spec.HolderIdentity = ptr.To("b")
	if _, err := leases.Update(t.Context(), first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := created.DeepCopy()
	stale.Spec.HolderIdentity = ptr.To("c")
	_, err = leases.Update(t.Context(), stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("update with stale resourceVersion %s: got %v, want 409 Conflict", created.ResourceVersion, err)
	}
}

// A user bound to a Role may do what it grants and nothing more; a user
// bound to nothing may do nothing. Both credentials forms (rest.Config and
// kubeconfig file) authenticate as that user.
func TestRBACIsEnforced(t *testing.T) {
	ns := newNamespace(t)
	if _, err := cluster.Clientset().CoordinationV1().Leases(ns).Create(t.Context(), lease("mine"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reader, err := cluster.UserWithRole(t.Context(), ns, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "lease-reader"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"get"}, ResourceNames: []string{"mine"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := clientcmd.BuildConfigFromFlags("", reader.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*rest.Config{"rest.Config": reader.Config, "kubeconfig": fromFile} {
		leases := kubernetes.NewForConfigOrDie(cfg).CoordinationV1().Leases(ns)
		got, err := leases.Get(t.Context(), "mine", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: get granted lease: %v", name, err)
		}
		got.Spec.HolderIdentity = ptr.To("reader")
		if _, err := leases.Update(t.Context(), got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: update without the verb: got %v, want 403 Forbidden", name, err)
		}
		if _, err := leases.Get(t.Context(), "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: get of another lease: got %v, want 403 Forbidden", name, err)
		}
	}
	nobody, err := cluster.User("nobody")
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(nobody.Config).CoordinationV1().Leases(ns).Get(t.Context(), "mine", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("unbound user: got %v, want 403 Forbidden", err)
	}
}

// Cutting a proxy black-holes its client: requests hang until the client's
// own deadline (no "connection refused"), the connection stays open, and
// healing lets the same client through again.
func TestProxyCutIsABlackHole(t *testing.T) {
	ns := newNamespace(t)
	proxy, err := kubetest.Require(t, cluster).NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	user, err := cluster.Admin().Through(proxy)
	if err != nil {
		t.Fatal(err)
	}
	leases := kubernetes.NewForConfigOrDie(user.Config).CoordinationV1().Leases(ns)
	if _, err := leases.List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("through the healed proxy: %v", err)
	}
	if proxy.Connections() == 0 {
		t.Fatal("the client holds no connection through the proxy")
	}

	proxy.Cut()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	_, err = leases.List(ctx, metav1.ListOptions{})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("through the cut proxy: got %v, want the client's deadline to expire", err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a cut must not refuse connections: %v", err)
	}
	if proxy.Connections() == 0 {
		t.Fatal("cut closed the client's connections; a black hole keeps them open")
	}

	proxy.Heal()
	if _, err := leases.List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

// The apiserver can be stopped and started again on the same port; data
// written before the outage is still there, and clients reconnect.
func TestAPIServerRestartKeepsPortAndData(t *testing.T) {
	ns := newNamespace(t)
	leases := cluster.Clientset().CoordinationV1().Leases(ns)
	if _, err := leases.Create(t.Context(), lease("survivor"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := cluster.Host()
	if err := cluster.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_, err := leases.Get(ctx, "survivor", metav1.GetOptions{})
	cancel()
	if err == nil {
		t.Fatal("the apiserver answered while stopped")
	}
	if err := cluster.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cluster.Host() != host {
		t.Fatalf("host changed across restart: %s → %s", host, cluster.Host())
	}
	if _, err := leases.Get(t.Context(), "survivor", metav1.GetOptions{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// Stop leaves no process behind.
func TestStopLeavesNoProcess(t *testing.T) {
	kubetest.Require(t, cluster)
	c, err := kubetest.Start(t.Context(), kubetest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pids := c.PIDs()
	if len(pids) != 2 {
		t.Fatalf("running processes: %v, want etcd and kube-apiserver", pids)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop (kill -0: %v)", pid, err)
		}
	}
}
