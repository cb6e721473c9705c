package fencepolicy

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &cluster)) }

// generous bounds real-time waits; it never decides an outcome that a
// tighter bound is asserted for.
const generous = 30 * time.Second

const leaseName = "leader"

// probeAnnotation is read by a validation the tests add to the policy (see
// probeRule): a write carrying it is refused while the apiserver's copy of
// the Lease has the resourceVersion it names. It tells when the policy,
// its binding and the Lease's current version have all reached admission.
const probeAnnotation = "leasehold.test/probe"

var probeRule = rule{
	name:              "probe",
	expression:        `!(` + annotation("object", probeAnnotation) + ` == params.metadata.resourceVersion)`,
	message:           "probe",
	messageExpression: `'probe: the Lease is at ' + params.metadata.resourceVersion`,
}

// fixture is one namespace with a Lease and the policy for it.
type fixture struct {
	t         *testing.T
	ctx       context.Context
	namespace string
	cs        kubernetes.Interface
	probes    int
}

// newFixture makes a namespace with the Lease (publishing token, with
// floor, none when 0) and applies the policy for configmaps, without the
// rules named in without.
func newFixture(t *testing.T, token, floor fence.Token, without ...string) *fixture {
	t.Helper()
	c := kubetest.Require(t, cluster)
	ns, err := c.CreateNamespace(t.Context(), "fence")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: t.Context(), namespace: ns, cs: c.Clientset()}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: ns}}
	if _, err := f.cs.CoordinationV1().Leases(ns).Create(f.ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.setLease(token, floor)
	f.apply(f.options(), without...)
	return f
}

func (f *fixture) options() Options {
	return Options{Lease: leaseName, Namespace: f.namespace, Resources: DefaultResources}
}

// apply creates the policy and binding for o, less the rules named in
// without, plus probeRule, deletes them when the test ends, and waits
// until admission enforces them.
func (f *fixture) apply(o Options, without ...string) {
	f.t.Helper()
	var vs []rule
	for _, r := range rules {
		if !containsName(without, r.name) {
			vs = append(vs, r)
		}
	}
	if len(vs) != len(rules)-len(without) {
		f.t.Fatalf("dropping %v: no such rule", without)
	}
	policy, binding := build(o, append([]rule{probeRule}, vs...)) // the probe first: its refusal is the one reported
	createPolicy(f.t, f.cs, policy, binding)
	f.awaitLease()
}

func containsName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// createPolicy creates policy and binding and deletes them at the end of
// the test.
func createPolicy(t *testing.T, cs kubernetes.Interface, policy *admissionregistrationv1.ValidatingAdmissionPolicy, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	adm := cs.AdmissionregistrationV1()
	if _, err := adm.ValidatingAdmissionPolicies().Create(t.Context(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setLease writes the Lease's published token and floor (0: none) and
// waits until admission sees that version.
func (f *fixture) setLease(token, floor fence.Token) {
	f.t.Helper()
	leases := f.cs.CoordinationV1().Leases(f.namespace)
	l, err := leases.Get(f.ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	l.Annotations = map[string]string{}
	if token != 0 {
		l.Annotations[fence.Annotation] = token.String()
	}
	if floor != 0 {
		l.Annotations[fence.FloorAnnotation] = floor.String()
	}
	if _, err := leases.Update(f.ctx, l, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// awaitLease waits until a write carrying the probe for the Lease's
// current resourceVersion is refused by the probe: admission enforces the
// policy with the Lease as it is now.
func (f *fixture) awaitLease() {
	f.t.Helper()
	l, err := f.cs.CoordinationV1().Leases(f.namespace).Get(f.ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	poll.Until(f.t, generous, 10*time.Millisecond, "the policy enforced with Lease version "+l.ResourceVersion, func() bool {
		f.probes++
		cm := f.configMap(fmt.Sprintf("probe-%d", f.probes), "1")
		cm.Annotations[probeAnnotation] = l.ResourceVersion
		_, err := f.configMaps().Create(f.ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "probe: the Lease is at "+l.ResourceVersion)
	})
}

// setLeaseAndWait is setLease, then awaitLease.
func (f *fixture) setLeaseAndWait(token, floor fence.Token) {
	f.t.Helper()
	f.setLease(token, floor)
	f.awaitLease()
}

func (f *fixture) configMaps() interface {
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Get(context.Context, string, metav1.GetOptions) (*corev1.ConfigMap, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
} {
	return f.cs.CoreV1().ConfigMaps(f.namespace)
}

// configMap is a fenced ConfigMap named name stamped with token ("": no
// annotation).
func (f *fixture) configMap(name, token string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: f.namespace,
			Labels:      map[string]string{FencedByLabel: leaseName},
			Annotations: map[string]string{},
		},
		Data: map[string]string{"primary": "a"},
	}
	if token != "" {
		cm.Annotations[TokenAnnotation] = token
	}
	return cm
}

// create creates the fenced ConfigMap name with token and fails the test
// if it is refused.
func (f *fixture) create(name, token string) *corev1.ConfigMap {
	f.t.Helper()
	cm, err := f.configMaps().Create(f.ctx, f.configMap(name, token), metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("create %s with token %q: %v", name, token, err)
	}
	return cm
}

// restamp is cm with its token set to token, and its data changed so the
// write is never a no-op.
func restamp(cm *corev1.ConfigMap, token string) *corev1.ConfigMap {
	cm = cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[TokenAnnotation] = token
	cm.Data["written"] = time.Now().Format(time.RFC3339Nano)
	return cm
}

// wantRefused fails t unless err is the policy's refusal by rule (its
// message starts "leasehold fencing <rule>") and contains every fragment.
func wantRefused(t *testing.T, what string, err error, rule string, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: landed; want refused by %s", what, rule)
		return
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "leasehold fencing "+rule+" ") {
		t.Errorf("%s: %v; want refused (403) by %s", what, err, rule)
		return
	}
	for _, frag := range fragments {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("%s: message %q does not contain %q", what, err, frag)
		}
	}
}

// wantLanded fails t if err is not nil.
func wantLanded(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v; want it to land", what, err)
	}
}

// variant runs body against the full policy and against the policy without
// rule: body(f, full) checks what the rule refuses when full and that the
// same write lands when not, so every rule's test fails with the rule
// removed from the policy.
func variant(t *testing.T, rule string, token, floor fence.Token, body func(t *testing.T, f *fixture, full bool)) {
	for _, full := range []bool{true, false} {
		name := "full policy"
		var without []string
		if !full {
			name, without = "without "+rule, []string{rule}
		}
		t.Run(name, func(t *testing.T) {
			body(t, newFixture(t, token, floor, without...), full)
		})
	}
}

// outcome checks err against the variant: refused by rule when full,
// landed otherwise.
func outcome(t *testing.T, full bool, what string, err error, rule string, fragments ...string) {
	t.Helper()
	if full {
		wantRefused(t, what, err, rule, fragments...)
	} else {
		wantLanded(t, what, err)
	}
}
