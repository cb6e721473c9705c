package clockskew

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// holder is a simulated holder: its clock reads offset + rate·(local time
// since t0), it renews every period, and each renewal reaches the
// estimator delay(i) later (on the local clock).
type holder struct {
	offset time.Duration
	rate   float64
	period time.Duration
	delay  func(i int) time.Duration
}

// renewal i: the holder reads its clock at local time t0 + i·period, and the
// record arrives delay(i) later.
func (h holder) renewal(i int) (renewTime, arrived time.Time) {
	at := time.Duration(i) * h.period
	renewTime = t0.Add(h.offset + time.Duration(h.rate*float64(at))).Truncate(time.Microsecond)
	return renewTime, t0.Add(at + h.delay(i))
}

func constant(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

func jitter(seed uint64, upTo time.Duration) func(int) time.Duration {
	rng := rand.New(rand.NewPCG(seed, 1))
	return func(int) time.Duration { return time.Duration(rng.Int64N(int64(upTo) + 1)) }
}

var cfg = Config{Identity: "me", DelayBound: 200 * time.Millisecond, Window: 2 * time.Minute, Limit: 0.2}

// feed observes renewals 0..n-1 of h and returns the last estimate and
// every log line.
func feed(t *testing.T, e *Estimator, name string, h holder, n int) (Estimate, []Log) {
	t.Helper()
	var est Estimate
	var logs []Log
	var ok bool
	for i := range n {
		r, a := h.renewal(i)
		var l *Log
		est, ok, l = e.Observe(name, r, a)
		if l != nil {
			logs = append(logs, *l)
		}
	}
	if !ok {
		t.Fatalf("no estimate after %d renewals", n)
	}
	return est, logs
}

func TestEstimates(t *testing.T) {
	second := time.Second
	for name, tc := range map[string]struct {
		h         holder
		n         int
		level     Level
		rateKnown bool
	}{
		// A holder whose clock runs 3s ahead (and one 5s behind), its
		// renewals delayed by up to 50ms: the offset is within its bound,
		// the rate within its interval, nothing flagged.
		"3s ahead, jitter":  {holder{offset: 3 * second, rate: 1, period: second, delay: jitter(1, 50*time.Millisecond)}, 60, LevelNone, true},
		"5s behind, jitter": {holder{offset: -5 * second, rate: 1, period: second, delay: jitter(2, 50*time.Millisecond)}, 60, LevelNone, true},
		// Jitter as large as the delay bound itself is not flagged either.
		"honest, jitter up to the bound": {holder{rate: 1, period: second, delay: jitter(3, cfg.DelayBound)}, 120, LevelNone, true},
		// 30 % fast: beyond the 0.2 bound, once the window is long enough
		// for the interval to exclude 1.2 (ΔA > 12 delay bounds).
		"30% fast":             {holder{offset: second, rate: 1.3, period: second, delay: jitter(4, 100*time.Millisecond)}, 60, LevelBeyond, true},
		"30% slow":             {holder{rate: 0.7, period: second, delay: jitter(5, 100*time.Millisecond)}, 60, LevelBeyond, true},
		"15% fast":             {holder{rate: 1.15, period: second, delay: jitter(6, 100*time.Millisecond)}, 60, LevelApproaching, true},
		"5% fast":              {holder{rate: 1.05, period: second, delay: jitter(7, 100*time.Millisecond)}, 60, LevelNone, true},
		"too short for a rate": {holder{rate: 1.3, period: 50 * time.Millisecond, delay: constant(0)}, 4, LevelNone, false},
	} {
		t.Run(name, func(t *testing.T) {
			e := New(cfg)
			est, logs := feed(t, e, "holder", tc.h, tc.n)
			trueOffset := tc.h.offset // of the rate-1 holders
			if est.Holder != "holder" || est.Samples != tc.n {
				t.Errorf("holder %q samples %d, want holder, %d", est.Holder, est.Samples, tc.n)
			}
			if tc.h.rate == 1 && (trueOffset < est.OffsetLower || trueOffset > est.OffsetUpper) {
				t.Errorf("offset %v not within [%v, %v]", trueOffset, est.OffsetLower, est.OffsetUpper)
			}
			if got := est.OffsetUpper - est.OffsetLower; got != cfg.DelayBound+time.Microsecond {
				t.Errorf("offset interval width %v, want the delay bound + 1µs", got)
			}
			if est.RateKnown != tc.rateKnown {
				t.Fatalf("RateKnown = %v, want %v", est.RateKnown, tc.rateKnown)
			}
			if tc.rateKnown && (tc.h.rate < est.RateLower || tc.h.rate > est.RateUpper) {
				t.Errorf("rate %v not within [%v, %v]", tc.h.rate, est.RateLower, est.RateUpper)
			}
			if est.Level != tc.level {
				t.Errorf("level %v, want %v (rate in [%v, %v])", est.Level, tc.level, est.RateLower, est.RateUpper)
			}
			// A line each time the level rises, naming both identities.
			if (len(logs) > 0) != (tc.level > LevelNone) || len(logs) > 0 && logs[len(logs)-1].Level != tc.level {
				t.Fatalf("log lines %+v, want the last at level %v", logs, tc.level)
			}
			for i, l := range logs {
				if i > 0 && l.Level <= logs[i-1].Level || l.Holder != "holder" || l.Observer != "me" {
					t.Errorf("log %d: %+v", i, l)
				}
			}
		})
	}
}

// Whatever the offset, a rate within ±5 % and jitter up to the delay bound:
// the intervals always contain the truth, and nothing is flagged.
func TestIntervalsHoldUnderTheDelayAssumption(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 42))
	for i := range 300 {
		h := holder{
			offset: time.Duration(rng.Int64N(int64(20*time.Second))) - 10*time.Second,
			rate:   1,
			period: time.Duration(100+rng.IntN(1900)) * time.Millisecond,
			delay:  jitter(uint64(i), time.Duration(rng.Int64N(int64(cfg.DelayBound)+1))),
		}
		e := New(cfg)
		n := 3 + rng.IntN(200)
		est, logs := feed(t, e, "h", h, n)
		if h.offset < est.OffsetLower || h.offset > est.OffsetUpper {
			t.Fatalf("trial %d: offset %v not within [%v, %v]", i, h.offset, est.OffsetLower, est.OffsetUpper)
		}
		if est.RateKnown && (1 < est.RateLower || 1 > est.RateUpper) {
			t.Fatalf("trial %d: rate 1 not within [%v, %v]", i, est.RateLower, est.RateUpper)
		}
		if est.Level != LevelNone || len(logs) != 0 {
			t.Fatalf("trial %d: flagged %v (%d logs)", i, est.Level, len(logs))
		}
	}
}

func TestWindow(t *testing.T) {
	fast := holder{rate: 1.3, period: time.Second, delay: constant(10 * time.Millisecond)}
	t.Run("own record, no holder", func(t *testing.T) {
		e := New(cfg)
		feed(t, e, "holder", fast, 10)
		if _, ok, _ := e.Observe("me", t0, t0); ok {
			t.Error("own record estimated")
		}
		if _, ok, _ := e.Observe("", t0, t0); ok {
			t.Error("record without holder estimated")
		}
		r, a := fast.renewal(11)
		if _, ok, _ := e.Observe("holder", r, a); ok {
			t.Error("the window survived this instance's own term")
		}
	})
	t.Run("new holder starts anew and logs anew", func(t *testing.T) {
		e := New(cfg)
		_, logs := feed(t, e, "a", fast, 60)
		if len(logs) != 2 {
			t.Fatalf("a: %d logs, want 2", len(logs))
		}
		est, logs := feed(t, e, "b", fast, 60)
		if est.Holder != "b" || est.Samples != 60 || len(logs) != 2 || logs[0].Holder != "b" {
			t.Fatalf("b: %+v, logs %+v", est, logs)
		}
	})
	t.Run("a renewal seen twice counts once, at its first arrival", func(t *testing.T) {
		e := New(cfg)
		feed(t, e, "h", fast, 5)
		r, a := fast.renewal(4)
		est, ok, _ := e.Observe("h", r, a.Add(time.Second))
		if !ok || est.Samples != 5 || !est.At.Equal(a) {
			t.Fatalf("%+v", est)
		}
		if est, _, _ = e.Observe("h", r.Add(-time.Second), a.Add(2*time.Second)); est.Samples != 5 {
			t.Fatalf("an older renewTime was added: %+v", est)
		}
		if est, _, _ = e.Observe("h", time.Time{}, a.Add(2*time.Second)); est.Samples != 5 {
			t.Fatalf("a record without renewTime was added: %+v", est)
		}
	})
	t.Run("old renewals leave the window", func(t *testing.T) {
		e := New(cfg)
		honest := holder{rate: 1, period: time.Second, delay: constant(0)}
		est, _ := feed(t, e, "h", honest, 400)
		if est.Samples != int(cfg.Window/time.Second)+1 || est.Span != cfg.Window {
			t.Fatalf("samples %d span %v, want %d, %v", est.Samples, est.Span, int(cfg.Window/time.Second)+1, cfg.Window)
		}
		e = New(Config{Identity: "me", DelayBound: time.Millisecond, Window: time.Hour, Limit: 0.2})
		if est, _ = feed(t, e, "h", honest, 400); est.Samples != MaxSamples {
			t.Fatalf("samples %d, want at most %d", est.Samples, MaxSamples)
		}
	})
	t.Run("logs once per level", func(t *testing.T) {
		e := New(cfg)
		_, logs := feed(t, e, "h", fast, 120)
		if len(logs) != 2 || logs[0].Level != LevelApproaching || logs[1].Level != LevelBeyond {
			t.Fatalf("logs %+v", logs)
		}
	})
}
