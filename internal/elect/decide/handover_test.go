package decide

import (
	"testing"
	"time"
)

// A release handed to a successor: the successor takes it at once; any
// other candidate leaves it alone for RenewDeadline after it observes the
// release, then takes it as a signed release. Table-driven over who
// watches.
func TestReleaseHandedToASuccessor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		identity string
		want     time.Duration // from the release to leading
	}{
		{"the successor takes it at once", "next", 0},
		{"another waits RenewDeadline", "other", 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, standardConfig(tc.identity), newStore("ns", "lease"))
			held(h.store, "old", 15)
			h.begin(true)
			h.advance(time.Second)
			releasedTo(h.store, "old", "next")
			from := h.now
			h.feed(Tick{})
			if tc.want > 0 {
				if r := h.last.Report; r.ReservedFor != "next" || !r.FreeAt.Equal(from.Add(tc.want)) {
					t.Errorf("report: reservedFor %q freeAt %v; want next, %v", r.ReservedFor, r.FreeAt, from.Add(tc.want))
				}
			}
			took := h.waitLeading(from, 30*time.Second)
			if took < tc.want || took > tc.want+100*time.Millisecond {
				t.Errorf("leads %v after the release; want %v", took, tc.want)
			}
			if got := h.store.lease.Annotations[ReleasedForAnnotation]; got != "" {
				t.Errorf("the acquiring write kept released-for %q", got)
			}
		})
	}
}

// The leader hands over: Release{To} signs the release for the successor;
// Stop{To} too; a release without To signs it for no one in particular,
// even over a record a previous handover left signed for someone.
func TestLeaderHandsOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want string
	}{
		{"release to", Release{ID: 1, StayOut: time.Minute, To: "next"}, "next"},
		{"stop to", Stop{To: "next"}, "next"},
		{"withdraw to", SetCandidate{ID: 1, Reason: "unfit", To: "next"}, "next"},
		{"release to no one", Release{ID: 1, StayOut: time.Minute}, ""},
		{"release to itself: no one", Release{ID: 1, StayOut: time.Minute, To: "c"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
			releasedTo(h.store, "", "earlier") // a record once handed to someone else...
			held(h.store, "c", 15)             // ...then held by c
			h.begin(true)
			h.waitLeading(h.now, 5*time.Second)
			h.feed(tc.in)
			h.feed(HoldsCleared{})
			l := h.store.lease
			if holderOf(l) != "" || l.Annotations[ReleasedByAnnotation] != "c" {
				t.Fatalf("holder %q, released-by %q; want released by c", holderOf(l), l.Annotations[ReleasedByAnnotation])
			}
			if got := l.Annotations[ReleasedForAnnotation]; got != tc.want {
				t.Errorf("released-for %q, want %q", got, tc.want)
			}
		})
	}
}

// releasedTo writes holder's signed release of s's record handed to to (an
// empty holder: just the annotations, on a new record).
func releasedTo(s *store, holder, to string) {
	if holder == "" {
		held(s, "someone", 15)
		holder = "someone"
	}
	released(s, holder)
	l := s.lease.DeepCopy()
	l.Annotations[ReleasedForAnnotation] = to
	if _, err := s.update(holder, l); err != nil {
		panic(err)
	}
}
