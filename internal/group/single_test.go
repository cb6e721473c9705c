package group_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/group"
)

// TestSingleLeaseIsAGroupOfOneWithoutMembership: a group of one Lease
// without a name campaigns as a single Lease does. Its only write is the
// Lease itself (no member Lease), it registers only the election's series (as they are),
// a health step-down (SetCandidate false) is the elector's and releases
// the Lease, and a step back in takes it again.
func TestSingleLeaseIsAGroupOfOneWithoutMembership(t *testing.T) {
	f := newFixture(t)
	registry := prometheus.NewRegistry()
	solo := f.start("solo", []string{"orders"}, func(c *group.Config) {
		c.Name, c.Balance, c.Registerer, c.LeaseLabeled = "", false, registry, true
	})
	waitHeld(t, []*member{solo}, []int{1})

	list, err := f.client.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	if len(names) != 1 || names[0] != "orders" {
		t.Errorf("Leases in the namespace: %v, want only orders (no member Lease)", names)
	}
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if n := fam.GetName(); n == "leasehold_members" || strings.HasPrefix(n, "leasehold_lease_moves") || strings.HasPrefix(n, "leasehold_member_") {
			t.Errorf("series %s registered without membership", n)
		}
	}
	if got := gathered(t, registry, "leasehold_watch_up"); got != 1 {
		t.Errorf("leasehold_watch_up = %v, want 1 (the election's series, registered as they are)", got)
	}
	if snap := solo.Snapshot(); snap.Membership || snap.Name != "" {
		t.Errorf("snapshot: Membership %v, Name %q; want no membership, no name", snap.Membership, snap.Name)
	}

	first := solo.Elections()[0].Snapshot().Token
	released, err := solo.SetCandidate(t.Context(), false, "app unhealthy")
	if err != nil || !released {
		t.Fatalf("SetCandidate(false) = %v, %v; want the elector's release (true, nil)", released, err)
	}
	waitHeld(t, []*member{solo}, []int{0})
	if _, err := solo.SetCandidate(t.Context(), true, "app healthy"); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, []*member{solo}, []int{1})
	if token := solo.Elections()[0].Snapshot().Token; token <= first {
		t.Errorf("fencing token %d after stepping back in, want one above the first term's %d", token, first)
	}
}
