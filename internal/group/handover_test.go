package group_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/group"
)

// handover configures a member that hands its Leases to a chosen
// successor, one Lease greedy (as LEASEHOLD_HANDOVER=successor runs a
// single Lease), started at started with priority.
func handover(started time.Time, priority int64) func(*group.Config) {
	return func(c *group.Config) {
		c.Balance, c.Handover, c.StartedAt, c.Priority = false, true, started, priority
	}
}

// waitMembers waits until every member sees n members.
func waitMembers(t *testing.T, members []*member, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("every member sees %d members", n), func() bool {
		ok := true
		for _, m := range members {
			ok = ok && m.Snapshot().Members == n
		}
		return ok
	}, nil)
}

// holderAmong is who leads validly among members, "" when none does; it fails
// the test on two.
func holderAmong(t *testing.T, members []*member) string {
	t.Helper()
	checkOneLeader(t, members)
	for _, m := range members {
		if m.held() == 1 {
			return m.id
		}
	}
	return ""
}

// waitLeader waits until want leads, checking at every sample that no one
// else leads meanwhile except the previous holder before it let go.
func waitLeader(t *testing.T, members []*member, want string, allowed ...string) {
	t.Helper()
	h := ""
	eventually(t, want+" leads", func() bool {
		h = holderAmong(t, members)
		if h != "" && h != want && !slices.Contains(allowed, h) {
			t.Fatalf("%s leads; want %s next", h, want)
		}
		return h == want
	}, func() string { return fmt.Sprintf("holder %q", h) })
}

// POST /v1/release?to=: the named successor takes the Lease, before any
// other candidate, and well before the others may (renewDeadline); a name
// that is no live member other than the holder releases nothing.
func TestHandOverToAChosenSuccessor(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(1)
	now := time.Now()
	a := f.start("a", leases, handover(now, 0))
	waitHeld(t, []*member{a}, []int{1})
	b, c := f.start("b", leases, handover(now, 0)), f.start("c", leases, handover(now, 0))
	all := []*member{a, b, c}
	waitMembers(t, all, 3)

	for _, to := range []string{"nobody", "a"} {
		if _, err := a.Elections()[0].HandOver(t.Context(), time.Minute, to); !errors.Is(err, group.ErrUnknownSuccessor) {
			t.Errorf("HandOver to %q: %v; want ErrUnknownSuccessor", to, err)
		}
	}
	if holderAmong(t, all) != "a" {
		t.Fatal("a no longer leads after refused handovers")
	}

	token := a.leases()[0].Token
	asked := time.Now()
	if released, err := a.Elections()[0].HandOver(t.Context(), time.Minute, "c"); err != nil || !released {
		t.Fatalf("HandOver to c: released %v, %v", released, err)
	}
	waitLeader(t, all, "c", "a")
	took := time.Since(asked)
	t.Logf("c leads %v after the handover was asked", took)
	if took >= renewDeadline {
		t.Errorf("c leads %v after the handover: not before the others' wait (renewDeadline %v) ended, so it was not handed to c", took, renewDeadline)
	}
	if got := c.leases()[0].Token; got <= token {
		t.Errorf("c's token %d, not above a's %d", got, token)
	}
}

// On shutdown a member hands its Lease to the member with the highest
// priority, then the newest; never to the one that is itself leaving.
func TestShutdownHandsToTheBestSuccessor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		priorityB int64
		want      string
	}{
		{"the newest", 0, "c"},
		{"the highest priority", 1, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			leases := shardNames(1)
			start := time.Now()
			a := f.start("a", leases, handover(start, 0))
			waitHeld(t, []*member{a}, []int{1})
			b := f.start("b", leases, handover(start.Add(time.Second), tc.priorityB))
			c := f.start("c", leases, handover(start.Add(2*time.Second), 0))
			all := []*member{a, b, c}
			waitMembers(t, all, 3)
			stopped := time.Now()
			a.stop(t)
			waitLeader(t, []*member{b, c}, tc.want)
			if took := time.Since(stopped); took >= renewDeadline {
				t.Errorf("%s leads %v after a stopped: not before the others' wait (%v) ended", tc.want, took, renewDeadline)
			}
		})
	}
}

// In a balanced group with handover, a member that leaves hands each of its
// Leases to the member the fair share among the others gives it: each
// moves once, straight to where it stays.
func TestBalancedLeaverHandsEachLeaseToItsHeir(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(6)
	moves := f.countMoves()
	now := time.Now()
	withHandover := func(c *group.Config) { c.Handover, c.StartedAt = true, now }
	a := f.start("a", leases, withHandover)
	waitHeld(t, []*member{a}, []int{6})
	b, c := f.start("b", leases, withHandover), f.start("c", leases, withHandover)
	all := []*member{a, b, c}
	waitHeld(t, all, []int{2, 2, 2})
	before := moves.settled(t, all)

	a.stop(t)
	rest := []*member{b, c}
	waitHeld(t, rest, []int{3, 3})
	if got := moves.settled(t, rest) - before; got != 2 {
		t.Errorf("%d moves after a left, want 2 (a's Leases, once each)", got)
	}
}

// A health step-down (SetCandidate(false), as health-gated candidacy asks)
// hands over like a shutdown: the leader leaves the membership and the
// newest member leads, well before the others could take the Lease.
func TestHealthStepDownHandsToTheNewest(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(1)
	start := time.Now()
	a := f.start("a", leases, handover(start, 0))
	waitHeld(t, []*member{a}, []int{1})
	b := f.start("b", leases, handover(start.Add(time.Second), 0))
	c := f.start("c", leases, handover(start.Add(2*time.Second), 0))
	all := []*member{a, b, c}
	waitMembers(t, all, 3)
	unfit := time.Now()
	if _, err := a.SetCandidate(t.Context(), false, "app unhealthy"); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, all, "c", "a")
	if took := time.Since(unfit); took >= renewDeadline {
		t.Errorf("c leads %v after a's step-down: not before the others' wait (%v) ended", took, renewDeadline)
	}
	waitMembers(t, []*member{b, c}, 2)
}

// With handover, a balanced leaver hands each Lease over in one write: the
// first version after its stop names the heir (decide.HandedOverAnnotation
// citing the heir's member Lease), no empty record comes between, and the
// heir leads on that very version, without a write of its own: its token is
// that version's resourceVersion.
func TestBalancedLeaverHandsOverInOneWrite(t *testing.T) {
	f := newFixture(t)
	leases := shardNames(6)
	now := time.Now()
	withHandover := func(c *group.Config) { c.Handover, c.StartedAt = true, now }
	a := f.start("a", leases, withHandover)
	waitHeld(t, []*member{a}, []int{6})
	b, c := f.start("b", leases, withHandover), f.start("c", leases, withHandover)
	waitHeld(t, []*member{a, b, c}, []int{2, 2, 2})
	var leaving []string
	for _, s := range a.leases() {
		if s.Leading {
			leaving = append(leaving, s.Lease)
		}
	}

	w, err := f.client.Watch(t.Context(), metav1.ListOptions{}) // from now: the current versions first
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	a.stop(t)
	rest := []*member{b, c}
	waitHeld(t, rest, []int{3, 3})

	first := map[string]*coordinationv1.Lease{} // the first version of each of a's Leases after a held it
	deadline := time.After(generous)
	for len(first) < len(leaving) {
		select {
		case ev := <-w.ResultChan():
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || !slices.Contains(leaving, l.Name) || first[l.Name] != nil || *l.Spec.HolderIdentity == "a" {
				continue
			}
			first[l.Name] = l
		case <-deadline:
			t.Fatalf("the watch showed %d of a's %d Leases change", len(first), len(leaving))
		}
	}
	for _, name := range leaving {
		l := first[name]
		heir := *l.Spec.HolderIdentity
		if heir == "" || l.Annotations[decide.HandedOverAnnotation] == "" {
			t.Errorf("%s: the version after a's names %q with %s=%q; want the heir, handed over in one write",
				name, heir, decide.HandedOverAnnotation, l.Annotations[decide.HandedOverAnnotation])
			continue
		}
		for _, m := range rest {
			for _, s := range m.leases() {
				if s.Lease == name && m.id == heir && s.Token.String() != l.ResourceVersion {
					t.Errorf("%s: heir %s leads with token %d; want the handover's resourceVersion %s (no write of its own first)", name, heir, s.Token, l.ResourceVersion)
				}
			}
		}
	}
}
