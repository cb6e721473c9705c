package elect

import (
	"context"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/clockskew"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/fence"
)

// ClockWindow is how much of the holder's renewals the clock estimate
// covers (at most clockskew.MaxSamples of them).
const ClockWindow = 5 * time.Minute

// newClockEstimator is the estimator of the holder's clock that the driver
// owns: under the delay assumption that the least delayed renewal of each
// third of ClockWindow reached this instance within one retryPeriod of its
// holder reading its clock (a holder renews every retryPeriod), against the
// guarantee's bound on clock rates for these timings.
func newClockEstimator(cfg Config) *clockskew.Estimator {
	return clockskew.New(clockskew.Config{
		Identity:   cfg.Identity,
		DelayBound: cfg.RetryPeriod,
		Window:     max(ClockWindow, 10*cfg.RetryPeriod),
		Limit:      fence.MaxClockDrift(cfg.LeaseDuration, cfg.RenewDeadline),
	})
}

// observeClock feeds the record that in carries (a watch event, a read, a
// write's answer), arrived at now, to the clock estimator, keeps its
// estimate for the next Snapshot, and logs when the holder's clock rate is
// first known to be more than half the bound, then more than the bound,
// away from this instance's. Inputs without a record leave the estimate as
// it is; a record without a holder, or this instance's own, ends it.
func (d *driver) observeClock(in decide.Input, now time.Time) {
	var lease *coordinationv1.Lease
	switch in := in.(type) {
	case decide.Observed:
		if in.Lease == nil {
			d.holderClock = nil
			d.clocks.Observe("", time.Time{}, now)
			return
		}
		lease = in.Lease
	case decide.Result:
		lease = in.Lease
	}
	if lease == nil {
		return
	}
	var holder string
	if h := lease.Spec.HolderIdentity; h != nil {
		holder = *h
	}
	var renewTime time.Time
	if r := lease.Spec.RenewTime; r != nil {
		renewTime = r.Time
	}
	est, ok, line := d.clocks.Observe(holder, renewTime, now)
	d.holderClock = nil
	if ok {
		d.holderClock = &est
	}
	if line == nil {
		return
	}
	msg := "the holder's clock rate is more than half the bound away from this instance's"
	if line.Level == clockskew.LevelBeyond {
		msg = "the holder's clock rate is beyond the bound: two leaders at once are possible; check both nodes' clocks"
	}
	d.log.Log(context.Background(), slog.LevelWarn, msg, "holder", line.Holder, "observer", line.Observer,
		"rateLower", est.RateLower, "rateUpper", est.RateUpper, "bound", est.Limit,
		"offsetLower", est.OffsetLower, "offsetUpper", est.OffsetUpper, "span", est.Span)
}
