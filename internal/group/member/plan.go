package member

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"
)

// View is what the planner knows of one class of Leases at one moment:
// the live members that serve every Lease of it, and who validly holds
// each, as this instance judges both.
type View struct {
	// Self is this instance's identity.
	Self string
	// Members are the live members' identities, this instance's own
	// included while it is a member. Order does not matter.
	Members []string
	// Holders are the valid holders of the Leases, in the class's order:
	// "" for a Lease that is free, missing, or whose holder's claim has
	// ended.
	Holders []string
	// Declined marks, per member, the Leases it stays out of for now (after
	// POST /v1/leases/{lease}/release?for=D). Nil when none.
	Declined map[string][]bool
}

// Assign is the fair share: the member that should hold each Lease, in
// the view's order ("" when there is no member). With M members and L
// Leases every member is given ⌊L/M⌋ or ⌈L/M⌉ Leases, and as few Leases as
// possible change hands:
//
//   - Each member's quota is ⌊L/M⌋; L mod M members get one more: first
//     those that hold more than ⌊L/M⌋ now (the most first), then the others
//     by identity. So no member that holds its quota is asked to give a
//     Lease up, and while members take free Leases the extra places stay
//     where they are (who holds ⌊L/M⌋ or fewer does not matter).
//   - Each member keeps the Leases it holds, up to its quota (the first in
//     order).
//   - Every other Lease (free, held by a non-member, or above its holder's
//     quota) goes to the members below their quota, in order of the Leases
//     and identity order of the members.
//
// The moves are then exactly the Leases above their holders' quotas plus
// those held by nobody or by non-members: the least any fair assignment
// needs. Assign is a function of the view alone, so members that see the
// same view agree on it, and once the holders match it, it assigns every
// Lease to its holder: a settled group stays put.
//
// A member declining a Lease is never given it; if no member with room
// remains, the Lease goes to the member with the fewest Leases (then by
// identity) that does not decline it, above its quota: a Lease that a
// member asked to be rid of still gets a holder.
func Assign(v View) []string {
	members := v.Members // read only: the caller's slice is never changed
	if !sortedSet(members) {
		members = slices.Compact(slices.Sorted(slices.Values(members)))
	}
	assigned := make([]string, len(v.Holders))
	if len(members) == 0 {
		return assigned
	}
	// What Assign counts per member is kept by the member's index in
	// members, which is sorted: index finds it by binary search.
	n := len(members)
	index := func(id string) (int, bool) { return slices.BinarySearch(members, id) }
	counts := make([]int, 4*n)
	held, quota, count, byHeld := counts[:n], counts[n:2*n], counts[2*n:3*n], counts[3*n:]
	for _, h := range v.Holders {
		if k, ok := index(h); ok {
			held[k]++
		}
	}

	// Quotas: the extra Leases go first to the members that hold more than
	// the base quota (the most first): they keep them instead of giving
	// them up; the rest by identity, whatever they hold, so that members
	// taking Leases meanwhile do not move the extra places around.
	base, extra := len(v.Holders)/n, len(v.Holders)%n
	above := func(k int) int {
		if held[k] > base {
			return held[k]
		}
		return 0
	}
	// byHeld: members' indices, by identity: the stable sort keeps that
	// order among equals.
	for k := range byHeld {
		byHeld[k] = k
	}
	slices.SortStableFunc(byHeld, func(a, b int) int { return cmp.Compare(above(b), above(a)) })
	for i, k := range byHeld {
		quota[k] = base
		if i < extra {
			quota[k]++
		}
	}

	declines := func(m string, lease int) bool {
		d := v.Declined[m]
		return lease < len(d) && d[lease]
	}
	for i, h := range v.Holders {
		if k, ok := index(h); ok && count[k] < quota[k] && !declines(h, i) {
			assigned[i] = h
			count[k]++
		}
	}
	for i := range v.Holders {
		if assigned[i] != "" {
			continue
		}
		for k, m := range members {
			if count[k] < quota[k] && !declines(m, i) {
				assigned[i] = m
				count[k]++
				break
			}
		}
		if assigned[i] != "" {
			continue
		}
		best := -1
		for k, m := range members {
			if !declines(m, i) && (best < 0 || count[k] < count[best]) {
				best = k
			}
		}
		if best >= 0 {
			assigned[i] = members[best]
			count[best]++
		}
	}
	return assigned
}

// sortedSet reports whether ids is sorted, without repeats.
func sortedSet(ids []string) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			return false
		}
	}
	return true
}

// Candidacy says, per Lease in the view's order, whether this instance
// campaigns for it: for the Leases Assign gives it. While membership is
// not settled (a member joined less than the settle time ago: others may
// still be joining; or a Lease was handed to this instance: its leaver may
// not be seen gone yet), it keeps campaigning for the Leases it holds, so
// that a scale-up by several members, or a leaver's handover, moves each
// Lease once, not once per member seen. Giving a Lease up is a safe release
// (elect.Elector.SetCandidate), which the member it is assigned to, already
// campaigning, takes within a round trip. An instance that is not among
// Members campaigns for none.
func Candidacy(v View, settled bool) []bool {
	want := make([]bool, len(v.Holders))
	if !slices.Contains(v.Members, v.Self) {
		return want
	}
	for i, m := range Assign(v) {
		want[i] = m == v.Self || (!settled && v.Holders[i] == v.Self)
	}
	return want
}

// LeaseState is what the plan needs of one Lease's election, as this
// instance's elector reports it (elect.Snapshot, decide.Report).
type LeaseState struct {
	Name     string    // the Lease's name
	Observed bool      // the Lease has been read or found missing at least once
	Leading  bool      // this instance holds a term
	Holder   string    // the record's holder, "" when none
	FreeAt   time.Time // when the holder's claim ends, as this instance judges it; zero when free now
	// ReservedFor is the successor the last holder handed the Lease to,
	// while it goes first (until FreeAt for the others); "" otherwise.
	ReservedFor string
	// HandedOver: the record names its holder, written by the previous
	// holder handing the Lease over in one write, until the holder's first
	// write on it (elect.Snapshot.HandedOver).
	HandedOver bool
	// Generation is the generation the Lease's latest holder published on
	// it (this instance's own while it leads), "" when none did: the
	// reference of the rank order (CompareRanks).
	Generation string
}

// validHolder is the holder self judges valid at now: itself while
// leading or while the record names it, another until FreeAt, else nobody;
// a Lease handed to a successor counts as the successor's while it goes
// first (for itself, until it takes it), so the plan keeps it there.
//
// A record that names self is self's own write, which its election takes
// back at once (package decide), and every other member judges it held by
// self until its own FreeAt: so does self. Judging it free instead (an
// acquire whose watch event arrives before its answer; a term that lapsed
// while the record still names it) would make self's view of the holders
// differ from everyone else's, and self could give up a Lease it has just
// acquired: a move more than the fewest.
func (s LeaseState) validHolder(self string, now time.Time) string {
	switch {
	case s.Leading, s.Holder == self:
		return self
	case s.Holder != "" && s.Holder != self && now.Before(s.FreeAt):
		return s.Holder
	case s.Holder == "" && s.ReservedFor != "" && (s.ReservedFor == self || now.Before(s.FreeAt)):
		return s.ReservedFor
	}
	return ""
}

// class is a set of this instance's Leases that the same live members
// serve, by index into its Leases, in natural order of their names
// (compareNames): every member of the class serves, and so observes,
// every Lease of it, and orders them alike whatever its configured order,
// so members that see the same group agree on the class's assignment.
// The classes of a view are computed once per view (Machine.publish).
type class struct {
	members []string
	leases  []int
}

// naturalOrder is the indices of names in natural order (compareNames).
func naturalOrder(names []string) []int {
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareNames(names[a], names[b]) })
	return order
}

// classesOf partitions names (whose natural order is natural) by the live
// members that serve each (Members.Serving): a Lease is only ever given to
// a member that runs its election. With every member serving the same list
// there is one class, the whole group.
func classesOf(members *Members, names []string, natural []int) []class {
	var out []class
	index := map[string]int{}
	for _, i := range natural {
		servers := members.Serving(names[i])
		key := strings.Join(servers, "\x00")
		c, ok := index[key]
		if !ok {
			c = len(out)
			index[key] = c
			out = append(out, class{members: servers})
		}
		out[c].leases = append(out[c].leases, i)
	}
	return out
}

// viewOf is the View of class c that self plans on at now, over holders
// (validHolder of each Lease); without lists the members of c but self.
func viewOf(self string, members *Members, leases []LeaseState, holders []string, c class, without bool) View {
	v := View{Self: self, Members: c.members, Holders: make([]string, len(c.leases))}
	if without {
		v.Members = slices.DeleteFunc(slices.Clone(v.Members), func(id string) bool { return id == self })
	}
	for j, i := range c.leases {
		v.Holders[j] = holders[i]
	}
	for member, names := range members.Declined {
		if !slices.Contains(v.Members, member) {
			continue
		}
		d := make([]bool, len(c.leases))
		for j, i := range c.leases {
			d[j] = slices.Contains(names, leases[i].Name)
		}
		if v.Declined == nil {
			v.Declined = map[string][]bool{}
		}
		v.Declined[member] = d
	}
	return v
}

// holdersOf is validHolder of each Lease at now; ok is false while a
// Lease has not been observed yet.
func holdersOf(self string, now time.Time, leases []LeaseState) (holders []string, ok bool) {
	holders = make([]string, len(leases))
	for i, s := range leases {
		if !s.Observed {
			return nil, false
		}
		holders[i] = s.validHolder(self, now)
	}
	return holders, true
}

// balanced is a balancing member's plan at now: the candidacy it wants for
// each Lease (Candidacy per class cs of Leases the same members serve,
// with membership settled once settle has passed since a member last
// joined and since a Lease was last handed to this instance, handedAt: see
// HandedTo), and when to plan again at the latest (a holder's claim ends,
// or membership settles). ok is false while it is too early to judge (the
// member Leases not yet listed, or a Lease not yet observed): change
// nothing then. last, when not nil, is the plan's previous candidacy
// (wants), reused and updated.
func balanced(self string, now time.Time, members *Members, cs []class, leases []LeaseState, settle time.Duration, handedAt time.Time, last *wants) (want []bool, wake time.Time, ok bool) {
	if members == nil || !members.Listed {
		return nil, time.Time{}, false
	}
	holders, ok := holdersOf(self, now, leases)
	if !ok {
		return nil, time.Time{}, false
	}
	wake = now.Add(24 * time.Hour)
	for _, s := range leases {
		if s.FreeAt.After(now) && s.FreeAt.Before(wake) {
			wake = s.FreeAt
		}
	}
	settledAt := members.JoinedAt
	if handedAt.After(settledAt) {
		settledAt = handedAt
	}
	settledAt = settledAt.Add(settle)
	settled := !now.Before(settledAt)
	if !settled && settledAt.Before(wake) {
		wake = settledAt
	}
	return last.of(self, members, cs, leases, holders, settled), wake, true
}

// wants is the candidacy balanced last wanted, with what it was computed
// from: the classes, the stay-outs, the holders and whether membership was
// settled. Candidacy of every class is a function of these alone, so a
// plan over the same ones reuses it (most steps follow a member's renewal
// or a holder's, which change none of them). The zero wants holds none.
type wants struct {
	classes  []class
	declined map[string][]string
	holders  []string
	settled  bool
	want     []bool // read only: shared by the plans that reuse it
}

// of is Candidacy of every class of cs, by index into leases: the last
// one when computed from the same classes, stay-outs, holders and
// settledness. last may be nil: computed afresh. The result is read only.
func (last *wants) of(self string, members *Members, cs []class, leases []LeaseState, holders []string, settled bool) []bool {
	if last != nil && last.want != nil && last.settled == settled && sameClasses(last.classes, cs) &&
		slices.Equal(last.holders, holders) && maps.EqualFunc(last.declined, members.Declined, slices.Equal) {
		return last.want
	}
	want := make([]bool, len(leases))
	for _, c := range cs {
		for j, w := range Candidacy(viewOf(self, members, leases, holders, c, false), settled) {
			want[c.leases[j]] = w
		}
	}
	if last != nil {
		*last = wants{classes: cs, declined: members.Declined, holders: holders, settled: settled, want: want}
	}
	return want
}

// sameClasses reports whether a and b are the same classes: the classes
// of a view are computed once (Machine.publish) and never changed, so the
// same slice is the same classes.
func sameClasses(a, b []class) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// HandedTo reports whether a Lease is handed to self now (reserved for it,
// ReservedFor, or a record naming it that its previous holder wrote,
// HandedOver). The member that handed it over is most often leaving (a
// shutdown or a health step-down; a POST /v1/leases/{lease}/release?to=
// keeps it a member), and its member Lease's deletion may reach self after
// the Lease does: until then self counts the leaver as a member, and
// taking the Lease puts self above its share among all of them. A planner
// that has been handed a Lease treats membership as unsettled for the
// settle time (balanced's handedAt), so that it does not give up a Lease
// it holds in the meantime: each of the leaver's Leases moves once,
// straight to where it stays.
func HandedTo(self string, leases []LeaseState) bool {
	for _, s := range leases {
		if s.ReservedFor == self || (s.HandedOver && s.Holder == self) {
			return true
		}
	}
	return false
}
