package member

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func known(gen string, pos int64) Rank { return Rank{Known: true, Generation: gen, Position: pos} }

func TestCompareRanks(t *testing.T) {
	cases := []struct {
		name string
		a, b Rank
		gen  string
		want int
	}{
		{"known before unknown", known("g1", 1), Rank{}, "g1", -1},
		{"unknown after known", Rank{}, known("other", 0), "g1", 1},
		{"both unknown: undecided", Rank{}, Rank{}, "g1", 0},
		{"matching generation before a higher position of another", known("g1", 5), known("g0", 900), "g1", -1},
		{"another generation after the matching one", known("g0", 900), known("g1", 5), "g1", 1},
		{"same generation: higher position first", known("g1", 10), known("g1", 9), "g1", -1},
		{"same generation: lower position after", known("g1", 9), known("g1", 10), "g1", 1},
		{"equal ranks: undecided", known("g1", 9), known("g1", 9), "g1", 0},
		{"none matches: positions decide", known("g2", 3), known("g3", 4), "g1", 1},
		{"no reference generation: positions decide", known("g2", 3), known("g3", 1), "", -1},
	}
	for _, c := range cases {
		if got := CompareRanks(c.a, c.b, c.gen); got != c.want {
			t.Errorf("%s: CompareRanks(%+v, %+v, %q) = %d; want %d", c.name, c.a, c.b, c.gen, got, c.want)
		}
	}
}

// A published rank reads back as it was written, and as unknown when it is
// missing, malformed, or older than RankStaleFactor periods at the member
// Lease's renewal (both on the member's own clock).
func TestRankOfMemberLease(t *testing.T) {
	observed := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lease := func(annotation string, renewed time.Time) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		if annotation != "" {
			l.Annotations[RankAnnotation] = annotation
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
		return l
	}
	fresh := encodeRank(known("h-7", 42), observed, 2*time.Second)
	cases := []struct {
		name string
		l    *coordinationv1.Lease
		want Rank
	}{
		{"fresh", lease(fresh, observed.Add(time.Second)), known("h-7", 42)},
		{"renewed at the stale bound", lease(fresh, observed.Add(6*time.Second)), known("h-7", 42)},
		{"stale", lease(fresh, observed.Add(6*time.Second+time.Millisecond)), Rank{}},
		{"missing", lease("", observed), Rank{}},
		{"malformed", lease(`{"generation":`, observed), Rank{}},
		{"no period", lease(`{"generation":"h","position":1,"observedAt":"2026-12-01T12:00:00Z"}`, observed), Rank{}},
		{"no renewTime", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{RankAnnotation: fresh}}}, Rank{}},
	}
	for _, c := range cases {
		if got := rankOf(c.l); got != c.want {
			t.Errorf("%s: rankOf = %+v; want %+v", c.name, got, c.want)
		}
	}
	if encodeRank(Rank{}, observed, time.Second) != "" {
		t.Error("an unknown rank is published")
	}
}

// rankedMembers is a view of live members serving lease "db", with ranks.
func rankedMembers(ranks map[string]Rank) *Members {
	m := &Members{Listed: true, Info: map[string]Info{}, Serves: map[string]Served{}, Versions: map[string]string{}}
	for id, r := range ranks {
		m.Identities = append(m.Identities, id)
		m.Info[id] = Info{Rank: r}
		m.Serves[id] = Served{"db": true}
	}
	return m
}

func TestDeferral(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	step := time.Second
	members := rankedMembers(map[string]Rank{"a": known("g1", 30), "b": known("g1", 20), "c": known("g1", 10), "old": known("g1", 99), "x": known("g0", 500)})
	crashed := LeaseState{Name: "db", Holder: "old", Generation: "g1"} // the holder's claim ended at t0
	held := LeaseState{Name: "db", Holder: "old", Generation: "g1", FreeAt: t0.Add(5 * time.Second)}
	cases := []struct {
		name      string
		self      string
		s         LeaseState
		members   *Members
		wantOK    bool
		wantUntil time.Time
	}{
		{"the best live candidate does not defer (the crashed holder does not count)", "a", crashed, members, false, time.Time{}},
		{"the next best defers one step", "b", crashed, members, true, t0.Add(step)},
		{"the third defers two", "c", crashed, members, true, t0.Add(2 * step)},
		{"another generation defers to every matching one", "x", crashed, members, true, t0.Add(3 * step)},
		{"while another holds: from the end of its claim", "b", held, members, true, t0.Add(6 * time.Second)},
		{"leading: never", "b", LeaseState{Name: "db", Leading: true, Holder: "b"}, members, false, time.Time{}},
		{"the record names it: never", "b", LeaseState{Name: "db", Holder: "b"}, members, false, time.Time{}},
		{"reserved for it: never", "c", LeaseState{Name: "db", ReservedFor: "c", Generation: "g1"}, members, false, time.Time{}},
		{"a member that declines the Lease does not count", "b", crashed,
			func() *Members {
				m := rankedMembers(map[string]Rank{"a": known("g1", 30), "b": known("g1", 20)})
				m.Declined = map[string][]string{"a": {"db"}}
				return m
			}(), false, time.Time{}},
		{"a member that does not serve the Lease does not count", "b", crashed,
			func() *Members {
				m := rankedMembers(map[string]Rank{"a": known("g1", 30), "b": known("g1", 20)})
				m.Serves["a"] = Served{}
				return m
			}(), false, time.Time{}},
		{"an unknown rank does not count", "b", crashed, rankedMembers(map[string]Rank{"a": {}, "b": known("g1", 20)}), false, time.Time{}},
		{"no membership yet: no deferral", "b", crashed, nil, false, time.Time{}},
		{"capped at the bound", "z", crashed, rankedMembers(map[string]Rank{"a": known("g", 5), "b": known("g", 4), "c": known("g", 3), "d": known("g", 2), "z": known("g", 1)}), true, t0.Add(3 * step)},
	}
	for _, c := range cases {
		own := known("g1", 20)
		if c.members != nil {
			own = c.members.Info[c.self].Rank
		}
		until, ok := Deferral(c.self, own, c.s, t0, c.members, step)
		if ok != c.wantOK || !until.Equal(c.wantUntil) {
			t.Errorf("%s: Deferral = %v, %v; want %v, %v", c.name, until, ok, c.wantUntil, c.wantOK)
		}
	}
	if b := RankDeferBound(15 * time.Second); b != 3*time.Second || b >= 15*time.Second/2 {
		t.Errorf("RankDeferBound(15s) = %v; want 3s", b)
	}
}

// The successor is the best-ranked member: the matching generation first,
// then the highest position; priority and start time only among equals.
func TestSuccessorByRank(t *testing.T) {
	start := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	m := rankedMembers(map[string]Rank{"self": known("g1", 50), "newest": {}, "hi-prio": known("g0", 999), "data": known("g1", 40), "less": known("g1", 39)})
	m.Info["newest"] = Info{StartedAt: start.Add(time.Hour), Priority: 100}
	m.Info["hi-prio"] = Info{Rank: known("g0", 999), Priority: 50}
	if got := Successor("self", "db", "g1", m); got != "data" {
		t.Errorf("Successor = %q; want data (matching generation, highest position)", got)
	}
	if got := Best("self", known("g1", 50), true, "db", "g1", m); got != "self" {
		t.Errorf("Best = %q; want self", got)
	}
	if got := Best("self", Rank{}, true, "db", "g1", m); got != "data" {
		t.Errorf("Best with self unknown = %q; want data", got)
	}
	// Without ranks (the feature off), the existing order stands.
	plain := rankedMembers(map[string]Rank{"a": {}, "b": {}})
	plain.Info["a"] = Info{Priority: 1}
	if got := Successor("self", "db", "", plain); got != "a" {
		t.Errorf("Successor without ranks = %q; want a (priority)", got)
	}
}

// rankedConfig is a greedy member of one Lease with data-aware failover.
func rankedConfig(identity string) Config {
	cfg := testConfig(identity, "db")
	cfg.Balance, cfg.Handover, cfg.Ranked, cfg.RankPeriod = false, true, true, 2*time.Second
	return cfg
}

// A ranked member publishes its rank on its member Lease, writes at once
// when the rank turns unknown or its generation changes, and carries a
// new position with its next renewal.
func TestMemberPublishesItsRank(t *testing.T) {
	h := newMachine(t, rankedConfig("b"))
	if _, ok := h.out.Request.Lease.Annotations[RankAnnotation]; ok {
		t.Error("an unknown rank was published")
	}
	h.joined()
	h.step(SetRank{Rank: known("g1", 7), ObservedAt: h.now})
	req := h.out.Request
	if req == nil || req.Verb != Update || rankOf(req.Lease) != known("g1", 7) {
		t.Fatalf("after SetRank: request %+v; want an update carrying the rank", req)
	}
	h.answer(req.Lease, nil)
	h.now = h.now.Add(time.Second)
	if h.step(SetRank{Rank: known("g1", 8), ObservedAt: h.now}); h.out.Request != nil {
		t.Fatalf("a new position alone wrote at once: %+v", h.out.Request)
	}
	h.now = h.now.Add(5 * time.Second) // the renewal is due
	h.step(Tick{})
	if req := h.out.Request; req == nil || rankOf(req.Lease) != known("g1", 8) {
		t.Fatalf("renewal %+v; want it to carry position 8", req)
	}
	h.answer(h.out.Request.Lease, nil)
	h.step(SetRank{ObservedAt: h.now})
	if req := h.out.Request; req == nil || req.Lease.Annotations[RankAnnotation] != "" {
		t.Fatalf("after the rank turned unknown: %+v; want an update without it", req)
	}
}

// On a crash failover, a ranked member that sees a better-ranked live
// member withdraws while the holder's claim runs and until a step after
// it ends, then campaigns; the best one never withdraws.
func TestRankedMemberDefersToABetterOne(t *testing.T) {
	for _, c := range []struct {
		self, other string
		own         Rank
		defers      bool
	}{
		{"b", "a", known("g1", 10), true},
		{"a", "b", known("g1", 30), false},
	} {
		h := newMachine(t, rankedConfig(c.self))
		h.joined()
		h.step(SetRank{Rank: c.own, ObservedAt: h.now})
		h.answer(h.out.Request.Lease, nil)
		freeAt := h.now.Add(10 * time.Second)
		h.states[0] = LeaseState{Name: "db", Observed: true, Holder: "old", FreeAt: freeAt, Generation: "g1"}
		other := memberLease(c.other, 200, 15, "db")
		other.Spec.RenewTime = &metav1.MicroTime{Time: h.now}
		rank := known("g1", 20)
		other.Annotations[RankAnnotation] = encodeRank(rank, h.now, 2*time.Second)
		h.step(Changed{Lease: &other})
		call := findCall(h.out.Calls, 0)
		if !c.defers {
			if call != nil && !call.Candidate {
				t.Errorf("%s: the best-ranked member withdrew: %+v", c.self, call)
			}
			continue
		}
		if call == nil || call.Candidate || call.Leave {
			t.Fatalf("%s: calls %+v; want a withdrawal while it defers", c.self, h.out.Calls)
		}
		h.step(CandidacyDone{Lease: 0})
		want := freeAt.Add(RankDeferStep(15 * time.Second))
		if !h.out.Wake.Equal(want) && h.out.Wake.After(want) {
			t.Errorf("wake %v; want at most %v (the deferral's end)", h.out.Wake, want)
		}
		h.now = freeAt
		h.states[0].FreeAt = time.Time{} // the claim has ended
		if h.step(Tick{}); findCall(h.out.Calls, 0) != nil {
			t.Errorf("campaigned at the claim's end: %+v", h.out.Calls)
		}
		h.now = want
		h.step(Tick{})
		if call := findCall(h.out.Calls, 0); call == nil || !call.Candidate {
			t.Errorf("calls %+v at the deferral's end; want it to campaign", h.out.Calls)
		}
	}
}

func findCall(calls []Call, lease int) *Call {
	for i := range calls {
		if calls[i].Lease == lease {
			return &calls[i]
		}
	}
	return nil
}
