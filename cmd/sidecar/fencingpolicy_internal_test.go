package main

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/fencepolicy"
)

// fencing-policy prints the policy and its binding of internal/fencepolicy
// on stdout, and exits 2 on a bad flag or value with the reason on stderr
// and nothing on stdout.
func TestFencingPolicyCommand(t *testing.T) {
	r := invoke(t, nil, "fencing-policy", "--lease", "orders", "--namespace", "shop", "--resources", "configmaps,apps/deployments")
	if r.code != exitDone || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
	want, err := fencepolicy.YAML(fencepolicy.Options{Lease: "orders", Namespace: "shop",
		Resources: []fencepolicy.Resource{{Resource: "configmaps"}, {Group: "apps", Resource: "deployments"}}})
	if err != nil || r.stdout != string(want) {
		t.Fatalf("stdout is not fencepolicy.YAML's (%v):\n%s", err, r.stdout)
	}
	var kinds []string
	for _, doc := range strings.Split(r.stdout, "\n---\n") {
		var obj struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, obj.Kind)
	}
	if !reflect.DeepEqual(kinds, []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}) {
		t.Errorf("kinds %v", kinds)
	}
	def := invoke(t, nil, "fencing-policy", "--lease", "orders")
	if def.code != exitDone || !strings.Contains(def.stdout, "name: leasehold-fencing.default.orders") || !strings.Contains(def.stdout, "- configmaps") {
		t.Errorf("defaults: exit %d, stdout:\n%s", def.code, def.stdout)
	}

	for _, args := range [][]string{
		{}, {"--bogus"}, {"--lease"}, {"--lease", "Orders"}, {"--lease", "orders", "extra"},
		{"--lease", "orders", "--namespace", "a.b"}, {"--lease", "orders", "--resources", ""},
		{"--lease", "orders", "--resources", "apps/deployments/status"}, {"--lease", "orders", "--resources", "configmaps,configmaps"},
	} {
		r := invoke(t, nil, append([]string{"fencing-policy"}, args...)...)
		if r.code != exitUsage || r.stdout != "" || !strings.HasPrefix(r.stderr, "leasehold fencing-policy: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing, the reason", args, r.code, r.stdout, r.stderr)
		}
	}
}
