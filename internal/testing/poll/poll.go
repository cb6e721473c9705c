// Package poll is the tests' one wait-until-deadline loop: a real-time
// test polls a condition under a generous deadline, and the deadline alone
// decides failure (never a fixed sleep).
package poll

import (
	"testing"
	"time"
)

// Until calls cond every interval until it holds, and fails t with "not
// WHAT within TIMEOUT" once timeout has passed without it. cond is called
// at least once, on the test's goroutine.
func Until(t testing.TB, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	UntilReport(t, timeout, interval, what, cond, nil)
}

// UntilReport is Until that, on failure, also reports report's account of
// the last state cond saw: "not WHAT within TIMEOUT: REPORT". report is
// called once, only on failure, after the last call of cond; a nil report
// adds nothing.
func UntilReport(t testing.TB, timeout, interval time.Duration, what string, cond func() bool, report func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			if report == nil {
				t.Fatalf("not %s within %v", what, timeout)
			}
			t.Fatalf("not %s within %v: %s", what, timeout, report())
		}
		time.Sleep(interval)
	}
}
