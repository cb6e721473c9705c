package podlabel

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The election label's value: the Lease's name when it is a valid label
// value and the Lease lives in the Pod's namespace, <namespace>_<name> when
// it lives elsewhere, and the documented hash form when either is too long.
// The digests were computed with
// printf '%s' '<namespace>/<name>' | sha256sum | cut -c1-32.
func TestLeaseValue(t *testing.T) {
	name63, name64 := strings.Repeat("a", 63), strings.Repeat("a", 64)
	long := "orders-eu-west-1.leader-election.shop.example.com" // 49 characters
	for _, tc := range []struct {
		name                  string
		leaseNS, lease, podNS string
		want                  string
	}{
		{name: "same namespace", leaseNS: "shop", lease: "orders", podNS: "shop", want: "orders"},
		{name: "same namespace, dotted name", leaseNS: "shop", lease: "orders.leader", podNS: "shop", want: "orders.leader"},
		{name: "same namespace, 63 characters", leaseNS: "shop", lease: name63, podNS: "shop", want: name63},
		{name: "other namespace", leaseNS: "platform", lease: "orders", podNS: "shop", want: "platform_orders"},
		{name: "other namespace, dotted name", leaseNS: "x", lease: "orders.leader", podNS: "shop", want: "x_orders.leader"},
		{name: "same namespace, 64 characters", leaseNS: "shop", lease: name64, podNS: "shop", want: "sha256_6ae95c1be174c3ef3e467190b2ee800c"},
		{name: "other namespace, too long together", leaseNS: "platform-coordination", lease: long, podNS: "shop", want: "sha256_83c9a1f4c1d965227acaca5bad1043f2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := electionValue(tc.leaseNS, tc.lease, tc.podNS)
			if got != tc.want {
				t.Fatalf("electionValue(%q, %q, %q) = %q, want %q", tc.leaseNS, tc.lease, tc.podNS, got, tc.want)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Fatalf("%q is not a valid label value: %v", got, errs)
			}
		})
	}
}

// Distinct elections whose Pods share a namespace get distinct values, in
// every form, and a Lease name of the maximal 253 characters still gives a
// valid label value.
func TestLeaseValueIsUniquePerElection(t *testing.T) {
	longest := strings.Repeat("a", 61) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63)
	if len(longest) != 253 {
		t.Fatalf("test name has %d characters", len(longest))
	}
	leases := [][2]string{ // namespace, name
		{"shop", "orders"}, {"shop", "payments"}, {"x", "orders"}, {"shop", "x.orders"}, {"x", "x.orders"},
		{"shop", strings.Repeat("a", 64)}, {"shop", strings.Repeat("a", 65)}, {"x", strings.Repeat("a", 64)},
		{"shop", longest}, {"x", longest},
	}
	seen := map[string][2]string{}
	for _, l := range leases {
		v := electionValue(l[0], l[1], "shop")
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("%s/%s: %q is not a valid label value: %v", l[0], l[1], v, errs)
		}
		if prev, ok := seen[v]; ok {
			t.Errorf("%s/%s and %s/%s share the value %q", prev[0], prev[1], l[0], l[1], v)
		}
		seen[v] = l
	}
}
