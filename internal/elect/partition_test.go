package elect_test

import (
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// A partitioned leader stops claiming leadership at its ValidUntil, before
// anyone else can take over; after the partition heals it learns of its
// successor, and when it is then stopped it does not erase the successor's
// Lease (client-go's tryRelease decides on the stale cached record and
// would).
func TestPartitionedLeaderYieldsInTimeAndNeverErasesItsSuccessor(t *testing.T) {
	f := newFixture(t)
	a, b, proxy := f.leaderBehindProxyAndFollower()

	sampler := watchForOverlap(t, a, b)
	proxy.Cut()
	a.waitFor(t, "a stops claiming leadership", func(s *elect.Snapshot) bool { return !s.IsLeader(time.Now()) })
	bLeads := b.waitFor(t, "b takes over", leading)
	if aValid := sampler.lastValid(); !bLeads.AcquiredAt.After(aValid) {
		t.Errorf("b acquired at %v, not after a's last ValidUntil %v", bLeads.AcquiredAt, aValid)
	}

	// Heal and stop at once, while a's cached record may still name a: the
	// release must read the Lease afresh, see b, and write nothing.
	proxy.Heal()
	a.stop(t)
	if h := holder(f.lease()); h != "b" {
		t.Fatalf("after the old leader stopped, holder is %q; want the successor b", h)
	}
	if s := b.Snapshot(); !s.IsLeader(time.Now()) {
		t.Fatalf("b lost leadership after a stopped: %+v", *s)
	}
	sampler.stop()
}

// overlapSampler samples two candidates every 2ms and fails the test if
// both ever claim leadership at the same instant.
type overlapSampler struct {
	done chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	aValid time.Time // the latest ValidUntil a reported while leading
}

func watchForOverlap(t *testing.T, a, b *candidate) *overlapSampler {
	o := &overlapSampler{done: make(chan struct{})}
	o.wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-o.done:
				return
			case <-tick.C:
			}
			now := time.Now()
			as := a.Snapshot()
			if as.IsLeader(now) {
				o.mu.Lock()
				o.aValid = as.ValidUntil
				o.mu.Unlock()
			}
			if as.IsLeader(now) && b.Snapshot().IsLeader(now) {
				t.Errorf("both a and b claim leadership at %v", now)
				return
			}
		}
	})
	return o
}

func (o *overlapSampler) lastValid() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.aValid
}

func (o *overlapSampler) stop() { close(o.done); o.wg.Wait() }

// The tryRelease trap, made deterministic: the leader's cached record still
// names it (no watch, next renewal seconds away) while another holder has
// taken the Lease. Stopping it must not erase that holder: the release reads
// the Lease afresh first.
func TestReleaseOnStopNeverErasesAnotherHolder(t *testing.T) {
	f := newFixture(t)
	user := f.noWatchUser()
	a := f.start("a", withUser(user), withTimings(5*time.Second, 2500*time.Millisecond, 2*time.Second))
	first := a.waitFor(t, "a leads", leading)
	a.waitFor(t, "a renews", func(s *elect.Snapshot) bool { return s.RenewedAt.After(first.RenewedAt) })

	f.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("successor") })
	if s := a.Snapshot(); s.Holder != "a" {
		t.Fatalf("precondition: a's cached record should still name a, got %q", s.Holder)
	}
	a.stop(t)
	if h := holder(f.lease()); h != "successor" {
		t.Fatalf("holder after a stopped: %q; want the successor untouched", h)
	}
}

// A Lease deleted (or emptied by hand) while its holder is cut off must not
// be taken before the holder's validity ends: the holder cannot know, and
// rightly claims leadership until then. Only a Lease its holder released
// itself, or one whose holder sees the change, is free at once.
func TestLeaseDeletedOrEmptiedWhileHolderIsCutOffIsNotTakenEarly(t *testing.T) {
	for name, change := range map[string]func(f *fixture){
		"deleted": func(f *fixture) {
			if err := f.adminLeases().Delete(f.t.Context(), leaseName, metav1.DeleteOptions{}); err != nil {
				f.t.Fatal(err)
			}
		},
		"emptied by hand": func(f *fixture) {
			f.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("") })
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			a, b, proxy := f.leaderBehindProxyAndFollower()

			sampler := watchForOverlap(t, a, b)
			proxy.Cut()
			change(f)
			bLeads := b.waitFor(t, "b takes over", leading)
			if aValid := sampler.lastValid(); !bLeads.AcquiredAt.After(aValid) {
				t.Errorf("b acquired at %v, before a's last ValidUntil %v", bLeads.AcquiredAt, aValid)
			}
			sampler.stop()
			proxy.Heal()
		})
	}
}

// The holder that sees its Lease deleted steps down at once and, its own
// claim being the only one, may create it again at once: no waiting.
//
// Renewals are a retry period (3s) apart and the deletion lands right after
// one: a re-creation with no renewal that found the Lease gone (a failed
// update) since the deletion came from the watch event (a read may come before it: b,
// watching too, may create the empty placeholder first, and a reads what
// its own create then collided with); and one before b's FreeAt (when a's
// last claim ends, as b judges it) did not wait that claim out as anyone
// else must.
func TestHolderThatSeesItsLeaseDeletedRecreatesAtOnce(t *testing.T) {
	f := newFixture(t)
	timings := withTimings(8*time.Second, 4*time.Second, 3*time.Second)
	a := f.start("a", timings)
	first := a.waitFor(t, "a leads", leading)
	b := f.start("b", timings)
	b.waitFor(t, "b follows a", func(s *elect.Snapshot) bool { return s.WatchUp && s.Holder == "a" })
	renewed := a.waitFor(t, "a renews", func(s *elect.Snapshot) bool { return s.RenewedAt.After(first.RenewedAt) })
	b.waitFor(t, "b sees the renewal", func(s *elect.Snapshot) bool { return !s.RenewedAt.Before(renewed.RenewedAt) })
	sampler := watchForOverlap(t, a, b)
	failed := func() float64 { return a.requests.Count("update", "") - a.requests.Count("update", "200") }
	missed, expires := failed(), b.Snapshot().FreeAt
	deleted := time.Now()
	if err := f.adminLeases().Delete(t.Context(), leaseName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := a.waitFor(t, "a leads a new term", func(s *elect.Snapshot) bool { return leading(s) && s.Token != first.Token })
	if !time.Now().Before(expires) {
		t.Errorf("a re-created its Lease only once its last claim had expired (%v after the deletion); want at once", time.Since(deleted))
	}
	t.Logf("a re-created its Lease %v after the deletion", time.Since(deleted))
	if got := failed() - missed; got != 0 {
		t.Errorf("a's renewal found the Lease gone (%v updates failed) before a re-created it; want it re-created on the watch event", got)
	}
	if again.Token <= first.Token {
		t.Errorf("token %d not above %d", again.Token, first.Token)
	}
	sampler.stop()
}

// leaderBehindProxyAndFollower starts a, whose traffic crosses a proxy the
// test can cut, waits until it leads, then starts b and waits until b
// watches a's Lease.
func (f *fixture) leaderBehindProxyAndFollower() (a, b *candidate, proxy *kubetest.Proxy) {
	f.t.Helper()
	a, proxy = f.startBehindProxy("a")
	a.waitFor(f.t, "a leads", leading)
	b = f.start("b")
	b.waitFor(f.t, "b follows a", func(s *elect.Snapshot) bool { return s.WatchUp && s.Holder == "a" })
	return a, b, proxy
}
