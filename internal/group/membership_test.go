package group_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/group"
	groupmember "github.com/leasehold/leasehold/internal/group/member"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// heldBy lists, per Lease name, the members that validly lead it now,
// failing the test on two.
func heldBy(t *testing.T, members []*member) map[string]string {
	t.Helper()
	checkOneLeader(t, members)
	out, now := map[string]string{}, time.Now()
	for _, m := range members {
		for _, s := range m.leases() {
			if s.IsLeader(now) {
				out[s.Lease] = m.id
			}
		}
	}
	return out
}

// waitAllHeld waits until every Lease in names is validly held by one of
// members.
func waitAllHeld(t *testing.T, members []*member, names []string) {
	t.Helper()
	var held map[string]string
	missing := 0
	eventually(t, fmt.Sprintf("all %d Leases held", len(names)), func() bool {
		held, missing = heldBy(t, members), 0
		for _, n := range names {
			if held[n] == "" {
				missing++
			}
		}
		return missing == 0
	}, func() string { return fmt.Sprintf("%d unheld: %v", missing, held) })
}

// Members of one group that run different Lease lists (helm upgrade from
// 4 shards to 8 under a fixed group name; roles a,b,c to a,b,c,d) give a
// Lease only to a member that serves it: every Lease is held, the new
// ones by the member that has them, and each member holds only its own.
func TestMixedLeaseListsHoldEveryLease(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new []string
	}{
		{"4 shards to 8", shardNames(4), shardNames(8)},
		{"roles a,b,c to a,b,c,d", []string{"a", "b", "c"}, []string{"a", "b", "c", "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			x, y := f.start("x", tc.old), f.start("y", tc.old)
			waitAllHeld(t, []*member{x, y}, tc.old)
			z := f.start("z", tc.new)
			all := []*member{x, y, z}
			waitAllHeld(t, all, tc.new)
			for lease, holder := range heldBy(t, all) {
				if holder != "z" && !contains(tc.old, lease) {
					t.Errorf("%s holds %s, which it does not serve", holder, lease)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// A member Lease that nobody renews, claiming the longest duration a Lease
// can (a hand edit, a restore, a crashed member with other timings), stops
// counting as a member within one lease duration: the group holds every
// Lease, fairly among the live members.
func TestAGhostMemberLeaseIsNotGivenLeases(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(6)
	ghost := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: group.MemberLeaseName("orders", "ghost"), Labels: map[string]string{group.MemberLabel: "orders"},
			Annotations: map[string]string{groupmember.ServesAnnotation: groupmember.EncodeServes(leases)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new("ghost"), LeaseDurationSeconds: new(int32(2147483647))},
	}
	if _, err := f.client.Create(t.Context(), ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, b := f.start("a", leases), f.start("b", leases)
	waitHeld(t, []*member{a, b}, []int{3, 3})
}

// The member Lease of a member that crashed (its process gone, its Lease
// left behind) is deleted by a live member once it has stayed unchanged
// for three lease durations, and counted; the live members' own stay.
func TestACrashedMembersLeaseIsCollected(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(2)
	registry := prometheus.NewRegistry()
	a := f.start("a", leases, func(c *group.Config) { c.Registerer = registry })
	crashed := f.start("crashed", leases)
	waitMembers(t, []*member{a, crashed}, 2)
	crashed.kill(t)
	left := group.MemberLeaseName("orders", "crashed")
	if _, err := f.client.Get(t.Context(), left, metav1.GetOptions{}); err != nil {
		t.Fatalf("setup: the crashed member's Lease is not there: %v", err)
	}
	// Collected once unchanged for three TTLs (the member package's
	// collectAfter): the wait is that on top of generous.
	poll.Until(t, 3*leaseDuration+generous, 50*time.Millisecond, "the crashed member's Lease collected", func() bool {
		_, err := f.client.Get(t.Context(), left, metav1.GetOptions{})
		return err != nil
	})
	if got := gathered(t, registry, "leasehold_member_leases_collected_total"); got != 1 {
		t.Errorf("leasehold_member_leases_collected_total = %v, want 1", got)
	}
	if _, err := f.client.Get(t.Context(), group.MemberLeaseName("orders", "a"), metav1.GetOptions{}); err != nil {
		t.Errorf("a's own member Lease: %v", err)
	}
}

// kill ends m as a crash would: its goroutines stop with no release and no
// member Lease delete (the group's client is cut off first).
func (m *member) kill(t *testing.T) {
	t.Helper()
	m.cut()
	m.cancel()
	select {
	case <-m.Done():
	case <-time.After(generous):
		t.Fatalf("%s did not stop", m.id)
	}
}
