package elect_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// The tests in this file reproduce the holes of the safety audit (issue 11)
// through the Elector's public API; each fails on the election loop that
// preceded the decision core.

// handEdits are the edits that leave a Lease without a holder.
var handEdits = map[string]func(f *fixture){
	"deleted": func(f *fixture) {
		if err := f.adminLeases().Delete(f.t.Context(), leaseName, metav1.DeleteOptions{}); err != nil {
			f.t.Fatal(err)
		}
	},
	"emptied by hand": func(f *fixture) {
		f.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("") })
	},
}

// Audit defect 1: a Lease deleted or emptied by hand while its holder is
// cut off (and so rightly claims leadership until its validity ends) is not
// taken early by a candidate that starts after the edit (it has observed
// nothing), nor by one whose claim went stale while its own requests failed
// for longer than a lease duration.
func TestHandEditedLeaseIsNotTakenEarlyByAFreshOrStaleCandidate(t *testing.T) {
	for edit, change := range handEdits {
		t.Run(edit+", fresh candidate", func(t *testing.T) {
			f := newFixture(t)
			a, proxyA := f.startBehindProxy("a")
			a.waitFor(t, "a leads", leading)
			proxyA.Cut()
			change(f)
			b := f.start("b")
			sampler := watchForOverlap(t, a, b)
			bLeads := b.waitFor(t, "b leads", leading)
			if aValid := sampler.lastValid(); !bLeads.AcquiredAt.After(aValid) {
				t.Errorf("b acquired at %v, before a's last ValidUntil %v", bLeads.AcquiredAt, aValid)
			}
			sampler.stop()
		})
		t.Run(edit+", stale candidate", func(t *testing.T) {
			f := newFixture(t)
			a, proxyA := f.startBehindProxy("a")
			a.waitFor(t, "a leads", leading)
			b, proxyB := f.startBehindProxy("b")
			b.waitFor(t, "b follows a", func(s *elect.Snapshot) bool { return s.Holder == "a" })
			sampler := watchForOverlap(t, a, b)
			proxyB.Cut()
			cut := time.Now()
			a.waitFor(t, "a renews for over a lease duration while b is cut off", func(s *elect.Snapshot) bool {
				return s.RenewedAt.After(cut.Add(leaseDuration + retryPeriod))
			})
			proxyA.Cut()
			change(f)
			proxyB.Heal()
			bLeads := b.waitFor(t, "b leads", leading)
			if aValid := sampler.lastValid(); !bLeads.AcquiredAt.After(aValid) {
				t.Errorf("b acquired at %v, before a's last ValidUntil %v", bLeads.AcquiredAt, aValid)
			}
			sampler.stop()
		})
	}
}

// Audit defect 1, the holder's own stale claim: a is cut off, b takes over
// unseen by a, b is cut off in turn, the Lease is deleted, a heals. a's last
// knowledge is its own record, but its term ended long ago: it must not
// re-create the Lease while b still validly leads.
//
// Longer timings than the other tests: b's validity (6s) must outlast a's
// recovery from its partition (a request timeout and a retry period).
func TestOwnStaleClaimDoesNotFreeADeletedLease(t *testing.T) {
	f := newFixture(t)
	timings := withTimings(10*time.Second, 6*time.Second, time.Second)
	a, proxyA := f.startBehindProxy("a", timings)
	a.waitFor(t, "a leads", leading)
	b, proxyB := f.startBehindProxy("b", timings)
	b.waitFor(t, "b follows a", func(s *elect.Snapshot) bool { return s.Holder == "a" })
	sampler := watchForOverlap(t, b, a)
	proxyA.Cut()
	b.waitFor(t, "b takes over", leading)
	proxyB.Cut()
	handEdits["deleted"](f)
	proxyA.Heal()
	aLeads := a.waitFor(t, "a leads again", func(s *elect.Snapshot) bool { return leading(s) })
	if bValid := sampler.lastValid(); !aLeads.AcquiredAt.After(bValid) {
		t.Errorf("a acquired at %v, before b's last ValidUntil %v", aLeads.AcquiredAt, bValid)
	}
	sampler.stop()
}

// Audit defect 2: a held Lease whose leaseDurationSeconds is shortened by
// hand while its holder is cut off is not taken before the holder's
// validity ends: expiry uses the larger of the record's duration and the
// instance's own, and a claim never moves earlier. A watching candidate and
// a fresh one started after the edit both wait.
func TestShortenedLeaseDurationIsNotTakenEarly(t *testing.T) {
	f := newFixture(t)
	a, proxyA := f.startBehindProxy("a")
	a.waitFor(t, "a leads", leading)
	b := f.start("b")
	b.waitFor(t, "b follows a", func(s *elect.Snapshot) bool { return s.WatchUp && s.Holder == "a" })
	proxyA.Cut()
	f.edit(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](1) })
	c := f.start("c")
	ab, ac := watchForOverlap(t, a, b), watchForOverlap(t, a, c)
	var next *elect.Snapshot
	poll.Until(t, generous, 5*time.Millisecond, "b or c leading", func() bool { // the overlap samplers judge
		for _, x := range []*candidate{b, c} {
			if s := x.Snapshot(); leading(s) {
				next = s
			}
		}
		return next != nil
	})
	if aValid := ab.lastValid(); !next.AcquiredAt.After(aValid) {
		t.Errorf("%s acquired at %v, before a's last ValidUntil %v", next.Identity, next.AcquiredAt, aValid)
	}
	ab.stop()
	ac.stop()
}

// Audit defect 3: a Create answered NotFound (the namespace does not exist)
// is an error: the elector backs off instead of retrying at once, and
// reports the error, naming the namespace. The backoff is retryPeriod,
// doubling up to min(leaseDuration, 4 × retryPeriod): each refused Create
// comes at least that long after the one before (a load that delays the
// elector only lengthens the gaps). A Create without an answer (a timeout)
// may restart the backoff (a read that works then resets it), so the gaps
// are judged on refusals in a row.
func TestMissingNamespaceBacksOffAndSaysWhy(t *testing.T) {
	f := newFixture(t)
	refused := &answers{method: http.MethodPost, code: http.StatusNotFound}
	a := f.start("a", func(c *elect.Config, rc **rest.Config) {
		c.Namespace = "no-such-namespace-" + f.namespace
		(*rc).Wrap(refused.wrap)
	})
	backoff := []time.Duration{retryPeriod, 2 * retryPeriod, 4 * retryPeriod, 4 * retryPeriod}
	at := refused.awaitRun(t, len(backoff)+1)
	for i, want := range backoff {
		if gap := at[i+1].Sub(at[i]); gap < want {
			t.Errorf("refused Create %d came %v after the one before; want a backoff of at least %v (gaps: %v)", i+2, gap, want, gaps(at))
		}
	}
	t.Logf("refused Creates %v apart", gaps(at))
	if s := a.Snapshot(); !strings.Contains(s.LastError, `namespace "no-such-namespace-`) {
		t.Errorf("lastError %q does not name the namespace", s.LastError)
	}
}

// Audit defect 7: an acquire whose write lands but whose answer is lost
// leaves a record naming this instance, which is its own write (identities
// are unique per process): it is taken back with a fresh conditional write
// after one retry period, not after waiting out a lease duration as a
// stranger's would be.
func TestLostAcquireAnswerIsTakenBackWithinARetryPeriod(t *testing.T) {
	v := newVersionedLeases(releasedLease())
	v.loseNextUpdates(1)
	e := runOnFake(t, v)
	took := waitElector(t, e, "a leads", func(s *elect.Snapshot) bool { return s.Leading })
	if took >= leaseDuration {
		t.Errorf("led %v after the lost answer; want about one retry period (%v), not a lease duration (%v)", took, retryPeriod, leaseDuration)
	}
	if got := v.count("update"); got < 2 {
		t.Errorf("%d updates; want the lost acquire and the one that took it back", got)
	}
}

// Audit defect 8: etcd restored without --bump-revision. A leader whose
// renewal conflicts and whose read then shows another holder at a smaller
// resourceVersion steps down at once (it used to ignore the read as stale,
// and renew and read in a tight loop until its validity ran out); and the
// refused terms that follow back off instead of retrying every period.
func TestResourceVersionRollbackStepsDownAndBacksOff(t *testing.T) {
	v := newVersionedLeases(releasedLease())
	e := runOnFake(t, v)
	waitElector(t, e, "a leads", func(s *elect.Snapshot) bool { return s.Leading })

	restored := releasedLease()
	restored.Spec.HolderIdentity = ptr.To("b")
	restored.Spec.LeaseDurationSeconds = ptr.To[int32](int32(leaseDuration / time.Second))
	delete(restored.Annotations, elect.ReleasedByAnnotation)
	updates, reads := v.count("update"), v.count("get")
	v.rollBack(500, restored)
	waitElector(t, e, "a steps down on the rolled-back read", func(s *elect.Snapshot) bool { return !s.Leading && s.Holder == "b" })
	// By then: the renewal that conflicted and the read that showed b. (A
	// follower sends no update until b's record has expired; its polls are
	// reads, so only updates are counted exactly.)
	if got := v.count("update") - updates; got != 1 {
		t.Fatalf("%d updates before stepping down; want the one renewal that conflicted, then a read", got)
	}
	if v.count("get") == reads {
		t.Fatal("stepped down without reading the Lease after the conflict")
	}

	// b's record is waited out (a lease duration), then every term a
	// acquires has a token below what it saw: refused, released, and the
	// next acquire sent only after a backoff of 0.5s, 1s, 2s, 2s… (a load
	// that delays the elector only lengthens the gaps).
	backoff := []time.Duration{retryPeriod, 2 * retryPeriod, 4 * retryPeriod, 4 * retryPeriod}
	at := v.awaitAcquires(t, len(backoff)+1)
	if s := e.Snapshot(); s.Leading {
		t.Fatalf("leads with token %d after the rollback", s.Token)
	}
	for i, want := range backoff {
		if gap := at[i+1].Sub(at[i]); gap < want {
			t.Errorf("acquire %d sent %v after the refused one before; want a backoff of at least %v, not one every %v (gaps: %v)", i+2, gap, want, retryPeriod, gaps(at))
		}
	}
	t.Logf("refused terms' acquires %v apart", gaps(at))
	if s := e.Snapshot(); !strings.Contains(s.LastError, "not above") {
		t.Errorf("lastError %q does not say why", s.LastError)
	}
}

// answers records the outcome of every request of one HTTP method, and when
// it arrived, on this process's monotonic clock: whether it was answered
// with code. wrap fits rest.Config.Wrap.
type answers struct {
	method string
	code   int

	mu       sync.Mutex
	outcomes []outcome
}

type outcome struct {
	at    time.Time
	match bool // answered with the code (not another, not a timeout)
}

func (r *answers) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if req.Method == r.method {
			r.mu.Lock()
			r.outcomes = append(r.outcomes, outcome{at: time.Now(), match: err == nil && resp.StatusCode == r.code})
			r.mu.Unlock()
		}
		return resp, err
	})
}

// awaitRun polls until n answers with the code have arrived in a row (no
// other outcome of the method between them), for at most generous, and
// returns their arrival times.
func (r *answers) awaitRun(t *testing.T, n int) []time.Time {
	t.Helper()
	return awaitTimes(t, fmt.Sprintf("%d answers %d to %s in a row", n, r.code, r.method), n, func() []time.Time {
		r.mu.Lock()
		defer r.mu.Unlock()
		var run []time.Time
		for _, o := range r.outcomes {
			if !o.match {
				run = nil
				continue
			}
			if run = append(run, o.at); len(run) == n {
				break
			}
		}
		return run
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// awaitTimes polls times until it returns at least n, for at most
// generous (plus n backoffs of the longest kind), and returns the first n.
func awaitTimes(t *testing.T, what string, n int, times func() []time.Time) []time.Time {
	t.Helper()
	var at []time.Time
	poll.UntilReport(t, generous+time.Duration(n)*leaseDuration, 20*time.Millisecond, what, func() bool {
		at = times()
		return len(at) >= n
	}, func() string { return fmt.Sprintf("got %v", len(at)) })
	return at[:n]
}

// gaps are the durations between consecutive times, rounded for logs.
func gaps(at []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(at); i++ {
		out = append(out, at[i].Sub(at[i-1]).Round(time.Millisecond))
	}
	return out
}

// startBehindProxy starts identity with its apiserver traffic through a
// proxy the test can cut.
func (f *fixture) startBehindProxy(identity string, opts ...option) (*candidate, *kubetest.Proxy) {
	f.t.Helper()
	proxy, err := cluster.NewProxy()
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { proxy.Close() })
	user, err := cluster.Admin().Through(proxy)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.start(identity, append(opts, withUser(user))...), proxy
}
