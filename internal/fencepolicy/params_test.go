package fencepolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// A policy for a Lease that does not exist refuses every write to its
// fenced objects, even one stamped with any token, and says why; objects
// that are not fenced are not touched.
func TestMissingLeaseRefusesEveryWrite(t *testing.T) {
	c := kubetest.Require(t, cluster)
	ns, err := c.CreateNamespace(t.Context(), "fence")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: t.Context(), namespace: ns, cs: c.Clientset()}
	policy, binding := Objects(f.options()) // no Lease named leader in ns
	createPolicy(t, f.cs, policy, binding)
	var refusal error
	poll.Until(t, generous, 10*time.Millisecond, "a write refused for want of the Lease", func() bool {
		_, refusal = f.configMaps().Create(f.ctx, f.configMap("any", "999"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refusal != nil
	})
	for _, want := range []string{"ValidatingAdmissionPolicy '" + policy.Name + "'", "no params found", "Deny"} {
		if !strings.Contains(refusal.Error(), want) {
			t.Errorf("refusal %q does not contain %q", refusal, want)
		}
	}
	if !apierrors.IsInvalid(refusal) { // the apiserver's code for a binding it cannot evaluate
		t.Errorf("refusal %v is not a 422", refusal)
	}
	for _, token := range []string{"1", "999999999999999999", ""} {
		_, err := f.configMaps().Create(f.ctx, f.configMap("stamped", token), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "no params found") {
			t.Errorf("create with token %q: %v; want refused for want of the Lease", token, err)
		}
	}
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}}
	if _, err := f.configMaps().Create(f.ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Errorf("an unlabelled ConfigMap: %v; want it untouched by the policy", err)
	}
}

// What `leasehold fencing-policy` prints (YAML) is accepted by the
// apiserver's server-side dry run, as with kubectl apply --dry-run=server,
// for several resources.
func TestYAMLPassesServerDryRun(t *testing.T) {
	c := kubetest.Require(t, cluster)
	out, err := YAML(Options{Lease: "orders", Namespace: "shop", Resources: []Resource{{Resource: "configmaps"}, {Group: "apps", Resource: "deployments"}}})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.Admin().Config)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(out), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d YAML documents; want 2 (the policy and its binding)", len(docs))
	}
	for _, doc := range docs {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		gvr := admissionResource(obj.GetKind())
		_, err := dyn.Resource(gvr).Apply(context.Background(), obj.GetName(), &obj, metav1.ApplyOptions{FieldManager: "kubectl", DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Errorf("server-side dry run of the %s: %v", obj.GetKind(), err)
		}
	}
}

// admissionResource is the resource of the admissionregistration.k8s.io/v1
// kind.
func admissionResource(kind string) schema.GroupVersionResource {
	plural := map[string]string{"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}[kind]
	return admissionregistrationv1.SchemeGroupVersion.WithResource(plural)
}
