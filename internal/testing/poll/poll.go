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
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %v", what, timeout)
		}
		time.Sleep(interval)
	}
}
