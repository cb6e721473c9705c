package member

import (
	"maps"
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Every change of another member's member Lease reaches the published
// view, whichever part of it changed (its version alone, as a renewal
// changes it; its priority; the Leases it serves; a member joining), and
// a view once published never changes: the parts a new view shares with
// it are the unchanged ones.
func TestTheViewFollowsEveryChangeOfAMemberLease(t *testing.T) {
	h := newMachine(t, testConfig("a", "orders-0", "orders-1"))
	own := h.joined()
	b := memberLease("b", 50, 15, "orders-0", "orders-1")
	h.step(Listed{Items: []coordinationv1.Lease{*own, b}})
	first := h.m.members
	if first == nil || !slices.Equal(first.Identities, []string{"a", "b"}) || first.Versions["b"] != "50" {
		t.Fatalf("listed: view %+v, want a and b at version 50", first)
	}
	frozen := struct {
		versions map[string]string
		info     map[string]Info
		serves   map[string]Served
	}{maps.Clone(first.Versions), maps.Clone(first.Info), maps.Clone(first.Serves)}

	changed := func(l coordinationv1.Lease) *Members {
		t.Helper()
		h.step(Changed{Lease: &l})
		if h.out.Members == nil {
			t.Fatalf("%s at version %s: no view published", *l.Spec.HolderIdentity, l.ResourceVersion)
		}
		return h.out.Members
	}
	b.ResourceVersion = "51" // a renewal
	if v := changed(b); v.Versions["b"] != "51" || v.Versions["a"] != own.ResourceVersion || !maps.Equal(v.Info, first.Info) || !sameServes(v.Serves, first.Serves) {
		t.Errorf("after b's renewal: view %+v, want b at version 51, the rest as before", v)
	}
	b.ResourceVersion, b.Annotations[PriorityAnnotation] = "52", "9"
	if v := changed(b); v.Versions["b"] != "52" || v.Info["b"].Priority != 9 {
		t.Errorf("after b's priority changed: view %+v, want b at version 52 with priority 9", v)
	}
	b.ResourceVersion, b.Annotations[ServesAnnotation] = "53", EncodeServes([]string{"orders-1"})
	if v := changed(b); v.Versions["b"] != "53" || v.ServedBy("b", "orders-0") || !v.ServedBy("b", "orders-1") {
		t.Errorf("after b's Leases changed: view %+v, want b at version 53 serving orders-1 only", v)
	}
	c := memberLease("c", 60, 15, "orders-0", "orders-1")
	if v := changed(c); !slices.Equal(v.Identities, []string{"a", "b", "c"}) || v.Versions["c"] != "60" || v.Versions["b"] != "53" || !v.ServedBy("c", "orders-0") {
		t.Errorf("after c joined: view %+v, want a, b at version 53, and c at version 60", v)
	}
	if !slices.Equal(first.Identities, []string{"a", "b"}) || !maps.Equal(first.Versions, frozen.versions) || !maps.Equal(first.Info, frozen.info) || !maps.EqualFunc(first.Serves, frozen.serves, sameSet) {
		t.Errorf("the first view published changed since: %+v", first)
	}
}
