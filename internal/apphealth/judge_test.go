package apphealth

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// outcomes turns a history like "ffp" (fail, fail, pass) into probe
// results.
func outcomes(history string) []error {
	var out []error
	for _, c := range history {
		if c == 'f' {
			out = append(out, errors.New("status 503"))
		} else {
			out = append(out, nil)
		}
	}
	return out
}

// healthOf replays history through judge from a new Prober's Status and
// returns Healthy after each probe ("H" healthy, "-" not) and the Statuses.
func healthOf(history string, failures, successes int) (string, []Status) {
	var s Status
	var b strings.Builder
	var all []Status
	for i, err := range outcomes(history) {
		s = judge(s, err, t0.Add(time.Duration(i)*interval), failures, successes)
		all = append(all, s)
		if s.Healthy {
			b.WriteByte('H')
		} else {
			b.WriteByte('-')
		}
	}
	return b.String(), all
}

// The rule, table-tested: Healthy after each probe of a history, for the
// two thresholds. A run of passes shorter than successThreshold never makes
// an unhealthy app healthy, a run of failures shorter than
// failureThreshold never makes a healthy one unhealthy, so a check that
// flaps in shorter runs moves nothing.
func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		history             string
		failures, successes int
		want                string
	}{
		// successThreshold 1: the first pass is enough.
		{"p", 3, 1, "H"},
		{"fffp", 3, 1, "---H"},
		{"pfffpf", 3, 1, "HHH-HH"},
		{"pfpfpf", 1, 1, "H-H-H-"},
		// Not healthy until successThreshold passes in a row, at start too.
		{"ppp", 3, 3, "--H"},
		{"ppfppp", 3, 3, "-----H"},
		// Once healthy, failures shorter than failureThreshold change nothing.
		{"pppffpff", 3, 3, "--HHHHHH"},
		// Unhealthy after failureThreshold in a row; then a flapping check
		// (runs of passes shorter than 3) keeps it out, and only 3 passes
		// in a row bring it back.
		{"pppfff" + "pfppfpfppf" + "ppp", 3, 3, "--HHH-" + "----------" + "--H"},
		{"pp" + "ff" + "pfpfpf" + "pp", 2, 2, "-H" + "H-" + "------" + "-H"},
		{"pf" + "pf" + "pf", 1, 2, "--" + "--" + "--"},
		{"pp" + "f" + "pp", 1, 2, "-H" + "-" + "-H"},
	} {
		t.Run(fmt.Sprintf("%s/%d/%d", tc.history, tc.failures, tc.successes), func(t *testing.T) {
			got, all := healthOf(tc.history, tc.failures, tc.successes)
			if got != tc.want {
				t.Errorf("Healthy after each probe = %s, want %s", got, tc.want)
			}
			for i, s := range all {
				now := t0.Add(time.Duration(i) * interval)
				changed := i == 0 && s.Healthy || i > 0 && s.Healthy != all[i-1].Healthy
				if changed != s.ChangedAt.Equal(now) {
					t.Errorf("probe %d: ChangedAt %v, changed %v", i, s.ChangedAt, changed)
				}
				if s.Checks != uint64(i+1) || !s.LastCheckAt.Equal(now) {
					t.Errorf("probe %d: Checks %d, LastCheckAt %v", i, s.Checks, s.LastCheckAt)
				}
			}
		})
	}
}

// preDamping is the rule of health before SuccessThreshold existed,
// verbatim: the reference that successThreshold 1 must reproduce.
func preDamping(prev Status, err error, now time.Time, failureThreshold int) Status {
	next := prev
	next.Checks++
	next.LastCheckAt = now
	if err == nil {
		next.Healthy = true
		next.ConsecutiveFailures = 0
		next.LastError = ""
		next.LastSuccessAt = next.LastCheckAt
	} else {
		next.ConsecutiveFailures++
		next.LastError = err.Error()
		if next.ConsecutiveFailures >= failureThreshold {
			next.Healthy = false
		}
	}
	if next.Healthy != prev.Healthy {
		next.ChangedAt = next.LastCheckAt
	}
	return next
}

// With successThreshold 1, judge is the rule before damping existed,
// exactly: every history of up to 12 probes, failure thresholds 1 to 4,
// gives the same Status after every probe (ConsecutiveSuccesses aside,
// which the old rule did not keep).
func TestSuccessThresholdOneIsTheRuleBeforeDamping(t *testing.T) {
	histories := 0
	for n := 1; n <= 12; n++ {
		for bits := range 1 << n {
			var history strings.Builder
			for i := range n {
				if bits&(1<<i) != 0 {
					history.WriteByte('f')
				} else {
					history.WriteByte('p')
				}
			}
			for failures := 1; failures <= 4; failures++ {
				var got, want Status
				for i, err := range outcomes(history.String()) {
					now := t0.Add(time.Duration(i) * interval)
					got = judge(got, err, now, failures, 1)
					want = preDamping(want, err, now, failures)
					cmp := got
					cmp.ConsecutiveSuccesses = 0
					if cmp != want {
						t.Fatalf("history %s, failureThreshold %d, probe %d: %+v, want %+v", history.String(), failures, i, got, want)
					}
				}
				histories++
			}
		}
	}
	t.Logf("%d histories agree", histories)
}
