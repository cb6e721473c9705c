package chart_test

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// The policy of rbac.leaseWritePolicy is off by default and in every ci
// values file: the default RBAC is the Role alone, and no admission policy
// matches Lease writes.
func TestLeaseWritePolicyIsOptIn(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	runs := map[string][]string{"defaults": nil, "shards": {"--set", "shards=2"}}
	for _, file := range ciValues(t) {
		runs[file] = []string{"-f", file}
	}
	for name, args := range runs {
		for _, o := range only(render(t, "ci", "shop", chartDir, args...), "ValidatingAdmissionPolicy") {
			if matchesLeaseWrites(t, o) {
				t.Errorf("%s: the ValidatingAdmissionPolicy %s on Leases without rbac.leaseWritePolicy", name, o.GetName())
			}
		}
	}
}

// matchesLeaseWrites says whether an admission policy matches writes to Leases
// (the fencing policy, fencing.enabled, matches the fenced resources).
func matchesLeaseWrites(t *testing.T, policy *unstructured.Unstructured) bool {
	t.Helper()
	vap := convert[admissionregistrationv1.ValidatingAdmissionPolicy](t, policy)
	if vap.Spec.MatchConstraints == nil {
		return false
	}
	for _, r := range vap.Spec.MatchConstraints.ResourceRules {
		if slices.Contains(r.Resources, "leases") {
			return true
		}
	}
	return false
}

// With rbac.leaseWritePolicy, the chart's ServiceAccount, which its group
// Role lets write every Lease of the namespace (RBAC cannot name member
// Leases), may write only its election's Leases and its group's labelled
// member Leases: the API server refuses its create, update and delete of
// any other Lease, of an unlabelled member-like Lease, and an update that
// takes the label off. The real sidecars, as that ServiceAccount, still
// share the group, hand over on SIGTERM and collect a crashed member's
// member Lease, with no request refused.
func TestLeaseWritePolicyNarrowsWhatRBACCannot(t *testing.T) {
	kubetest.Require(t, cluster)
	requireHelm(t)
	t.Parallel()
	ns := newNamespace(t, "writes")
	args := []string{"--set", "shards=2", "--set", "rbac.leaseWritePolicy=true"}
	s := chartSidecar(t, ns, args...)
	objs := render(t, "rbac", ns, chartDir, append([]string{"--set", "demo.enabled=true"}, args...)...)
	admin := cluster.Clientset()
	a := newApplier(t)
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		o := one(t, objs, kind)
		if err := a.create(t.Context(), ns, o, false); err != nil {
			t.Fatalf("%s %s: %v", kind, o.GetName(), err)
		}
	}
	policy := one(t, objs, "ValidatingAdmissionPolicy").GetName()
	t.Cleanup(func() {
		ctx := context.Background()
		_ = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, policy, metav1.DeleteOptions{})
		_ = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policy, metav1.DeleteOptions{})
	})

	saName := one(t, objs, "ServiceAccount").GetName()
	tok, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), saName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](900)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := tokenKubeconfig(t, tok.Status.Token)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	leases := kubernetes.NewForConfigOrDie(cfg).CoordinationV1().Leases(ns)
	ctx := t.Context()
	lease := func(name string, labels map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "(rbac.leaseWritePolicy)") {
			t.Errorf("%s: %v, want it refused by the policy", what, err)
		}
	}

	// Another application's Lease: RBAC lets the ServiceAccount create it;
	// the policy refuses, once the API server has loaded it.
	eventually(t, generous, "the policy refusing another Lease's create", func() bool {
		_, err := leases.Create(ctx, lease("other-app", nil), metav1.CreateOptions{})
		if err == nil {
			if err := admin.CoordinationV1().Leases(ns).Delete(ctx, "other-app", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			return false
		}
		refused("create of another Lease", err)
		return true
	})
	other, err := admin.CoordinationV1().Leases(ns).Create(ctx, lease("other-app", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Spec.HolderIdentity = ptr.To("intruder")
	_, err = leases.Update(ctx, other, metav1.UpdateOptions{})
	refused("update of another Lease", err)
	refused("delete of another Lease", leases.Delete(ctx, "other-app", metav1.DeleteOptions{}))

	// A name like a member Lease's is not enough: the label must say so,
	// before and after the write.
	memberOf := map[string]string{"leasehold.io/member-of": s.group}
	fake := group.MemberLeaseName(s.group, "someone")
	_, err = leases.Create(ctx, lease(fake, nil), metav1.CreateOptions{})
	refused("create of an unlabelled member Lease", err)
	_, err = leases.Create(ctx, lease(fake, map[string]string{"leasehold.io/member-of": "another-group"}), metav1.CreateOptions{})
	refused("create of another group's member Lease", err)
	m, err := leases.Create(ctx, lease(fake, memberOf), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create of a labelled member Lease: %v", err)
	}
	m.Labels = nil
	_, err = leases.Update(ctx, m, metav1.UpdateOptions{})
	refused("update that takes the member label off", err)
	if err := leases.Delete(ctx, fake, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete of a labelled member Lease: %v", err)
	}

	// The real sidecars, as the ServiceAccount: the group settles, a
	// leaver hands over and deletes its member Lease, a crashed member's
	// member Lease is collected; nothing is refused.
	f := fleetConfig(t, ns, s.lease, &kubetest.User{Name: saName, Kubeconfig: kubeconfig})
	f.Env = append(f.Env, s.env...)
	x := start(t, f, "x")
	y := start(t, f, "y")
	settled(t, x, y)
	stopGracefully(t, y)
	eventually(t, generous, "y's member Lease deleted and x holding both Leases", func() bool {
		return len(members(t, ns, s.group)) == 1 && len(heldBy(t, x)) == 2
	})
	z := start(t, f, "z")
	settled(t, x, z)
	idZ := identityOf(t, z)
	if err := z.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-z.Exited()
	eventually(t, generous, "z's member Lease collected by x", func() bool {
		return !slices.Contains(members(t, ns, s.group), group.MemberLeaseName(s.group, idZ)) && len(heldBy(t, x)) == 2
	})
	if n := forbidden(t, x, ""); n != 0 {
		t.Errorf("x: %v requests forbidden", n)
	}
	stopGracefully(t, x)
	noForbiddenInLogs(t, x, y, z)
}
