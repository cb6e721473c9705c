package member

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestServesAnnotation(t *testing.T) {
	shards := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		names []string
		want  string
	}{
		{"shards", shards("orders", 64), "orders-{0..63}"},
		{"one shard", shards("orders", 1), "orders-0"},
		{"roles, in natural order", []string{"reporter", "compactor", "scheduler"}, "compactor,reporter,scheduler"},
		{"a gap", []string{"s-0", "s-1", "s-3", "s-4", "s-5"}, "s-{0..1},s-{3..5}"},
		{"numbers sort as numbers", []string{"s-10", "s-9", "s-2"}, "s-2,s-{9..10}"},
		{"leading zeros are names", []string{"s-01", "s-02", "s-1"}, "s-1,s-01,s-02"},
		{"mixed", []string{"b", "a-1", "a-0", "a"}, "a,a-{0..1},b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EncodeServes(tc.names)
			if got != tc.want {
				t.Errorf("EncodeServes = %q, want %q", got, tc.want)
			}
			back, ok := DecodeServes(got)
			want := slices.Clone(tc.names)
			slices.SortFunc(want, compareNames)
			if !ok || !slices.Equal(back, want) {
				t.Errorf("DecodeServes(%q) = %v (%v), want %v", got, back, ok, want)
			}
		})
	}
	for _, bad := range []string{"", ",", "a,,b", "s-{3..1}", "s-{0..2000}", "s-{0..x}", "{0..3}", "s{0..3}", "s-{0..3", "s-{0..3}x", "a}",
		strings.Repeat("x,", 1025) + "x"} {
		if got, ok := DecodeServes(bad); ok {
			t.Errorf("DecodeServes(%.40q) = %v, want it refused", bad, got)
		}
	}
}

// Members running different Lease lists under one group name (a rolling
// update from 4 shards to 8, roles a,b,c to a,b,c,d, or the same roles
// listed in another order) agree on every Lease they share, and every
// Lease goes to exactly one member that serves it: none is left to a
// member without an election for it.
func TestMixedListsGiveEveryLeaseToOneMemberThatServesIt(t *testing.T) {
	shards := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("orders-%d", i)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		lists map[string][]string // member → its Leases, in configured order
	}{
		{"4 shards to 8", map[string][]string{"a": shards(4), "b": shards(4), "c": shards(8)}},
		{"8 shards to 4", map[string][]string{"a": shards(8), "b": shards(8), "c": shards(4)}},
		{"roles a,b,c to a,b,c,d", map[string][]string{"m1": {"a", "b", "c"}, "m2": {"a", "b", "c"}, "m3": {"a", "b", "c", "d"}}},
		{"the same roles in other orders", map[string][]string{"m1": {"a", "b", "c"}, "m2": {"c", "b", "a"}, "m3": {"b", "c", "a"}}},
		{"disjoint lists", map[string][]string{"m1": {"a", "b"}, "m2": {"c", "d"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := &Members{Listed: true, Serves: map[string]Served{}}
			for id, leases := range tc.lists {
				members.Identities = append(members.Identities, id)
				names, _ := DecodeServes(EncodeServes(leases))
				members.Serves[id] = Served{}
				for _, n := range names {
					members.Serves[id][n] = true
				}
			}
			slices.Sort(members.Identities)
			for _, settled := range []bool{true, false} {
				wanted := map[string][]string{} // Lease → the members that campaign for it
				for id, leases := range tc.lists {
					states := make([]LeaseState, len(leases))
					for i, l := range leases {
						states[i] = LeaseState{Name: l, Observed: true}
					}
					handed := members.JoinedAt
					now := handed.Add(time.Hour)
					if !settled {
						members.JoinedAt = now
					}
					want, _, ok := planned(id, now, members, states, 0, handed)
					if !ok {
						t.Fatalf("%s: not ok", id)
					}
					for i, w := range want {
						if w {
							wanted[leases[i]] = append(wanted[leases[i]], id)
						}
					}
				}
				for _, leases := range tc.lists {
					for _, l := range leases {
						if len(wanted[l]) != 1 {
							t.Errorf("settled %v: Lease %s wanted by %v, want exactly one member", settled, l, wanted[l])
						}
					}
				}
			}
		})
	}
}
