package main_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/poll"
)

// On the real apiserver (on this machine's clock, so an offset of 0), the
// status bounds the apiserver's clock from its responses' Date headers:
// the bounds contain 0, narrow below the header's one second as responses
// accumulate, and the metric carries the same two bounds.
func TestStatusBoundsTheApiserverClock(t *testing.T) {
	inst, _ := startLeader(t, newFleet(t), "a")
	poll.Until(t, 60*time.Second, 100*time.Millisecond, "a bound from 20 responses", func() bool {
		st, err := inst.Status(t.Context())
		return err == nil && st.ApiserverClock != nil && st.ApiserverClock.Responses >= 20
	})
	st, err := inst.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c := st.ApiserverClock
	t.Logf("apiserver clock offset in (%d, %d) ms from %d responses", c.OffsetLowerMs, c.OffsetUpperMs, c.Responses)
	if c.OffsetLowerMs > 0 || c.OffsetUpperMs < 0 {
		t.Errorf("bounds (%d, %d) ms exclude 0: the apiserver runs on this clock", c.OffsetLowerMs, c.OffsetUpperMs)
	}
	if w := c.OffsetUpperMs - c.OffsetLowerMs; w >= 1000 {
		t.Errorf("width %d ms: %d responses did not narrow it below one second", w, c.Responses)
	}
	m, err := inst.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lower := m.Sum("leasehold_apiserver_clock_offset_seconds", map[string]string{"bound": "lower"})
	upper := m.Sum("leasehold_apiserver_clock_offset_seconds", map[string]string{"bound": "upper"})
	if !(lower <= 0 && 0 <= upper && upper-lower < 1) {
		t.Errorf("metric bounds (%v, %v) s, want around 0 and under a second apart", lower, upper)
	}
}
