package chart_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/fencepolicy"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// fencingKinds are the kinds fencing.enabled renders.
var fencingKinds = []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

// fencingPolicyCLI runs `leasehold fencing-policy` (the built sidecar
// binary) and returns its stdout, stderr and exit status.
func fencingPolicyCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if sidecar == "" {
		t.Skip("needs the sidecar binary (not built with -short)")
	}
	cmd := exec.CommandContext(t.Context(), sidecar, append([]string{"fencing-policy"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// The chart's fencing objects are, for each Lease the chart knows, the
// policy and binding that `leasehold fencing-policy` prints for that Lease,
// the release namespace and fencing.resources: equal as typed objects,
// but for the labels (the chart's own, which wantLabels checks on every
// rendered object, instead of the CLI's managed-by: leasehold). With a
// lease group every role or shard gets its own pair; the member Leases of
// the group or of handover: successor get none (no app writes with their
// tokens).
func TestFencingObjectsAreTheCLIs(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	for name, tc := range map[string]struct {
		args      []string
		leases    []string
		resources string // --resources, "" for the CLI's default
	}{
		"single Lease, default resources": {nil, []string{"ci-leasehold"}, ""},
		"named Lease, several resources": {[]string{"--set", "leaseName=orders.leader", "--set", "fencing.resources={configmaps,apps/deployments,example.com/widgets}"},
			[]string{"orders.leader"}, "configmaps,apps/deployments,example.com/widgets"},
		"handover: successor":  {[]string{"--set", "handover=successor"}, []string{"ci-leasehold"}, ""},
		"shards":               {[]string{"--set", "leaseName=orders", "--set", "shards=3"}, []string{"orders-0", "orders-1", "orders-2"}, ""},
		"named roles":          {[]string{"--set", "leases={scheduler,compactor}", "--set", "fencing.resources={ apps/statefulsets }"}, []string{"scheduler", "compactor"}, "apps/statefulsets"},
		"observer of a Lease":  {[]string{"--set", "candidate=false"}, []string{"ci-leasehold"}, ""},
		"a name of digits too": {[]string{"--set-string", "leaseName=1234"}, []string{"1234"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			objs := render(t, "ci", "shop", chartDir, append([]string{"--set", "fencing.enabled=true"}, tc.args...)...)
			policies, bindings := only(objs, fencingKinds[0]), only(objs, fencingKinds[1])
			if len(policies) != len(tc.leases) || len(bindings) != len(tc.leases) {
				t.Fatalf("%d policies and %d bindings, want one of each per Lease %v", len(policies), len(bindings), tc.leases)
			}
			for i, lease := range tc.leases {
				args := []string{"--lease", lease, "--namespace", "shop"}
				if tc.resources != "" {
					args = append(args, "--resources", tc.resources)
				}
				out, stderr, code := fencingPolicyCLI(t, args...)
				if code != 0 {
					t.Fatalf("leasehold fencing-policy %v: exit %d\n%s", args, code, stderr)
				}
				printed, err := decode(out)
				if err != nil || len(printed) != 2 {
					t.Fatalf("leasehold fencing-policy printed %d objects (%v), want 2:\n%s", len(printed), err, out)
				}
				samePolicy(t, lease, convert[admissionregistrationv1.ValidatingAdmissionPolicy](t, policies[i]),
					convert[admissionregistrationv1.ValidatingAdmissionPolicy](t, withoutStatus(printed[0])))
				samePolicy(t, lease, convert[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, bindings[i]),
					convert[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, withoutStatus(printed[1])))
			}
		})
	}
}

// withoutStatus drops the empty status the CLI prints (a Go struct's zero
// value), which the apiserver ignores on create.
func withoutStatus(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	unstructured.RemoveNestedField(obj.Object, "status")
	return obj
}

// fencingObject is a policy or a binding.
type fencingObject interface {
	*admissionregistrationv1.ValidatingAdmissionPolicy | *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	SetLabels(map[string]string)
	GetName() string
}

// samePolicy fails t unless the chart's object equals the CLI's but for
// the labels.
func samePolicy[T fencingObject](t *testing.T, lease string, chart, cli T) {
	t.Helper()
	chart.SetLabels(nil)
	cli.SetLabels(nil)
	if !equality.Semantic.DeepEqual(chart, cli) {
		c, _ := yaml.Marshal(chart)
		p, _ := yaml.Marshal(cli)
		t.Errorf("Lease %s: the chart's %s differs from leasehold fencing-policy's:\nchart:\n%s\nCLI:\n%s", lease, cli.GetName(), c, p)
	}
}

// Fencing is off by default: the default rendering, and one with the demo,
// has no admission policy or binding, and the sidecar does not publish a
// token floor.
func TestFencingIsOffByDefault(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	for _, args := range [][]string{nil, {"--set", "demo.enabled=true"}, {"--set", "demo.enabled=true", "--set", "shards=2", "--set", "fencing.resources={secrets}"}} {
		objs := render(t, "ci", "ci-ns", chartDir, args...)
		for _, kind := range fencingKinds {
			if found := only(objs, kind); len(found) != 0 {
				t.Errorf("helm template %v renders %d %s; want none unless fencing.enabled", args, len(found), kind)
			}
		}
		for _, d := range only(objs, "Deployment") {
			c := container(convert[appsv1.Deployment](t, d).Spec.Template.Spec.InitContainers, "leasehold")
			wantUnset(t, c, "LEASEHOLD_FENCING_FLOOR")
		}
	}
}

// A fencing.resources item that `leasehold fencing-policy --resources`
// refuses fails the rendering with the CLI's own message; so does a Lease
// name that cannot be the label's value.
func TestFencingRefusesWhatTheCLIRefuses(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	long := strings.Repeat("a", 64)
	for name, items := range map[string][]string{
		"upper case":                   {"ConfigMaps"},
		"a subresource":                {"apps/deployments/scale"},
		"a version":                    {"apps/v1/deployments"},
		"a group that is no subdomain": {"Apps_/deployments"},
		"a group too long":             {strings.Repeat("g", 254) + "/widgets"},
		"dots in the resource":         {"config.maps"},
		"a resource too long":          {long},
		"too long and upper case":      {strings.ToUpper(long)},
		"empty":                        {""},
		"blank":                        {"  "},
		"no resource after the group":  {"apps/"},
		"named twice":                  {"configmaps", "configmaps"},
		"a group's named twice":        {"apps/deployments", "configmaps", "apps/deployments"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := fencingPolicyCLI(t, "--lease", "orders", "--resources", strings.Join(items, ","))
			const prefix = "leasehold fencing-policy: "
			if code != 2 || !strings.HasPrefix(stderr, prefix) {
				t.Fatalf("leasehold fencing-policy --resources %q: exit %d, stderr %q; want 2 and %q", strings.Join(items, ","), code, stderr, prefix)
			}
			msg := strings.TrimPrefix(strings.TrimPrefix(strings.SplitN(stderr, "\n", 2)[0], prefix), "--resources: ")
			want := "fencing.resources: " + msg
			list, err := yaml.Marshal(map[string]any{"fencing": map[string]any{"enabled": true, "resources": items}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := helm(t, "template", "bad", chartDir, "-f", writeValues(t, string(list)))
			if err == nil {
				t.Fatalf("helm template with fencing.resources %q succeeded:\n%s", items, out)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("helm template with fencing.resources %q:\n%v\nwant the CLI's message:\n%s", items, err, want)
			}
		})
	}
	t.Run("a Lease name too long for the label", func(t *testing.T) {
		t.Parallel()
		prefix := strings.Repeat("s", 61) // shards -0 … -9 fit in 63 characters, -10 does not
		_, stderr, code := fencingPolicyCLI(t, "--lease", prefix+"-10")
		cliMsg := strings.TrimPrefix(strings.SplitN(stderr, "\n", 2)[0], "leasehold fencing-policy: ")
		if code != 2 || !strings.Contains(cliMsg, "cannot be the value of the label") {
			t.Fatalf("leasehold fencing-policy: exit %d, %q", code, stderr)
		}
		_, err := helm(t, "template", "bad", chartDir, "--set", "fencing.enabled=true", "--set", "leaseName="+prefix, "--set", "shards=11")
		if err == nil || !strings.Contains(err.Error(), "fencing.enabled: "+cliMsg) {
			t.Errorf("helm template with shard %s-10: %v\nwant the CLI's message %q", prefix, err, cliMsg)
		}
	})
	t.Run("no resource", func(t *testing.T) {
		t.Parallel()
		_, err := helm(t, "template", "bad", chartDir, "--set", "fencing.enabled=true", "--set-json", "fencing.resources=[]")
		if err == nil || !strings.Contains(err.Error(), "at '/fencing/resources'") {
			t.Errorf("helm template with no fenced resource: %v; want the schema's refusal", err)
		}
	})
}

// installerRule is what lets a user install, upgrade and uninstall the
// chart's fencing objects; installerLeaseRule what the apiserver also
// requires of whoever creates a policy whose parameter is a Lease, or a
// binding that names one: get on Leases in every namespace.
var (
	installerRule = rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"},
		Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"},
		Verbs:     []string{"get", "list", "create", "update", "patch", "delete"}}
	installerLeaseRule = rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}}
)

// Who may install the fencing objects (chart README, "Fenced writes"): a
// user bound to a ClusterRole with installerRule and installerLeaseRule
// creates the rendered policy and binding; with installerRule alone the
// apiserver refuses the policy, for want of get on Leases.
func TestFencingObjectsNeedClusterWidePermissions(t *testing.T) {
	kubetest.Require(t, cluster)
	requireHelm(t)
	t.Parallel()
	ctx := t.Context()
	cs := cluster.Clientset()
	ns := newNamespace(t, "fencing-installer")
	objs := render(t, "ci", ns, chartDir, "--set", "fencing.enabled=true")
	policy := one(t, objs, fencingKinds[0])
	binding := one(t, objs, fencingKinds[1])

	name := "fencing-installer-" + ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{installerRule}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = cs.RbacV1().ClusterRoleBindings().Delete(bg, name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(bg, name, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(bg, binding.GetName(), metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(bg, policy.GetName(), metav1.DeleteOptions{})
	})
	user, err := cluster.User(name)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(user.Config)
	create := func(obj *unstructured.Unstructured) error {
		gvr := admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies")
		if obj.GetKind() == fencingKinds[1] {
			gvr = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings")
		}
		_, err := dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	allowed := func(verb, group, resource string) bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: name,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource}}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed
	}

	eventually(t, generous, "the installer's ClusterRole in force", func() bool {
		return allowed("create", "admissionregistration.k8s.io", "validatingadmissionpolicies")
	})
	const refusal = `must have "get" permission on all objects of the referenced paramKind (kind=Lease`
	if err := create(policy); err == nil || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("the policy created without get on Leases: %v; want refused (%q)", err, refusal)
	}

	role.Rules = append(role.Rules, installerLeaseRule)
	if _, err := cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, generous, "get on Leases in force", func() bool { return allowed("get", "coordination.k8s.io", "leases") })
	for _, obj := range []*unstructured.Unstructured{policy, binding} {
		if err := create(obj); err != nil {
			t.Errorf("%s %s as the installer: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// helm install with fencing.enabled puts the policy in force on the
// release namespace: while the Lease does not exist a fenced write is
// refused, once it publishes a token a write with a lower one is refused
// (rule 3) and one with that token lands; helm uninstall removes the
// cluster-scoped objects.
func TestHelmInstallsTheFencingPolicy(t *testing.T) {
	kubetest.Require(t, cluster)
	requireHelm(t)
	t.Parallel()
	ctx := t.Context()
	cs := cluster.Clientset()
	ns := newNamespace(t, "fencing-install")
	hl := func(args ...string) string {
		return mustHelm(t, append(args, "--namespace", ns, "--kubeconfig", cluster.Admin().Kubeconfig)...)
	}
	hl("install", "fenced", chartDir, "--set", "fencing.enabled=true")
	const lease = "fenced-leasehold"
	name := "leasehold-fencing." + ns + "." + lease
	admission := cs.AdmissionregistrationV1()
	t.Cleanup(func() { // if uninstall was not reached
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = admission.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	write := func(token string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "state",
			Labels:      map[string]string{fencepolicy.FencedByLabel: lease},
			Annotations: map[string]string{fencepolicy.TokenAnnotation: token}}}
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	var err error
	eventually(t, generous, "a fenced write refused for want of the Lease", func() bool {
		err = write("5")
		return err != nil && strings.Contains(err.Error(), "no params found")
	})

	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease, Annotations: map[string]string{fencepolicy.TokenAnnotation: "100"}}}
	if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, generous, "a write with token 5 refused by rule 3 (the Lease publishes 100)", func() bool {
		err = write("5")
		return err != nil && strings.Contains(err.Error(), "leasehold fencing rule 3")
	})
	if err := write("100"); err != nil {
		t.Errorf("a write with the Lease's token: %v", err)
	}

	hl("uninstall", "fenced", "--wait")
	if _, err := admission.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the policy after helm uninstall: %v; want it gone", err)
	}
	if _, err := admission.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the binding after helm uninstall: %v; want it gone", err)
	}
}
