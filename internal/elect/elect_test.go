package elect_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// A missing Lease: the first candidate creates an empty record and, having
// observed it for a lease duration (a fresh candidate cannot know that no
// one leads), acquires it with one Update conditioned on its
// resourceVersion. The token is the resourceVersion of that write and is
// published on the Lease; validity is the write's send time +
// renewDeadline.
func TestMissingLeaseIsCreatedEmptyThenAcquiredAfterALeaseDuration(t *testing.T) {
	f := newFixture(t)
	started := time.Now()
	a := f.start("a")
	s := a.waitFor(t, "a leads", leading)
	after := time.Now()

	if s.Holder != "a" || s.Term != 0 || s.Token == 0 {
		t.Fatalf("snapshot after acquire: %+v", *s)
	}
	if s.ValidUntil.Before(started.Add(leaseDuration + renewDeadline)) {
		t.Errorf("ValidUntil %v: acquired before a lease duration had passed since the start (%v)", s.ValidUntil, started)
	}
	if s.ValidUntil.After(after.Add(renewDeadline)) {
		t.Errorf("ValidUntil %v after the acquire's answer + renewDeadline (%v)", s.ValidUntil, after.Add(renewDeadline))
	}
	lease := f.waitLease(func(l *coordinationv1.Lease) bool { return l.Annotations[fence.Annotation] != "" })
	published, ok := fence.Published(lease.Annotations)
	if !ok || published != s.Token {
		t.Errorf("published token %q, want %d", lease.Annotations[fence.Annotation], s.Token)
	}
	if rv := mustToken(t, lease.ResourceVersion); s.Token >= rv {
		t.Errorf("token %d is not the resourceVersion of an earlier write than the Lease's %d", s.Token, rv)
	}
	if creates := a.requests.Count("create", "201"); creates != 1 {
		t.Errorf("%v creates; want the one empty record", creates)
	}
}

// Expiry is judged from the local time the record was observed, plus the
// holder's duration; renewTime is never compared with the local clock, so a
// holder whose clock is an hour off in either direction changes nothing.
func TestExpiryIsJudgedFromObservationNotRenewTime(t *testing.T) {
	for name, offset := range map[string]time.Duration{"renewTime an hour behind": -time.Hour, "renewTime an hour ahead": time.Hour} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			renew := metav1.NewMicroTime(time.Now().Add(offset))
			if _, err := f.adminLeases().Create(t.Context(), &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: leaseName},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: ptr.To("ghost"), LeaseDurationSeconds: ptr.To[int32](3),
					AcquireTime: &renew, RenewTime: &renew,
				},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			started := time.Now()
			a := f.start("a")
			a.waitFor(t, "a leads", leading)
			waited := time.Since(started)
			if waited < 3*time.Second {
				t.Fatalf("took over after %v: before the holder's 3s counted from this instance's observation", waited)
			}
			if waited > 3*time.Second+generous/2 {
				t.Fatalf("took over only after %v", waited)
			}
		})
	}
}

// The leader renews with exactly one Update per renewal and no Get; a
// watching candidate makes no request at all while the leader is healthy.
func TestRenewalIsOneUpdateAndWatchingCandidatesDoNotPoll(t *testing.T) {
	f := newFixture(t)
	a := f.start("a")
	a.waitFor(t, "a leads", leading)
	b := f.start("b")
	b.waitFor(t, "b watches", func(s *elect.Snapshot) bool { return s.WatchUp && s.Holder == "a" })

	// The writes that land are counted on an admin watch of the Lease. The
	// window opens and closes once a renewal has landed and the leader has
	// published it: its Update has been counted (on the answer, before the
	// leader publishes) and the next Update is a retry period away.
	w, err := f.adminLeases().Watch(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", leaseName).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	nextWrite := func() (renewTime time.Time) {
		t.Helper()
		timeout := time.After(generous)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("admin watch closed")
				}
				if l, isLease := ev.Object.(*coordinationv1.Lease); isLease && ev.Type == watch.Modified {
					return l.Spec.RenewTime.Time
				}
			case <-timeout:
				t.Fatal("no write of the Lease")
			}
		}
	}
	published := func(renewTime time.Time) {
		t.Helper()
		a.waitFor(t, "a publishes its renewal", func(s *elect.Snapshot) bool { return !s.RenewedAt.Before(renewTime) })
	}

	published(nextWrite())
	aUpdates, aOK, aGets := a.requests.Count("update", ""), a.requests.Count("update", "200"), a.requests.Count("get", "")
	bAll := b.requests.Count("", "")
	renewals := 0
	var last time.Time
	for closing := time.Now().Add(10 * retryPeriod); time.Now().Before(closing); renewals++ {
		last = nextWrite()
	}
	published(last)

	// Each Update is counted on its answer, before the leader publishes it,
	// so once the last landed write is published the counts cover it; a
	// renewal answered meanwhile (the test starved past a retry period) has
	// landed too: follow the watch to it. Every Update answered 200 landed,
	// and nothing landed that the leader did not send (an Update without an
	// answer, on a loaded machine, may have landed or not).
	ok := func() float64 { return a.requests.Count("update", "200") - aOK }
	landed := renewals
	for deadline := time.Now().Add(generous); ok() > float64(landed); landed++ {
		if time.Now().After(deadline) {
			t.Fatalf("leader's updates answered 200: %v; renewals landed: %v", ok(), landed)
		}
		published(nextWrite())
	}
	// The leader's own watch can deliver its last write, and publish it,
	// before that Update's answer is counted: wait for the count.
	all := func() float64 { return a.requests.Count("update", "") - aUpdates }
	poll.UntilReport(t, generous, 10*time.Millisecond, fmt.Sprintf("the leader's updates counted for the %v renewals landed", landed),
		func() bool { return all() >= float64(landed) },
		func() string { return fmt.Sprintf("leader sent %v updates (%v answered 200)", all(), ok()) })
	if got := a.requests.Count("get", "") - aGets; got != 0 {
		t.Errorf("leader made %v gets while renewing; want 0", got)
	}
	if got := b.requests.Count("", "") - bAll; got != 0 {
		t.Errorf("watching candidate made %v requests; want 0", got)
	}
	if renewals < 5 {
		t.Errorf("only %v renewals in the window", renewals)
	}
}

// Another holder written by hand ends the term at once, on the watch event:
// not at the next renewal (whose 409, and the read after it, would show the
// intruder too), nor when the term's validity runs out. The instance then
// campaigns again and takes the Lease when the intruder lets it expire, with
// a larger token.
//
// Renewals are a retry period (3s) apart and the edit lands right after
// one: a step-down with no conflict and no read since the edit came from the
// watch event.
func TestStepsDownAtOnceOnTakeoverAndCampaignsAgain(t *testing.T) {
	f := newFixture(t)
	a := f.start("a", withTimings(8*time.Second, 4*time.Second, 3*time.Second))
	first := a.waitFor(t, "a leads", leading)
	a.waitFor(t, "a renews", func(s *elect.Snapshot) bool { return s.RenewedAt.After(first.RenewedAt) })

	conflicts, reads := a.requests.Count("update", "409"), a.requests.Count("get", "")
	f.edit(func(l *coordinationv1.Lease) {
		now := metav1.NowMicro()
		l.Spec.HolderIdentity, l.Spec.RenewTime = ptr.To("intruder"), &now
	})
	written := time.Now()
	down := a.waitFor(t, "a steps down", notLeading)
	t.Logf("stepped down %v after the takeover", time.Since(written))
	if got := a.requests.Count("update", "409") - conflicts; got != 0 {
		t.Errorf("a's renewal met the intruder (%v conflicts) before it stepped down; want it stepped down on the watch event", got)
	}
	if got := a.requests.Count("get", "") - reads; got != 0 {
		t.Errorf("a read the Lease %v times before it stepped down; want it stepped down on the watch event", got)
	}
	if down.Holder != "intruder" {
		t.Errorf("holder after takeover: %q", down.Holder)
	}

	again := a.waitFor(t, "a leads again after the intruder's lease expires", leading)
	if again.Token <= first.Token {
		t.Errorf("token of the new term %d not above the old %d", again.Token, first.Token)
	}
	if again.Term <= first.Term {
		t.Errorf("term %d not above %d", again.Term, first.Term)
	}
}

// A deleted Lease ends the term at once; the instance recreates it in a new
// term whose token is larger and whose term number continues.
func TestStepsDownOnDeleteAndRecreatesWithLargerToken(t *testing.T) {
	f := newFixture(t)
	a := f.start("a")
	first := a.waitFor(t, "a leads", leading)
	if err := f.adminLeases().Delete(t.Context(), leaseName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := a.waitFor(t, "a leads a new term", func(s *elect.Snapshot) bool { return leading(s) && s.Token != first.Token })
	if second.Token <= first.Token {
		t.Errorf("token after recreate %d not above %d", second.Token, first.Token)
	}
	if second.Term != first.Term+1 {
		t.Errorf("term after recreate %d, want %d (kept across the deletion)", second.Term, first.Term+1)
	}
}

// Without list/watch permission the candidate polls every retryPeriod, and
// the leader learns of a takeover from the 409 of its next renewal: the
// fresh Get shows the other holder and the term ends there, at the first
// conflict (renewing on, it would meet more before its validity ran out).
// The intruder's record lasts a minute, so that no attempt of a to take the
// Lease back adds a conflict of its own.
func TestWithoutWatchPollsAndStepsDownOnConflict(t *testing.T) {
	f := newFixture(t)
	user := f.noWatchUser()
	a := f.start("a", withUser(user))
	a.waitFor(t, "a leads by polling", leading)
	if a.Snapshot().WatchUp {
		t.Fatal("watch reported up without list/watch permission")
	}
	conflicts, reads := a.requests.Count("update", "409"), a.requests.Count("get", "")
	f.edit(func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To("intruder"), ptr.To[int32](60)
	})
	written := time.Now()
	down := a.waitFor(t, "a steps down", notLeading)
	t.Logf("stepped down %v after the takeover", time.Since(written))
	if got := a.requests.Count("update", "409") - conflicts; got != 1 {
		t.Errorf("%v renewals met the intruder (409) by the time a stepped down; want the step-down at the first", got)
	}
	if got := a.requests.Count("get", "") - reads; got < 1 {
		t.Errorf("a stepped down without reading the Lease after the conflict")
	}
	if down.Holder != "intruder" {
		t.Errorf("holder when a stepped down: %q; want the intruder its read showed", down.Holder)
	}
}

// A released Lease is taken by a watching candidate within a round trip,
// not at its next poll.
func TestReleasedLeaseIsTakenWithoutWaitingForAPoll(t *testing.T) {
	const slowRetry = 2 * time.Second
	f := newFixture(t)
	a, first, b := f.leaderAndWatcher(slowRetry)

	released, polls, conflicts, expires := time.Now(), b.requests.Count("get", ""), b.requests.Count("update", "409"), b.Snapshot().FreeAt
	a.stop(t)
	s := b.waitFor(t, "b leads", leading)
	// On the watch event: neither at a poll (b sent no Get, but for the
	// read a conflict owes) nor when a's last claim expired (b's FreeAt
	// before it).
	gets, conflicted := b.requests.Count("get", "")-polls, b.requests.Count("update", "409")-conflicts
	if gets > conflicted {
		t.Errorf("b polled the Lease %v times before it took over (%v reads after %v conflicts); want it taken on the watch event", gets-conflicted, gets, conflicted)
	}
	if !time.Now().Before(expires) {
		t.Errorf("b took over only once a's claim expired (%v after the release); want it taken on the watch event", time.Since(released))
	}
	t.Logf("takeover %v after release", time.Since(released))
	if s.Token <= first.Token {
		t.Errorf("successor token %d not above %d", s.Token, first.Token)
	}
}

// An instance that watched the successor's acquire reports its token at
// once, while the Lease does not carry it yet: the successor publishes it
// with its first renewal, a retryPeriod later.
func TestFollowerReportsTheNewTokenFromTheAcquireItWatched(t *testing.T) {
	const slowRetry = 2 * time.Second
	f := newFixture(t)
	a, _, b := f.leaderAndWatcher(slowRetry)
	c := f.start("c", withTimings(5*time.Second, 2500*time.Millisecond, slowRetry), withdrawn())
	c.waitFor(t, "c watches", func(s *elect.Snapshot) bool { return s.WatchUp && s.Holder == "a" })

	a.stop(t)
	acquired := b.waitFor(t, "b leads", leading)
	seen := c.waitFor(t, "c sees b", func(s *elect.Snapshot) bool { return s.Holder == "b" })
	lease, err := f.adminLeases().Get(t.Context(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if seen.Token != acquired.Token {
		t.Errorf("c reports token %d for b; want b's %d", seen.Token, acquired.Token)
	}
	if _, published := lease.Annotations[fence.Annotation]; published {
		t.Skipf("b published its token before this test read the Lease (%v after it led): cannot tell what c knew from what b published", time.Since(acquired.AcquiredAt))
	}
}

// Release steps down, writes the empty holder, and keeps the instance out
// for the asked time; it is idempotent; afterwards the instance campaigns
// again and re-acquires with a larger token.
func TestReleaseStaysOutThenReacquires(t *testing.T) {
	f := newFixture(t)
	a := f.start("a")
	first := a.waitFor(t, "a leads", leading)

	const stayOut = 1500 * time.Millisecond
	asked := time.Now()
	released, err := a.Release(t.Context(), stayOut)
	if err != nil || !released {
		t.Fatalf("Release = %v, %v; want true", released, err)
	}
	if s := a.Snapshot(); s.Leading {
		t.Fatal("still leading after Release returned")
	}
	if h := holder(f.lease()); h != "" {
		t.Fatalf("holder after release %q, want empty", h)
	}
	if again, err := a.Release(t.Context(), stayOut); err != nil || again {
		t.Fatalf("second Release = %v, %v; want false, nil", again, err)
	}
	s := a.waitFor(t, "a leads again", leading)
	if took := time.Since(asked); took < stayOut {
		t.Errorf("re-acquired %v after Release; asked to stay out %v", took, stayOut)
	}
	if s.Token <= first.Token {
		t.Errorf("token after re-acquire %d not above %d", s.Token, first.Token)
	}
}

// Tokens strictly increase across a graceful handover, a crash takeover,
// the same instance re-acquiring, and the Lease being deleted and created
// again; the term number follows leaseTransitions.
func TestTokensIncreaseAcrossEveryKindOfChange(t *testing.T) {
	f := newFixture(t)
	var tokens []fence.Token
	record := func(what string, s *elect.Snapshot) {
		if n := len(tokens); n > 0 && s.Token <= tokens[n-1] {
			t.Errorf("%s: token %d not above the previous %d", what, s.Token, tokens[n-1])
		}
		tokens = append(tokens, s.Token)
	}

	a := f.start("a")
	record("first term", a.waitFor(t, "a leads", leading))
	b := f.start("b", withoutRelease())
	a.stop(t) // graceful: releases
	record("handover", b.waitFor(t, "b leads", leading))

	c := f.start("c")
	b.stop(t) // a crash as far as the Lease can tell: no release
	record("crash takeover", c.waitFor(t, "c leads", leading))

	prev := c.Snapshot().Token
	if _, err := c.Release(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	record("same instance re-acquires", c.waitFor(t, "c leads again", func(s *elect.Snapshot) bool { return leading(s) && s.Token != prev }))

	prev = c.Snapshot().Token
	if err := f.adminLeases().Delete(t.Context(), leaseName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	record("delete and recreate", c.waitFor(t, "c leads the recreated Lease", func(s *elect.Snapshot) bool { return leading(s) && s.Token != prev }))
}

func (f *fixture) waitLease(cond func(*coordinationv1.Lease) bool) *coordinationv1.Lease {
	f.t.Helper()
	var l *coordinationv1.Lease
	poll.UntilReport(f.t, generous, 20*time.Millisecond, "the Lease in the expected state", func() bool {
		l = f.lease()
		return cond(l)
	}, func() string { return fmt.Sprintf("%+v", l) })
	return l
}

func mustToken(t *testing.T, rv string) fence.Token {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return fence.Token(n)
}
