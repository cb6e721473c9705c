package clockskew

import "time"

// ServerDrift is the largest rate at which the two wall clocks are assumed
// to drift apart: both slewed by NTP in opposite directions, at its 500 ppm
// limit each. An older sample's interval is widened by it, times its age.
const ServerDrift = 1000e-6

// ServerSample is one response of the apiserver as this instance saw it:
// Sent and Received read this instance's wall clock just before the
// request went out and when the response's headers arrived; Date is the
// response's Date header (the apiserver's wall clock, whole seconds,
// truncated: RFC 9110 section 6.6.1).
type ServerSample struct {
	Sent, Received, Date time.Time
}

// ServerOffset bounds the apiserver's wall-clock offset (its clock minus
// this instance's) at At: Lower < θ < Upper. The bounds rest on causality
// (the apiserver wrote Date between Sent and Received), on the header's
// truncation to whole seconds, and on the two wall clocks drifting apart
// by at most ServerDrift (NTP slews each by at most 500 ppm), so they need
// no delay assumption. Each sample's interval is one second plus its round
// trip wide, and the intersection of several narrows towards the round
// trip as their sub-second phases differ. A step of either clock larger
// than the intersection's width and smaller than a second is not detected
// (see BoundServerOffset): the bounds are off by up to the step until the
// samples from before it have left the window.
type ServerOffset struct {
	Lower, Upper time.Duration
	// Samples is how many of the newest responses the bounds come from;
	// At is the newest one's Received.
	Samples int
	At      time.Time
}

// BoundServerOffset intersects the intervals of samples (oldest first),
// each widened by ServerDrift times its age before the newest, from the
// newest backwards, stopping before the first older sample whose interval
// is disjoint from the newer ones' intersection: the offset moved (the
// apiserver's or this instance's clock was stepped), and only the samples
// since then describe it. It returns false without samples.
func BoundServerOffset(samples []ServerSample) (ServerOffset, bool) {
	if len(samples) == 0 {
		return ServerOffset{}, false
	}
	newest := samples[len(samples)-1]
	lower, upper := sampleBounds(newest)
	n := 1
	for i := len(samples) - 2; i >= 0; i-- {
		lo, up := sampleBounds(samples[i])
		slack := time.Duration(ServerDrift * float64(newest.Received.Sub(samples[i].Received)))
		lo, up = lo-slack, up+slack
		lo, up = max(lo, lower), min(up, upper)
		if lo >= up {
			break
		}
		lower, upper, n = lo, up, n+1
	}
	return ServerOffset{Lower: lower, Upper: upper, Samples: n, At: newest.Received}, true
}

// sampleBounds is the interval of offsets one sample allows: the apiserver
// read its clock at some local instant in [Sent, Received] and saw a time
// in [Date, Date+1s).
func sampleBounds(s ServerSample) (lower, upper time.Duration) {
	return s.Date.Sub(s.Received), s.Date.Add(time.Second).Sub(s.Sent)
}
