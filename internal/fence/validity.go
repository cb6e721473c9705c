package fence

import "time"

// ValidUntil is the end of a leader's validity after a successful acquire or
// renew write that was sent at sent (read from the local monotonic clock
// before the request left): sent + renewDeadline.
//
// Guarantee: no other instance can acquire the Lease before this time, as
// long as the clock rates of any two instances differ by less than
// MaxClockDrift(leaseDuration, renewDeadline).
//
// Why: another instance may only take the Lease with a write whose
// resourceVersion precondition matches the record it judged expired, so it
// must have observed this very write, at some local time no earlier than
// sent, and then waited leaseDuration on its own clock. In real time that is
// at least leaseDuration·(1−ρ) after sent, while this leader stops claiming
// leadership at most renewDeadline·(1+ρ) after sent. The first is later
// whenever ρ < (leaseDuration − renewDeadline) / (leaseDuration + renewDeadline).
// A constant offset between clocks does no harm: no instance ever compares
// its clock with a time written by another.
func ValidUntil(sent time.Time, renewDeadline time.Duration) time.Time {
	return sent.Add(renewDeadline)
}

// MaxClockDrift is the largest relative clock-rate difference between two
// instances under which ValidUntil's guarantee holds:
// (leaseDuration − renewDeadline) / (leaseDuration + renewDeadline).
// With the defaults (15s, 10s) it is 0.2, far above real clock drift
// (typically below 10⁻⁴), but a process paused longer than the margin
// (leaseDuration − renewDeadline) between reading its clock and acting on an
// answer is not covered: that is what the token is for.
func MaxClockDrift(leaseDuration, renewDeadline time.Duration) float64 {
	return float64(leaseDuration-renewDeadline) / float64(leaseDuration+renewDeadline)
}
