package apphealth

import "time"

// judge is the Prober's rule of health: the Status that follows prev when
// a probe completes at now, having passed (err nil) or failed with err.
//
//   - A pass counts a success in a row (ConsecutiveSuccesses) and ends the
//     run of failures; the successThreshold-th success in a row makes an
//     unhealthy Status healthy, and a healthy one stays healthy.
//   - A failure counts a failure in a row (ConsecutiveFailures) and ends
//     the run of successes; the failureThreshold-th failure in a row makes
//     a healthy Status unhealthy, and an unhealthy one stays unhealthy.
//   - ChangedAt is now exactly when Healthy changes.
//
// A run shorter than its threshold changes nothing, so an app whose check
// flaps in runs shorter than both thresholds keeps its Healthy. With
// successThreshold 1 the first pass is enough: the rule health-gated
// candidacy had before SuccessThreshold existed.
func judge(prev Status, err error, now time.Time, failureThreshold, successThreshold int) Status {
	next := prev
	next.Checks++
	next.LastCheckAt = now
	if err == nil {
		next.ConsecutiveSuccesses++
		next.ConsecutiveFailures = 0
		next.LastError = ""
		next.LastSuccessAt = now
		if next.ConsecutiveSuccesses >= successThreshold {
			next.Healthy = true
		}
	} else {
		next.ConsecutiveFailures++
		next.ConsecutiveSuccesses = 0
		next.LastError = err.Error()
		if next.ConsecutiveFailures >= failureThreshold {
			next.Healthy = false
		}
	}
	if next.Healthy != prev.Healthy {
		next.ChangedAt = now
	}
	return next
}
