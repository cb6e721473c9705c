package main_test

import (
	"fmt"
	"strconv"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/pkg/api"
)

// A member of a balanced group that gets SIGTERM hands each Lease it holds
// to its heir. With LEASEHOLD_HANDOVER unset (the group's default) that is
// one write naming the heir (leasehold.io/handed-over), on which the heir
// leads with that write's resourceVersion as its token; with
// LEASEHOLD_HANDOVER=any it is a release signed by the leaver, which the
// heir then acquires.
func TestSIGTERMInABalancedGroupHandsEachLeaseToItsHeir(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		oneWrite bool
	}{
		{name: "default", oneWrite: true},
		{name: "any", env: []string{"LEASEHOLD_HANDOVER=any"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t)
			f.Env = append([]string{"LEASEHOLD_SHARDS=2"}, tc.env...)
			a := start(t, f, "a")
			b := start(t, f, "b")
			held := settledShares(t, a, b)

			writes := watchLease(t, f.Namespace, held.Lease)
			terminate(t, a)
			first := writes.next(t, "a write of "+held.Lease+" that does not name a", func(l *coordinationv1.Lease) bool { return holderOf(l) != held.Identity })
			if !tc.oneWrite {
				if holderOf(first) != "" || first.Annotations[elect.ReleasedByAnnotation] != held.Identity {
					t.Fatalf("first write after SIGTERM: holder %q, annotations %v; want a's signed release", holderOf(first), first.Annotations)
				}
				waitLeads(t, b, held.Lease, func(st api.Status) bool { return st.FencingToken > held.FencingToken })
				return
			}
			heir, err := b.Leases(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if holderOf(first) != heir.Leases[0].Identity || first.Annotations[decide.HandedOverAnnotation] == "" {
				t.Fatalf("first write after SIGTERM: holder %q, annotations %v; want the handover to b (%s) in one write", holderOf(first), first.Annotations, heir.Leases[0].Identity)
			}
			token, err := strconv.ParseUint(first.ResourceVersion, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			waitLeads(t, b, held.Lease, func(st api.Status) bool { return uint64(st.FencingToken) == token })
		})
	}
}

// settledShares waits until a and b each lead exactly one of the group's
// two Leases and each counts both as members, and returns a's.
func settledShares(t *testing.T, a, b *fleet.Instance) api.Status {
	t.Helper()
	var mine api.Status
	eventually(t, "a and b settled on one Lease each", func() bool {
		settled := true
		for _, in := range []*fleet.Instance{a, b} {
			l, err := in.Leases(t.Context())
			leading := 0
			for _, st := range l.Leases {
				if st.Leader {
					leading++
					if in == a {
						mine = st
					}
				}
			}
			settled = settled && err == nil && l.Members != nil && *l.Members == 2 && leading == 1
		}
		return settled
	}, nil)
	return mine
}

// waitLeads waits until in leads lease with a status that ok accepts.
func waitLeads(t *testing.T, in *fleet.Instance, lease string, ok func(api.Status) bool) {
	t.Helper()
	var last api.Status
	eventually(t, in.Name+" leads "+lease+" as expected", func() bool {
		l, err := in.Leases(t.Context())
		if err != nil {
			return false
		}
		for _, st := range l.Leases {
			if st.Lease == lease {
				if last = st; st.Leader && ok(st) {
					return true
				}
			}
		}
		return false
	}, func() string { return fmt.Sprintf("last status %+v", last) })
}
