package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/clockskew"
	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/pkg/api"
)

// following is a follower's state with an estimate of the holder's clock:
// 1.3s ahead give or take the delay bound, running 30 % fast.
func following() elect.Snapshot {
	s := candidate()
	s.HolderClock = &clockskew.Estimate{
		Holder: other, Samples: 40, Span: 39 * time.Second, At: t0.Add(-500 * time.Millisecond),
		OffsetLower: 1300*time.Millisecond + 400*time.Microsecond, OffsetUpper: 1500*time.Millisecond + 401*time.Microsecond,
		RateKnown: true, RateLower: 1.28, RateUpper: 1.32,
		Level: clockskew.LevelBeyond, Limit: 0.2, DelayBound: 200 * time.Millisecond,
	}
	return s
}

// The estimate of the holder's clock is in /v1/status (offsets rounded
// outwards) and /metrics while there is one, and absent otherwise.
func TestHolderClockReported(t *testing.T) {
	f := newFixture(t, candidate())
	var st Status
	if err := json.Unmarshal(do(f.srv.APIHandler(), "GET", "/v1/status").Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if st.HolderClock != nil {
		t.Errorf("holderClock without an estimate: %+v", st.HolderClock)
	}
	for name := range f.gauges() {
		switch name {
		case "leasehold_holder_clock_offset_seconds", "leasehold_holder_clock_rate_ratio", "leasehold_holder_clock_rate_limit":
			t.Errorf("%s exported without an estimate", name)
		}
	}

	f.publish(following())
	if err := json.Unmarshal(do(f.srv.APIHandler(), "GET", "/v1/status").Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	lower, upper := 1.28, 1.32
	want := api.HolderClock{
		Holder: other, Renewals: 40, SpanMs: 39000, ObservedAt: timestamp(t0.Add(-500 * time.Millisecond)),
		OffsetLowerMs: 1300, OffsetUpperMs: 1501, RateLower: &lower, RateUpper: &upper,
		Level: "beyond", Limit: 0.2, DelayBoundMs: 200,
	}
	got, _ := json.Marshal(st.HolderClock)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("holderClock\n got  %s\n want %s", got, exp)
	}
	g := f.gauges()
	for series, v := range map[[2]string]float64{
		{"leasehold_holder_clock_offset_seconds", "bound=lower"}: 1.3004,
		{"leasehold_holder_clock_offset_seconds", "bound=upper"}: 1.500401,
		{"leasehold_holder_clock_rate_ratio", "bound=lower"}:     1.28,
		{"leasehold_holder_clock_rate_ratio", "bound=upper"}:     1.32,
		{"leasehold_holder_clock_rate_limit", ""}:                0.2,
	} {
		if got, ok := g[series[0]][series[1]]; !ok || got != v {
			t.Errorf("%s{%s} = %v (present %v), want %v", series[0], series[1], got, ok, v)
		}
	}

	// Before the rate is bounded: offsets only.
	s := following()
	s.HolderClock.RateKnown, s.HolderClock.Level = false, clockskew.LevelNone
	f.publish(s)
	if _, ok := f.gauges()["leasehold_holder_clock_rate_ratio"]; ok {
		t.Error("rate exported before it is bounded")
	}
	st = Status{}
	if err := json.Unmarshal(do(f.srv.APIHandler(), "GET", "/v1/status").Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if st.HolderClock == nil || st.HolderClock.RateLower != nil || st.HolderClock.Level != "none" {
		t.Errorf("holderClock before the rate is bounded: %+v", st.HolderClock)
	}
}
