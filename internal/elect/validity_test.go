package elect_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// A narrow unit test on a fake clock (a fake clientset cannot prove the
// apiserver's rules, which the integration tests do; it can prove timing).
// When renewals fail, leadership is claimed up to, and not past, the send
// time of the last successful write plus renewDeadline, however the loop
// is scheduled; then the loop ends the term, which moves the index.
func TestValidityEndsExactlyAtRenewDeadlineAfterLastSuccessfulWrite(t *testing.T) {
	fakeClock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	var failUpdates atomic.Bool
	e := fakeElection(t, fakeClock, func() error {
		if failUpdates.Load() {
			return errors.New("connection reset")
		}
		return nil
	})

	start := fakeClock.Now()
	waitSnapshot(t, e, func(s *elect.Snapshot) bool { return s.Leading && s.Token != 0 })
	waitIdle(t, fakeClock)
	acquired := e.Snapshot()
	if want := start.Add(10 * time.Second); !acquired.ValidUntil.Equal(want) {
		t.Fatalf("ValidUntil %v, want send time + renewDeadline = %v", acquired.ValidUntil, want)
	}

	failUpdates.Store(true)
	for fakeClock.Now().Before(start.Add(8 * time.Second)) { // renewals at +2s, +4s, +6s, +8s all fail
		fakeClock.Step(2 * time.Second)
		waitIdle(t, fakeClock)
	}
	s := e.Snapshot()
	if !s.IsLeader(start.Add(10*time.Second-time.Nanosecond)) || s.IsLeader(start.Add(10*time.Second)) {
		t.Fatalf("IsLeader must hold until, and not at, %v (ValidUntil %v)", start.Add(10*time.Second), s.ValidUntil)
	}
	fakeClock.Step(2 * time.Second) // now past ValidUntil: the loop ends the term
	ended := waitSnapshot(t, e, func(s *elect.Snapshot) bool { return !s.Leading })
	if ended.Index <= acquired.Index {
		t.Errorf("index %d did not move when the term ended (was %d)", ended.Index, acquired.Index)
	}
}

// waitSnapshot waits in real time, on Changed, for a condition the loop
// reaches without the fake clock moving.
func waitSnapshot(t *testing.T, e *elect.Elector, cond func(*elect.Snapshot) bool) *elect.Snapshot {
	t.Helper()
	deadline := time.After(generous)
	for {
		s := e.Snapshot()
		if cond(s) {
			return s
		}
		select {
		case <-s.Changed():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out; snapshot %+v", *s)
		}
	}
}

// waitIdle waits until the loop is blocked on its timer again.
func waitIdle(t *testing.T, c *clocktesting.FakeClock) {
	t.Helper()
	poll.Until(t, generous, time.Millisecond, "the loop waiting on the clock", c.HasWaiters)
}

// A renewal whose response arrives after validity ran out does not revive
// the term readers were already told had ended: the instance starts a new
// term, with a new token, instead.
func TestLateRenewalStartsANewTermInsteadOfReviving(t *testing.T) {
	fakeClock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	var slowOnce atomic.Bool
	e := fakeElection(t, fakeClock, func() error {
		if slowOnce.CompareAndSwap(true, false) {
			fakeClock.Step(11 * time.Second) // the write takes longer than renewDeadline
		}
		return nil
	})

	first := waitSnapshot(t, e, func(s *elect.Snapshot) bool { return s.Leading && s.Token != 0 })
	waitIdle(t, fakeClock)
	slowOnce.Store(true)
	fakeClock.Step(2 * time.Second) // the slow renewal
	second := waitSnapshot(t, e, func(s *elect.Snapshot) bool { return s.Leading && s.Token != first.Token })
	if second.Token <= first.Token || second.Index <= first.Index {
		t.Errorf("after a late renewal: token %d (was %d), index %d (was %d); want a new, larger term", second.Token, first.Token, second.Index, first.Index)
	}
}

// A withdrawn elector never starts a term, however long it runs (here a
// fake hour, with the Lease free all along); put back, it acquires without
// the clock moving; withdrawn while leading, it ends the term before
// SetCandidate returns and stays out again.
func TestWithdrawnElectorNeverAcquiresOnAFakeClock(t *testing.T) {
	fakeClock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	e := fakeElection(t, fakeClock, nil, func(c *elect.Config) { c.StartWithdrawn = true })
	waitSnapshot(t, e, func(s *elect.Snapshot) bool { return s.Observed })
	idleHour := func(what string) {
		t.Helper()
		for range 240 { // an hour in 15s steps: many lease durations and retry periods
			waitIdle(t, fakeClock)
			fakeClock.Step(15 * time.Second)
			if s := e.Snapshot(); s.Leading || s.Candidate {
				t.Fatalf("%s: leading=%v candidate=%v at %v", what, s.Leading, s.Candidate, fakeClock.Now())
			}
		}
	}
	idleHour("started withdrawn")

	if _, err := e.SetCandidate(t.Context(), true, "app healthy"); err != nil {
		t.Fatal(err)
	}
	first := waitSnapshot(t, e, func(s *elect.Snapshot) bool { return s.Leading && s.Candidate && s.Token != 0 })

	released, err := e.SetCandidate(t.Context(), false, "app unhealthy")
	if err != nil || !released {
		t.Fatalf("SetCandidate(false) while leading = %v, %v; want a release", released, err)
	}
	if s := e.Snapshot(); s.Leading || s.Candidate || s.Index <= first.Index {
		t.Fatalf("after SetCandidate(false): leading=%v candidate=%v index %d (was %d)", s.Leading, s.Candidate, s.Index, first.Index)
	}
	idleHour("withdrawn after leading")
}

// fakeElection runs an Elector on a fake clientset and a fake clock. The
// fake clientset does not version objects, so a reactor stamps increasing
// resourceVersions on creates and updates; beforeUpdate, if set, may fail
// an update (return handled=true and an error) or act on the clock first.
// configure, if given, changes the Config before the Elector is made.
func fakeElection(t *testing.T, fakeClock *clocktesting.FakeClock, beforeUpdate func() error, configure ...func(*elect.Config)) *elect.Elector {
	t.Helper()
	// The Lease starts released by its last holder, so the elector takes it
	// at once (a missing one it would only take a lease duration later).
	empty := ""
	cs := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "l", ResourceVersion: "900",
			Annotations: map[string]string{elect.ReleasedByAnnotation: "previous"},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &empty},
	})
	// The fake's lists carry small resourceVersions of their own (an empty
	// list says "1"); etcd's revisions of later writes are always larger
	// than any earlier list's, so the stamps start above them.
	var rv atomic.Int64
	rv.Store(1000)
	stamp := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "update" && beforeUpdate != nil {
			if err := beforeUpdate(); err != nil {
				return true, nil, err
			}
		}
		obj := a.(interface{ GetObject() runtime.Object }).GetObject().(*coordinationv1.Lease)
		obj.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		return false, nil, nil // stamped; the tracker stores it
	}
	cs.PrependReactor("update", "leases", stamp)
	cs.PrependReactor("create", "leases", stamp)
	cfg := elect.Config{
		Config: decide.Config{
			Namespace: "ns", Name: "l", Identity: "a",
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		},
		Leases: cs.CoordinationV1().Leases("ns"), Clock: fakeClock,
	}
	for _, c := range configure {
		c(&cfg)
	}
	return runUntilCleanup(t, cfg)
}

// runUntilCleanup makes an Elector of cfg and runs it until the test ends.
func runUntilCleanup(t *testing.T, cfg elect.Config) *elect.Elector {
	t.Helper()
	e, err := elect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}
