package fencepolicy

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseResources(t *testing.T) {
	got, err := ParseResources("configmaps, apps/deployments,example.com/widgets")
	want := []Resource{{Resource: "configmaps"}, {Group: "apps", Resource: "deployments"}, {Group: "example.com", Resource: "widgets"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseResources = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "configmaps,", "ConfigMaps", "apps/deployments/status", "Apps/deployments", "*", "apps/*", "/configmaps"} {
		if got, err := ParseResources(bad); err == nil {
			t.Errorf("ParseResources(%q) = %v; want an error", bad, got)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{Lease: "orders", Namespace: "shop", Resources: DefaultResources}
	if err := ok.Validate(); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no lease", func(o *Options) { o.Lease = "" }, "not a DNS subdomain"},
		{"lease not a subdomain", func(o *Options) { o.Lease = "Orders" }, "not a DNS subdomain"},
		{"lease too long for a label value", func(o *Options) { o.Lease = strings.Repeat("a", 64) }, "cannot be the value of the label"},
		{"namespace not a label", func(o *Options) { o.Namespace = "a.b" }, "not a DNS label"},
		{"no resources", func(o *Options) { o.Resources = nil }, "no resource"},
		{"a resource twice", func(o *Options) { o.Resources = []Resource{{Resource: "configmaps"}, {Resource: "configmaps"}} }, "named twice"},
	} {
		o := ok
		tc.edit(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// The objects are named after the Lease, fence the resources named, in
// its namespace, for the objects labelled with its name, and refuse when
// the Lease is missing.
func TestObjects(t *testing.T) {
	o := Options{Lease: "orders", Namespace: "shop", Resources: []Resource{{Resource: "configmaps"}, {Group: "apps", Resource: "deployments"}}}
	policy, binding := Objects(o)
	if policy.Name != "leasehold-fencing.shop.orders" || binding.Name != policy.Name || binding.Spec.PolicyName != policy.Name {
		t.Errorf("names: policy %q, binding %q for %q", policy.Name, binding.Name, binding.Spec.PolicyName)
	}
	m := policy.Spec.MatchConstraints
	if m.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "shop" || m.ObjectSelector.MatchLabels[FencedByLabel] != "orders" {
		t.Errorf("selectors: %+v, %+v", m.NamespaceSelector, m.ObjectSelector)
	}
	if len(m.ResourceRules) != 2 || m.ResourceRules[1].APIGroups[0] != "apps" || m.ResourceRules[1].Resources[0] != "deployments" {
		t.Errorf("resource rules: %+v", m.ResourceRules)
	}
	p := binding.Spec.ParamRef
	if p.Name != "orders" || p.Namespace != "shop" || p.ParameterNotFoundAction == nil || *p.ParameterNotFoundAction != "Deny" {
		t.Errorf("paramRef: %+v", p)
	}
	if len(policy.Spec.Validations) != len(rules) {
		t.Errorf("%d validations; want %d", len(policy.Spec.Validations), len(rules))
	}
}
