// Package clockskew estimates, from the renewals of a Lease's holder as one
// instance observes them, how the holder's clock compares with this
// instance's: its offset (holder minus local) and its rate (holder's over
// local). The Estimator is a pure value: it reads no clock and does no I/O;
// its owner (the election loop that observes the records) feeds it each
// record with its local arrival time and publishes what it returns.
//
// # What the figures mean, and how far to trust them
//
// A holder writes renewTime from its own wall clock, at microsecond
// precision, just before it sends the renewal; this instance sees the
// record arrive d ≥ 0 later (the holder's request, the apiserver, the watch
// delivery, this loop's queue). With θ the holder's offset, renewTime −
// arrival = θ − d, so:
//
//   - OffsetLower, the largest renewTime − arrival among the newest third of
//     the window's renewals, is a lower bound on θ that rests on causality
//     alone (a record is never seen before it is written).
//   - OffsetUpper = OffsetLower + DelayBound (+1µs for renewTime's
//     truncation) is an upper bound only under the delay assumption: the
//     least delayed of those renewals reached this instance within
//     DelayBound of the holder reading its clock.
//   - RateLower and RateUpper bound the holder's clock rate over this
//     instance's (1 is equal rates), from the least delayed renewal of the
//     window's oldest third and that of its newest third, ΔA apart on this
//     instance's monotonic clock: ΔrenewTime / (ΔA ± DelayBound), under the
//     same assumption for those two renewals. The interval narrows as the
//     window grows: its relative half-width is about DelayBound / ΔA.
//
// Flagged (Level) means the whole rate interval lies beyond a threshold:
// beyond half of Limit (LevelApproaching) or beyond Limit
// (LevelBeyond), the largest rate difference under which leasehold's
// validity guarantee holds (fence.MaxClockDrift). A holder with network
// jitter smaller than DelayBound is never flagged, whatever its offset.
//
// renewTime is the holder's wall clock, which NTP may slew (at most 500 ppm)
// or step; a step shows as a jump of the offset and, for one window, a rate
// far from 1. The guarantee itself rests on monotonic clocks, which no step
// moves: a rate flagged for less than one window after a step is the step.
package clockskew

import (
	"time"
)

// MaxSamples bounds the window: the estimator keeps at most this many
// renewals (the newest), and at most Config.Window of local time.
const MaxSamples = 256

// minSamples is the fewest renewals an estimate is made from: enough for
// each third of the window to hold one.
const minSamples = 3

// Config sets an Estimator's assumptions.
type Config struct {
	// Identity is this instance's holder identity: records it holds are
	// not estimated (its own clock), and logs name it.
	Identity string
	// DelayBound is the delay assumption (see the package doc): the least
	// delayed renewal of each third of the window reached this instance
	// within it. Must be positive.
	DelayBound time.Duration
	// Window is how much local time of renewals an estimate covers (at
	// most MaxSamples of them). Must exceed DelayBound.
	Window time.Duration
	// Limit is the rate difference beyond which the guarantee no longer
	// holds (fence.MaxClockDrift of the election's timings).
	Limit float64
}

// Level is how far the holder's clock rate is known to be from this
// instance's.
type Level int

// Levels, in increasing order of trouble.
const (
	// LevelNone: the rate interval reaches within half of Limit of 1.
	LevelNone Level = iota
	// LevelApproaching: the whole rate interval is more than Limit/2 from 1.
	LevelApproaching
	// LevelBeyond: the whole rate interval is more than Limit from 1.
	LevelBeyond
)

// String is the level's name in /v1/status: none, approaching, beyond.
func (l Level) String() string {
	switch l {
	case LevelApproaching:
		return "approaching"
	case LevelBeyond:
		return "beyond"
	}
	return "none"
}

// Estimate is what the renewals of one holder observed so far say about
// its clock. It is a value: keep and share it freely.
type Estimate struct {
	// Holder is the identity whose clock it describes.
	Holder string
	// Samples is how many renewals it rests on; Span is the local time
	// between the oldest and the newest.
	Samples int
	Span    time.Duration
	// At is the local arrival time of the newest renewal.
	At time.Time
	// OffsetLower and OffsetUpper bound the holder's clock minus this
	// instance's wall clock (see the package doc).
	OffsetLower, OffsetUpper time.Duration
	// RateKnown is false until two renewals more than DelayBound apart
	// (on this instance's clock) bound the rate; RateLower and RateUpper
	// bound the holder's clock rate over this instance's.
	RateKnown            bool
	RateLower, RateUpper float64
	// Level is how far the rate interval lies from 1 (see Level); Limit
	// and DelayBound are the assumptions it was judged under.
	Level      Level
	Limit      float64
	DelayBound time.Duration
}

// Log is a line the owner must log: the rate of Holder's clock, as seen by
// Observer, first reached Level.
type Log struct {
	Level    Level
	Holder   string
	Observer string
	Estimate Estimate
}

// sample is one renewal as observed here.
type sample struct {
	renewTime time.Time // the holder's clock, as written
	arrived   time.Time // this instance's clock, with its monotonic reading
}

// Estimator holds the window of the current holder's renewals. The zero
// value is not usable: use New.
type Estimator struct {
	cfg     Config
	holder  string
	samples []sample // oldest first, renewTime strictly increasing
	logged  Level    // the highest Level logged for holder
}

// New returns an Estimator under cfg's assumptions.
func New(cfg Config) *Estimator {
	return &Estimator{cfg: cfg}
}

// Observe takes a record of the Lease seen at local time arrived, held by
// holder with the given renewTime (zero when the record has none), and
// returns the estimate of holder's clock (ok false when there is none: no
// holder, this instance's own record, or too few renewals) and the line to
// log, if the rate has just reached a higher Level for this holder.
//
// A new holder starts a new window. A renewTime already seen, or older than
// the newest, adds nothing (the earliest arrival of a renewal is the least
// delayed); renewals older than Window before arrived leave the window.
func (e *Estimator) Observe(holder string, renewTime, arrived time.Time) (est Estimate, ok bool, log *Log) {
	if holder == "" || holder == e.cfg.Identity {
		e.reset("")
		return Estimate{}, false, nil
	}
	if holder != e.holder {
		e.reset(holder)
	}
	if !renewTime.IsZero() && (len(e.samples) == 0 || renewTime.After(e.samples[len(e.samples)-1].renewTime)) {
		e.samples = append(e.samples, sample{renewTime: renewTime, arrived: arrived})
	}
	cut := 0
	for cut < len(e.samples) && (len(e.samples)-cut > MaxSamples || arrived.Sub(e.samples[cut].arrived) > e.cfg.Window) {
		cut++
	}
	e.samples = append(e.samples[:0], e.samples[cut:]...)
	if len(e.samples) < minSamples {
		return Estimate{}, false, nil
	}
	est = e.estimate()
	if est.Level > e.logged {
		e.logged = est.Level
		log = &Log{Level: est.Level, Holder: holder, Observer: e.cfg.Identity, Estimate: est}
	}
	return est, true, log
}

// reset starts a new window for holder ("" for none).
func (e *Estimator) reset(holder string) {
	e.holder, e.samples, e.logged = holder, e.samples[:0], LevelNone
}

// estimate computes the Estimate of the current window (at least
// minSamples renewals).
func (e *Estimator) estimate() Estimate {
	n := len(e.samples)
	third := max(n/3, 1)
	oldest, newest := leastDelayed(e.samples[:third]), leastDelayed(e.samples[n-third:])
	d := e.cfg.DelayBound
	est := Estimate{
		Holder:      e.holder,
		Samples:     n,
		Span:        e.samples[n-1].arrived.Sub(e.samples[0].arrived),
		At:          e.samples[n-1].arrived,
		OffsetLower: newest.renewTime.Sub(newest.arrived),
		Limit:       e.cfg.Limit,
		DelayBound:  d,
	}
	est.OffsetUpper = est.OffsetLower + d + time.Microsecond
	local := newest.arrived.Sub(oldest.arrived)
	if local <= d {
		return est
	}
	// renewTime is truncated to microseconds: the holder's elapsed time
	// lies within a microsecond of the difference written.
	held := newest.renewTime.Sub(oldest.renewTime)
	est.RateKnown = true
	est.RateLower = float64(held-time.Microsecond) / float64(local+d)
	est.RateUpper = float64(held+time.Microsecond) / float64(local-d)
	switch beyond := func(x float64) bool { return est.RateLower > 1+x || est.RateUpper < 1-x }; {
	case beyond(e.cfg.Limit):
		est.Level = LevelBeyond
	case beyond(e.cfg.Limit / 2):
		est.Level = LevelApproaching
	}
	return est
}

// leastDelayed is the renewal of s with the largest renewTime − arrival:
// the one that says most about the offset.
func leastDelayed(s []sample) sample {
	best := s[0]
	for _, x := range s[1:] {
		if x.renewTime.Sub(x.arrived) > best.renewTime.Sub(best.arrived) {
			best = x
		}
	}
	return best
}
