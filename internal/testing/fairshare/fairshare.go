// Package fairshare is the test oracle of a fair share's fewest moves,
// independent of the plan it judges (package member's Assign).
package fairshare

import "slices"

// FewestMoves is the least number of Leases any fair assignment moves:
// every Lease not held by a member, plus, per member, what it holds above
// the largest quota it can get (⌈L/M⌉ for at most L mod M members, which
// the members holding the most take).
func FewestMoves(members, hs []string) int {
	held := map[string]int{}
	isMember := map[string]bool{}
	for _, m := range members {
		isMember[m] = true
	}
	n := 0
	for _, h := range hs {
		if isMember[h] {
			held[h]++
		} else {
			n++
		}
	}
	counts := make([]int, 0, len(members))
	for _, m := range members {
		counts = append(counts, held[m])
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	base, extra := len(hs)/len(members), len(hs)%len(members)
	for i, c := range counts {
		q := base
		if i < extra {
			q++
		}
		n += max(0, c-q)
	}
	return n
}
