package member

import (
	"fmt"
	"github.com/leasehold/leasehold/internal/testing/fairshare"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// shards returns n holders, all h.
func holders(n int, h string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = h
	}
	return out
}

// moves counts the Leases whose assigned member differs from their holder.
func moves(holders, assigned []string) int {
	n := 0
	for i := range holders {
		if holders[i] != assigned[i] {
			n++
		}
	}
	return n
}

// servingAll makes every member of m serve every Lease of leases, as
// members running one Lease list do.
func servingAll(m *Members, leases []LeaseState) *Members {
	names := Served{}
	for _, l := range leases {
		names[l.Name] = true
	}
	m.Serves = map[string]Served{}
	for _, id := range m.Identities {
		m.Serves[id] = names
	}
	return m
}

// named names the Leases orders-0 … in order.
func named(leases []LeaseState) []LeaseState {
	for i := range leases {
		leases[i].Name = fmt.Sprintf("orders-%d", i)
	}
	return leases
}

func counts(assigned []string) map[string]int {
	c := map[string]int{}
	for _, m := range assigned {
		c[m]++
	}
	return c
}

func TestAssign(t *testing.T) {
	abcd := []string{"d", "b", "a", "c"}
	for _, tc := range []struct {
		name      string
		view      View
		wantMoves int
		wantCount map[string]int
		check     func(t *testing.T, assigned []string)
	}{{
		name:      "scale-up 1 to 4 with 64 shards moves exactly 48",
		view:      View{Members: abcd, Holders: holders(64, "a")},
		wantMoves: 48,
		wantCount: map[string]int{"a": 16, "b": 16, "c": 16, "d": 16},
		check: func(t *testing.T, assigned []string) {
			if !slices.Equal(assigned[:16], holders(16, "a")) {
				t.Errorf("a should keep the first 16 shards: %v", assigned[:16])
			}
		},
	}, {
		name:      "scale-down 4 to 3: only the departed member's shards move",
		view:      View{Members: []string{"a", "b", "c"}, Holders: slices.Concat(holders(16, "a"), holders(16, "b"), holders(16, "c"), holders(16, "d"))},
		wantMoves: 16,
		wantCount: map[string]int{"a": 22, "b": 21, "c": 21},
	}, {
		name:      "the extra Lease stays with the member that holds it",
		view:      View{Members: []string{"a", "b", "c"}, Holders: []string{"c", "c", "c", "c", "a", "a", "a", "b", "b", "b"}},
		wantMoves: 0,
		wantCount: map[string]int{"a": 3, "b": 3, "c": 4},
	}, {
		name: "the extra place stays put while members take a departed member's Leases",
		// a, b and c hold 4 each and d's 4 are free: a gets the extra place
		// (by identity), and keeps it once c has taken one of d's Leases.
		view:      View{Members: []string{"a", "b", "c"}, Holders: slices.Concat(holders(4, "a"), holders(4, "b"), holders(5, "c"), holders(3, ""))},
		wantMoves: 3,
		wantCount: map[string]int{"a": 6, "b": 5, "c": 5},
	}, {
		name:      "free Leases go to the members below their quota",
		view:      View{Members: []string{"a", "b"}, Holders: []string{"", "", "", "a"}},
		wantMoves: 3,
		wantCount: map[string]int{"a": 2, "b": 2},
	}, {
		name:      "a Lease held by a non-member is reassigned",
		view:      View{Members: []string{"a", "b"}, Holders: []string{"gone", "a", "gone", "b"}},
		wantMoves: 2,
		wantCount: map[string]int{"a": 2, "b": 2},
	}, {
		name:      "no members: nobody is assigned",
		view:      View{Holders: []string{"a", ""}},
		wantMoves: 1,
		wantCount: map[string]int{"": 2},
	}, {
		name:      "more members than Leases: one each, the holders keep theirs",
		view:      View{Members: abcd, Holders: []string{"c", ""}},
		wantMoves: 1,
		check: func(t *testing.T, assigned []string) {
			if assigned[0] != "c" || assigned[1] == "c" || assigned[1] == "" {
				t.Errorf("assigned %v", assigned)
			}
		},
	}, {
		name: "a declined Lease goes to another member, above its quota if need be",
		view: View{Members: []string{"a", "b"}, Holders: []string{"a", "", "b", "b"},
			Declined: map[string][]bool{"a": {false, true}}},
		wantMoves: 1,
		wantCount: map[string]int{"a": 1, "b": 3},
	}, {
		name: "settled around a decline: a fixed point",
		view: View{Members: []string{"a", "b"}, Holders: []string{"b", "a", "b", "a"},
			Declined: map[string][]bool{"a": {true}}},
		wantMoves: 0,
		wantCount: map[string]int{"a": 2, "b": 2},
	}, {
		name: "a Lease declined by every member stays unassigned",
		view: View{Members: []string{"a", "b"}, Holders: []string{"", "a", "b"},
			Declined: map[string][]bool{"a": {true}, "b": {true}}},
		wantMoves: 0,
		wantCount: map[string]int{"": 1, "a": 1, "b": 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			assigned := Assign(tc.view)
			if got := moves(tc.view.Holders, assigned); got != tc.wantMoves {
				t.Errorf("moves = %d, want %d (assigned %v)", got, tc.wantMoves, assigned)
			}
			if tc.wantCount != nil {
				if got := counts(assigned); fmt.Sprint(got) != fmt.Sprint(tc.wantCount) {
					t.Errorf("counts = %v, want %v", got, tc.wantCount)
				}
			}
			if tc.check != nil {
				tc.check(t, assigned)
			}
		})
	}
}

// TestAssignProperties checks, on random views, that Assign is fair
// (⌊L/M⌋ or ⌈L/M⌉ each), moves the fewest Leases any fair assignment can,
// and is a fixed point once the holders match it (nothing flaps).
func TestAssignProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	for trial := range 5000 {
		members := names[:1+r.IntN(len(names))]
		members = slices.Clone(members[r.IntN(len(members)):])
		hs := make([]string, r.IntN(70))
		for i := range hs {
			switch k := r.IntN(len(names) + 2); {
			case k < len(names):
				hs[i] = names[k]
			case k == len(names):
				hs[i] = "gone"
			}
		}
		v := View{Members: members, Holders: hs}
		assigned := Assign(v)
		m, l := len(members), len(hs)
		c := counts(assigned)
		for _, mem := range members {
			if c[mem] != l/m && c[mem] != (l+m-1)/m {
				t.Fatalf("trial %d: %s gets %d of %d Leases among %d members: %v", trial, mem, c[mem], l, m, assigned)
			}
		}
		if c[""] != 0 {
			t.Fatalf("trial %d: unassigned Leases with members: %v", trial, assigned)
		}
		if got, least := moves(hs, assigned), fairshare.FewestMoves(members, hs); got != least {
			t.Fatalf("trial %d: %d moves, the fewest possible is %d (holders %v, assigned %v)", trial, got, least, hs, assigned)
		}
		if again := Assign(View{Members: members, Holders: assigned}); !slices.Equal(again, assigned) {
			t.Fatalf("trial %d: not a fixed point: %v then %v", trial, assigned, again)
		}
	}
}

func TestCandidacy(t *testing.T) {
	all := holders(8, "a")
	for _, tc := range []struct {
		name    string
		view    View
		settled bool
		want    []bool
	}{{
		name:    "settled: the holder of everything keeps its share",
		view:    View{Self: "a", Members: []string{"a", "b"}, Holders: all},
		settled: true,
		want:    []bool{true, true, true, true, false, false, false, false},
	}, {
		name:    "not settled: it keeps what it holds for now",
		view:    View{Self: "a", Members: []string{"a", "b"}, Holders: all},
		settled: false,
		want:    holdersBool(8, true),
	}, {
		name:    "the newcomer campaigns for its share at once",
		view:    View{Self: "b", Members: []string{"a", "b"}, Holders: all},
		settled: false,
		want:    []bool{false, false, false, false, true, true, true, true},
	}, {
		name: "not a member: no candidacy",
		view: View{Self: "c", Members: []string{"a", "b"}, Holders: all},
		want: holdersBool(8, false),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Candidacy(tc.view, tc.settled); !slices.Equal(got, tc.want) {
				t.Errorf("Candidacy = %v, want %v", got, tc.want)
			}
		})
	}
}

func holdersBool(n int, b bool) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// TestBalancedOwnRecordBeforeTheAnswer is what the group simulator found
// (TestGSim, seed 2260: a scale-up from 1 to 6 members with 8 Leases moved
// orders-4 twice, m1→m3→m2): m3's acquire of orders-4 landed and its watch
// event arrived before the answer, so its election reported the record
// naming m3 while not yet leading. Judged free, that Lease made m3's view
// of the holders differ from everyone else's, whose quotas then put it
// elsewhere: m3 withdrew from the Lease it had just acquired. A record
// naming self is self's own, as the others judge it.
func TestBalancedOwnRecordBeforeTheAnswer(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 40, 0, time.UTC)
	members := &Members{Identities: []string{"m1", "m2", "m3", "m4", "m5", "m6"}, JoinedAt: now.Add(-time.Minute), Listed: true}
	held := func(h string) LeaseState {
		return LeaseState{Observed: true, Holder: h, FreeAt: now.Add(10 * time.Second)}
	}
	free := LeaseState{Observed: true}
	leases := []LeaseState{
		held("m1"), held("m1"), free, free,
		{Observed: true, Holder: "m3"}, // m3's acquire landed; its answer is still on the way
		held("m4"), free, free,
	}
	leases = named(leases)
	servingAll(members, leases)
	want, _, ok := planned("m3", now, members, leases, time.Second, time.Time{})
	if !ok || !want[4] {
		t.Fatalf("planned = %v (ok %v): m3 gives up orders-4, which its own record names", want, ok)
	}
	// Everyone else's view: m3 holds it, until their FreeAt.
	others := slices.Clone(leases)
	others[4] = held("m3")
	for _, self := range members.Identities {
		if self == "m3" {
			continue
		}
		w, _, _ := planned(self, now, members, others, time.Second, time.Time{})
		if w[4] {
			t.Errorf("%s campaigns for orders-4 too: %v", self, w)
		}
	}
}

// TestAssignExtraStaysPutWhileNewcomersTakeTheirs is the other defect the
// group simulator found (TestGSim, seed 423: a scale-up from 1 to 5
// members with 7 Leases made 6 moves, not 5, and a newcomer took, gave up
// and took again one Lease): the extra Leases went to the members holding
// the most, so the newcomer that took its first Lease before another took
// the other's extra Lease from it in the middle of the move, and members
// whose views were a round trip apart campaigned for the same Leases.
// Taking a Lease Assign gives must not change what it gives anyone.
func TestAssignExtraStaysPutWhileNewcomersTakeTheirs(t *testing.T) {
	members := []string{"m1", "m2", "m3", "m4", "m5"}
	hs := holders(7, "m1")
	before := Assign(View{Members: members, Holders: hs})
	for i, m := range before {
		if m == "m1" {
			continue
		}
		after := slices.Clone(hs)
		after[i] = m // m1 released it and m took it
		if got := Assign(View{Members: members, Holders: after}); !slices.Equal(got, before) {
			t.Errorf("once %s takes Lease %d: Assign = %v, was %v", m, i, got, before)
		}
	}
}

// TestBalancedHandedALeaseKeepsWhatItHolds is the race that made
// TestBalancedLeaverHandsEachLeaseToItsHeir count 4 moves, not 2, in CI:
// a leaver handed orders-0 to b, and b took it before it saw the leaver's
// member Lease go. Counting the leaver still, b was above its share and
// gave up a Lease of its own, which then moved again once the leaver was
// gone. A member handed a Lease keeps what it holds for the settle time.
func TestBalancedHandedALeaseKeepsWhatItHolds(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 1, 0, 0, time.UTC)
	members := &Members{Identities: []string{"a", "b", "c"}, JoinedAt: now.Add(-time.Minute), Listed: true}
	held := func(h string) LeaseState {
		return LeaseState{Observed: true, Holder: h, FreeAt: now.Add(10 * time.Second)}
	}
	// b holds orders-0 (handed by a), 2 and 3; a still holds orders-1; c 4 and 5.
	leases := []LeaseState{{Observed: true, Leading: true, Holder: "b"}, held("a"),
		{Observed: true, Leading: true, Holder: "b"}, {Observed: true, Leading: true, Holder: "b"}, held("c"), held("c")}
	leases = named(leases)
	servingAll(members, leases)

	unsettled, _, ok := planned("b", now, members, leases, time.Second, now.Add(-500*time.Millisecond))
	if !ok || !unsettled[0] || !unsettled[2] || !unsettled[3] {
		t.Fatalf("handed a Lease 500ms ago: planned = %v (ok %v), want b to keep orders-0, 2 and 3", unsettled, ok)
	}
	// Without the handover (or once the settle time has passed), the same
	// view asks b to give one up: the rule is what keeps it.
	settled, _, _ := planned("b", now, members, leases, time.Second, now.Add(-2*time.Second))
	if kept := btoi(settled[0]) + btoi(settled[2]) + btoi(settled[3]); kept != 2 {
		t.Errorf("settled: planned = %v, want b to keep 2 of its 3 (its share among a, b and c)", settled)
	}
	if !HandedTo("b", []LeaseState{{Observed: true, ReservedFor: "b"}}) || HandedTo("b", leases) {
		t.Error("HandedTo: want true only while a Lease is reserved for b")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Successor ranks by priority, then the newest start, then identity, and
// passes over self and the members that decline the Lease handed over.
func TestSuccessorSkipsMembersThatDeclineTheLease(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	members := &Members{
		Identities: []string{"a", "b", "c", "d"},
		Listed:     true,
		Info: map[string]Info{
			"a": {Priority: 9, StartedAt: start},
			"b": {Priority: 5, StartedAt: start},
			"c": {Priority: 5, StartedAt: start.Add(time.Minute)},
			"d": {Priority: 1, StartedAt: start.Add(time.Hour)},
		},
		Declined: map[string][]string{"c": {"orders-1"}, "b": {"orders-1", "orders-2"}},
	}
	servingAll(members, named(make([]LeaseState, 3)))
	cases := []struct {
		self, lease, want string
	}{
		{"a", "orders-0", "c"}, // priority first, then the newest start
		{"d", "orders-0", "a"},
		{"a", "orders-1", "d"}, // c and b decline it
		{"a", "orders-2", "c"},
		{"d", "orders-1", "a"},
	}
	for _, c := range cases {
		if got := Successor(c.self, c.lease, "", members); got != c.want {
			t.Errorf("Successor(%q, %q) = %q; want %q", c.self, c.lease, got, c.want)
		}
	}
	alone := servingAll(&Members{Identities: []string{"a", "b"}, Listed: true, Declined: map[string][]string{"b": {"orders-0"}}}, named(make([]LeaseState, 1)))
	if got := Successor("a", "orders-0", "", alone); got != "" {
		t.Errorf("Successor when every other member declines = %q; want none", got)
	}
}

// planned is balanced over the classes of leases among members, as the
// Machine has them for its configured Leases.
func planned(self string, now time.Time, members *Members, leases []LeaseState, settle time.Duration, handedAt time.Time) ([]bool, time.Time, bool) {
	names := make([]string, len(leases))
	for i, s := range leases {
		names[i] = s.Name
	}
	return balanced(self, now, members, classesOf(members, names, naturalOrder(names)), leases, settle, handedAt, nil)
}

// The plan's reused candidacy (wants) is always the one computed afresh:
// over random sequences of views, with members, stay-outs, holders and
// settledness changing one at a time or not at all, the memoized answer
// equals balanced's without a memo.
func TestReusedCandidacyEqualsAFreshOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	ids := []string{"a", "b", "c", "d"}
	names := []string{"orders-0", "orders-1", "orders-2", "orders-3", "orders-4"}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var last wants
	leases := named(make([]LeaseState, len(names)))
	for i := range leases {
		leases[i].Observed = true
	}
	members := servingAll(&Members{Identities: []string{"a", "b"}, Listed: true, JoinedAt: now}, leases)
	classes := classesOf(members, names, naturalOrder(names))
	reused := 0
	for step := range 5000 {
		switch rng.IntN(5) {
		case 0: // membership changes: new classes
			n := 1 + rng.IntN(len(ids))
			members = servingAll(&Members{Identities: slices.Clone(ids[:n]), Listed: true, JoinedAt: now}, leases)
			classes = classesOf(members, names, naturalOrder(names))
		case 1: // a stay-out starts or ends: a new view, the same classes
			v := *members
			v.Declined = nil
			if rng.IntN(2) == 0 {
				v.Declined = map[string][]string{ids[rng.IntN(len(ids))]: {names[rng.IntN(len(names))]}}
			}
			members = &v
		case 2: // a holder changes
			i := rng.IntN(len(leases))
			leases = slices.Clone(leases)
			leases[i].Holder, leases[i].FreeAt = "", time.Time{}
			if rng.IntN(3) != 0 {
				leases[i].Holder, leases[i].FreeAt = ids[rng.IntN(len(ids))], now.Add(time.Hour)
			}
		}
		settle := time.Duration(rng.IntN(2)) * time.Hour // settled (a member joined now, settle 0) or not
		before := last.want
		got, _, ok := balanced("a", now, members, classes, leases, settle, time.Time{}, &last)
		want, _, _ := balanced("a", now, members, classes, leases, settle, time.Time{}, nil)
		if !ok || !slices.Equal(got, want) {
			t.Fatalf("step %d: reused candidacy %v (ok %v); computed afresh %v (members %v, declined %v, holders %+v)", step, got, ok, want, members.Identities, members.Declined, leases)
		}
		if before != nil && &got[0] == &before[0] {
			reused++
		}
	}
	if reused < 1000 {
		t.Errorf("the candidacy was reused %d times in 5000 plans; the sequence is meant to repeat inputs often", reused)
	}
}
