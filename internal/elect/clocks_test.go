package elect_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/clockskew"
	"github.com/leasehold/leasehold/internal/elect"
)

// Timings of the clock tests: the estimate's delay bound is the retry
// period, so a short one bounds the rate within a few seconds.
const (
	clockLease = 3 * time.Second
	clockRenew = 2 * time.Second
	clockRetry = 250 * time.Millisecond
)

// fakeHolder is a holder the test writes: it holds the Lease as "skewed"
// and renews it every clockRetry with renewTime = clock(now), each
// renewal sent after delay() (the network's jitter), until the test ends.
func (f *fixture) fakeHolder(clock func(time.Time) time.Time, delay func() time.Duration) {
	f.t.Helper()
	now := time.Now()
	lease, err := f.adminLeases().Create(f.t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("skewed"), LeaseDurationSeconds: ptr.To(int32(clockLease / time.Second)),
			AcquireTime: &metav1.MicroTime{Time: clock(now)}, RenewTime: &metav1.MicroTime{Time: clock(now)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var renewing sync.WaitGroup
	f.t.Cleanup(func() { cancel(); renewing.Wait() })
	renewing.Go(func() {
		ticker := time.NewTicker(clockRetry)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			lease.Spec.RenewTime = &metav1.MicroTime{Time: clock(time.Now())}
			time.Sleep(delay())
			updated, err := f.adminLeases().Update(ctx, lease, metav1.UpdateOptions{})
			if err != nil {
				if ctx.Err() == nil {
					f.t.Errorf("renew as skewed: %v", err)
				}
				return
			}
			lease = updated
		}
	})
}

// observe starts a candidate that never gets the Lease (the fake holder
// renews it) and returns the first estimate of the holder's clock that
// done accepts, and the highest Level any estimate had until then.
func (f *fixture) observe(what string, done func(*clockskew.Estimate) bool) (*clockskew.Estimate, clockskew.Level) {
	f.t.Helper()
	c := f.start("observer", withTimings(clockLease, clockRenew, clockRetry))
	highest := clockskew.LevelNone
	s := c.waitFor(f.t, what, func(s *elect.Snapshot) bool {
		if s.Leading {
			f.t.Fatal("the observer took the fake holder's Lease")
		}
		if s.HolderClock == nil {
			return false
		}
		highest = max(highest, s.HolderClock.Level)
		return done(s.HolderClock)
	})
	if s.HolderClock.Holder != "skewed" {
		f.t.Errorf("estimate of %q, want skewed", s.HolderClock.Holder)
	}
	f.t.Logf("%d renewals over %v: offset in [%v, %v], rate in [%.4f, %.4f], level %v",
		s.HolderClock.Samples, s.HolderClock.Span, s.HolderClock.OffsetLower, s.HolderClock.OffsetUpper,
		s.HolderClock.RateLower, s.HolderClock.RateUpper, s.HolderClock.Level)
	return s.HolderClock, highest
}

// A holder whose clock runs a constant 3s ahead is reported within its
// bound, and not flagged.
func TestHolderClockAheadByAConstantOffset(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const offset = 3 * time.Second
	f.fakeHolder(func(now time.Time) time.Time { return now.Add(offset) }, func() time.Duration { return 0 })
	est, highest := f.observe("the rate is bounded over 5s", func(e *clockskew.Estimate) bool {
		return e.RateKnown && e.Span >= 5*time.Second
	})
	if offset < est.OffsetLower || offset > est.OffsetUpper {
		t.Errorf("offset %v not within [%v, %v]", offset, est.OffsetLower, est.OffsetUpper)
	}
	if est.RateLower > 1 || est.RateUpper < 1 {
		t.Errorf("rate 1 not within [%v, %v]", est.RateLower, est.RateUpper)
	}
	if highest != clockskew.LevelNone {
		t.Errorf("flagged %v", highest)
	}
}

// A holder whose clock runs 30 % fast is flagged: beyond the bound (0.2
// with these timings, as with the defaults).
func TestHolderClockThirtyPercentFastIsFlagged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	start := time.Now()
	f.fakeHolder(func(now time.Time) time.Time {
		return start.Add(time.Duration(1.3 * float64(now.Sub(start))))
	}, func() time.Duration { return 0 })
	est, _ := f.observe("the holder's clock rate is flagged beyond the bound", func(e *clockskew.Estimate) bool {
		return e.Level == clockskew.LevelBeyond
	})
	if est.RateLower > 1.3 || est.RateUpper < 1.3 || est.Limit != 0.2 {
		t.Errorf("rate 1.3 not within [%v, %v], or limit %v", est.RateLower, est.RateUpper, est.Limit)
	}
}

// An honest holder whose renewals are delayed by up to 200ms each (less
// than the delay bound) is never flagged, and its offset (none) is within
// its bound.
func TestHonestHolderWithJitterIsNotFlagged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(7, 7)) // used by the renewing goroutine alone
	f.fakeHolder(func(now time.Time) time.Time { return now }, func() time.Duration {
		return time.Duration(rng.Int64N(int64(200 * time.Millisecond)))
	})
	est, highest := f.observe("the rate is bounded over 8s", func(e *clockskew.Estimate) bool {
		return e.RateKnown && e.Span >= 8*time.Second
	})
	if highest != clockskew.LevelNone {
		t.Errorf("flagged %v", highest)
	}
	if est.OffsetLower > 0 || est.OffsetUpper < 0 {
		t.Errorf("offset 0 not within [%v, %v]", est.OffsetLower, est.OffsetUpper)
	}
	if est.RateLower > 1 || est.RateUpper < 1 {
		t.Errorf("rate 1 not within [%v, %v]", est.RateLower, est.RateUpper)
	}
}
