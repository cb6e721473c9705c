package elect_test

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/elect"
)

func startWithdrawn() option {
	return func(c *elect.Config, _ **rest.Config) { c.StartWithdrawn = true }
}

// Withdrawing the leader (an unhealthy app) ends its term before the call
// returns, releases the Lease so a watching candidate takes it within a
// round trip, and keeps it out of the election until it is put back.
func TestWithdrawnLeaderStepsDownReleasesAndStaysOut(t *testing.T) {
	const slowRetry = 2 * time.Second // a poll would take at least this long
	f := newFixture(t)
	a, first, b := f.leaderAndWatcher(slowRetry)

	withdrawn, polls, expires := time.Now(), b.requests.Count("get", ""), b.Snapshot().FreeAt
	released, err := a.SetCandidate(t.Context(), false, "app unhealthy")
	if err != nil || !released {
		t.Fatalf("SetCandidate(false) = %v, %v; want a release", released, err)
	}
	if s := a.Snapshot(); s.Leading || s.Candidate {
		t.Fatalf("after SetCandidate(false): leading=%v candidate=%v; want neither", s.Leading, s.Candidate)
	}
	second := b.waitFor(t, "b leads", leading)
	// Within a round trip, on the watch event: neither at a poll (b sent
	// no Get) nor when a's last claim expired (b's FreeAt before it).
	if got := b.requests.Count("get", ""); got != polls {
		t.Errorf("b polled the Lease %v times before it took over; want it taken on the watch event", got-polls)
	}
	if !time.Now().Before(expires) {
		t.Errorf("b took over only once a's claim expired (%v after the withdrawal); want it taken on the watch event", time.Since(withdrawn))
	}
	t.Logf("b took over %v after the withdrawal", time.Since(withdrawn))
	if second.Token <= first.Token {
		t.Errorf("b's token %d not above a's %d", second.Token, first.Token)
	}

	// b releases; a, withdrawn, must leave the Lease free.
	if _, err := b.Release(t.Context(), time.Hour); err != nil {
		t.Fatal(err)
	}
	// Each of them stepped on the free Lease (the step where a candidate
	// would send its acquire) and then stepped again (by when an acquire
	// sent at that step has been answered): neither wrote.
	aWrites, bWrites := a.writes(), b.writes()
	for _, c := range []*candidate{a, b} {
		saw := c.waitFor(t, "it sees the release", func(s *elect.Snapshot) bool { return s.Holder == "" })
		if s := c.nextStep(t, saw); s.Leading || s.Holder != "" {
			t.Fatalf("%s (withdrawn, or staying out) took the Lease: leading=%v holder %q", s.Identity, s.Leading, s.Holder)
		}
	}
	if got := a.writes(); got != aWrites {
		t.Errorf("withdrawn a wrote the free Lease %v times", got-aWrites)
	}
	if got := b.writes(); got != bWrites {
		t.Errorf("b, staying out, wrote the free Lease %v times", got-bWrites)
	}
	if h := holder(f.lease()); h != "" {
		t.Fatalf("withdrawn a (or b, staying out) took the Lease: holder %q", h)
	}

	// Put back, a campaigns again and takes the free Lease at once.
	if _, err := a.SetCandidate(t.Context(), true, "app healthy"); err != nil {
		t.Fatal(err)
	}
	third := a.waitFor(t, "a leads again", leading)
	if !third.Candidate || third.Token <= second.Token {
		t.Errorf("a again: candidate=%v token %d (b's was %d)", third.Candidate, third.Token, second.Token)
	}
}

// An elector started withdrawn follows the Lease but never takes it, not
// even a free one, until SetCandidate(true); a follower's withdrawal writes
// nothing.
func TestStartWithdrawnNeverCampaignsUntilPutBack(t *testing.T) {
	f := newFixture(t)
	a := f.start("a", startWithdrawn())
	s := a.waitFor(t, "a observes the missing Lease", func(s *elect.Snapshot) bool { return s.Observed })
	if s.Candidate {
		t.Error("Candidate true while withdrawn")
	}
	// The step that found the Lease missing is where a candidate sends its
	// create; by the next step, a create sent then has been answered.
	if s := a.nextStep(t, s); s.Leading {
		t.Fatal("a withdrawn elector acquired the Lease")
	}
	if got := a.requests.Count("create", ""); got != 0 {
		t.Fatalf("withdrawn elector created the Lease %v times", got)
	}

	if _, err := a.SetCandidate(t.Context(), true, "app healthy"); err != nil {
		t.Fatal(err)
	}
	a.waitFor(t, "a leads", leading)

	b := f.start("b", startWithdrawn())
	b.waitFor(t, "b sees a", func(s *elect.Snapshot) bool { return s.Holder == "a" })
	writes := b.requests.Count("update", "")
	if released, err := b.SetCandidate(t.Context(), false, "still unhealthy"); err != nil || released {
		t.Fatalf("follower SetCandidate(false) = %v, %v; want no release", released, err)
	}
	if got := b.requests.Count("update", ""); got != writes {
		t.Errorf("a follower's withdrawal wrote the Lease")
	}
	if h := holder(f.lease()); h != "a" {
		t.Errorf("holder %q after a follower withdrew; want a", h)
	}
}
