package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/testing/fleet"
)

// The checker itself, on made-up samples: it must report exactly the
// certain violations.

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

type fakeSamples struct {
	seq map[*member]int
	out []sample
}

// add records an answer of m over [sent, recv] ms: leader with token tok
// acquired at acq and valid until vu (ms), or not leader when vu is 0.
func (f *fakeSamples) add(m *member, sent, recv int, tok fence.Token, acq, vu int) {
	if f.seq == nil {
		f.seq = map[*member]int{}
	}
	s := sample{m: m, seq: f.seq[m], sent: ms(sent), recv: ms(recv), st: httpapi.Status{FencingToken: tok}}
	f.seq[m]++
	if vu != 0 {
		s.st.Leader = true
		s.validUntil, s.acquiredAt = ms(vu), ms(acq)
		s.st.ValidForMs = int64(vu - sent - 1)
	}
	f.out = append(f.out, s)
}

func newMember(name string) *member {
	return &member{Instance: &fleet.Instance{Name: name}}
}

func violationsOf(samples []sample) []violation {
	_, vs := check(samples)
	return vs
}

func kinds(vs []violation) map[kind]int {
	n := map[kind]int{}
	for _, v := range vs {
		n[v.kind]++
	}
	return n
}

// The rule for overlaps of samples is internal/testing/overlap's, tested
// there; these cases check only that check hands it the samples whole
// (times, leader, token) and reports what it finds.
func TestCheckerSamplesOverlapOnlyWhenCertain(t *testing.T) {
	a, b := newMember("a"), newMember("b")
	cases := []struct {
		name  string
		build func(f *fakeSamples)
		want  int // overlaps of samples
	}{
		{"single samples that overlap in time are not certain", func(f *fakeSamples) {
			f.add(a, 0, 10, 5, 0, 8)
			f.add(b, 5, 15, 6, 9, 3000)
		}, 0},
		{"a sample inside the other's certain span is certain", func(f *fakeSamples) {
			f.add(a, 0, 10, 5, 0, 3000)
			f.add(a, 50, 60, 5, 0, 3000) // A led throughout [10, 50]
			f.add(b, 20, 30, 6, -1, 3000)
		}, 1},
		{"a not-leader answer between ends the run", func(f *fakeSamples) {
			f.add(a, 0, 10, 5, 0, 3000)
			f.add(a, 20, 30, 5, 0, 0) // A says not leader: its run ended
			f.add(b, 40, 50, 6, 35, 3000)
			f.add(b, 60, 70, 6, 35, 3000)
		}, 0},
		{"another token ends the run", func(f *fakeSamples) {
			f.add(a, 0, 10, 5, 0, 3000)
			f.add(a, 50, 60, 7, 40, 3000)
			f.add(b, 20, 30, 6, 15, 3000)
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f fakeSamples
			c.build(&f)
			got := 0
			for _, v := range violationsOf(f.out) {
				if v.kind == overlapped && strings.Contains(v.msg, "(samples)") {
					got++
				}
			}
			if got != c.want {
				t.Errorf("overlaps of samples = %d, want %d", got, c.want)
			}
		})
	}
}

func TestCheckerReportedTerms(t *testing.T) {
	a, b := newMember("a"), newMember("b")
	t.Run("expiry-based takeover after validUntil is fine", func(t *testing.T) {
		var f fakeSamples
		f.add(a, 0, 1, 5, 0, 2000)
		f.add(b, 3100, 3101, 6, 3050, 5100)
		if _, vs := check(f.out); len(vs) != 0 {
			t.Errorf("violations: %v", vs)
		}
	})
	t.Run("acquiring before the old term's validUntil overlaps", func(t *testing.T) {
		var f fakeSamples
		f.add(a, 0, 1, 5, 0, 2000)
		f.add(a, 100, 101, 5, 0, 2000)
		f.add(a, 110, 111, 5, 0, 0) // stepped down (not by the test's SIGTERM)
		f.add(b, 120, 121, 6, 105, 2100)
		_, vs := check(f.out)
		if kinds(vs)[overlapped] != 1 || !strings.Contains(vs[0].msg, "reported terms") {
			t.Errorf("violations: %v", vs)
		}
	})
	t.Run("a released term ends at its last leader answer", func(t *testing.T) {
		var f fakeSamples
		a := newMember("a")
		a.terminated = ms(102)
		f.add(a, 0, 1, 5, 0, 2000)
		f.add(a, 100, 101, 5, 0, 2000)
		f.add(a, 110, 111, 5, 0, 0)
		f.add(b, 120, 121, 6, 105, 2100)
		if _, vs := check(f.out); len(vs) != 0 {
			t.Errorf("violations: %v", vs)
		}
	})
	t.Run("a term withdrawn because the test failed its app ends at its last leader answer", func(t *testing.T) {
		cases := []struct {
			name     string
			spans    []appSpan
			overlaps int
		}{
			{"app failing just before the step-down", []appSpan{{appHealthy, ms(-60000)}, {appCrashed, ms(-400)}}, 0},
			{"app failed and recovered within the window", []appSpan{{appHealthy, ms(-60000)}, {appFailing, ms(-900)}, {appHealthy, ms(-700)}}, 0},
			{"app healthy throughout", []appSpan{{appHealthy, ms(-60000)}}, 1},
			{"app failed only long before", []appSpan{{appHealthy, ms(-60000)}, {appHanging, ms(-30000)}, {appHealthy, ms(-29000)}}, 1},
			{"app failed only after the step-down was seen", []appSpan{{appHealthy, ms(-60000)}, {appFailing, ms(112)}}, 1},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				a := newMember("a")
				a.app = &fakeApp{name: "a", spans: c.spans}
				var f fakeSamples
				f.add(a, 0, 1, 5, 0, 2000)
				f.add(a, 100, 101, 5, 0, 2000)
				f.add(a, 110, 111, 5, 0, 0) // stepped down
				f.add(b, 120, 121, 6, 105, 2100)
				if got := kinds(violationsOf(f.out))[overlapped]; got != c.overlaps {
					t.Errorf("overlaps = %d, want %d", got, c.overlaps)
				}
			})
		}
	})
	t.Run("tokens must increase with acquiredAt", func(t *testing.T) {
		var f fakeSamples
		f.add(a, 0, 1, 9, 0, 2000)
		f.add(b, 3100, 3101, 6, 3050, 5100)
		if got := kinds(violationsOf(f.out))[regression]; got != 1 {
			t.Errorf("regressions = %d, want 1", got)
		}
	})
	t.Run("an instance's reported tokens never go back", func(t *testing.T) {
		var f fakeSamples
		f.add(a, 0, 1, 9, 0, 0)
		f.add(a, 10, 11, 0, 0, 0) // 0: unknown, allowed
		f.add(a, 20, 21, 7, 0, 0)
		if got := kinds(violationsOf(f.out))[regression]; got != 1 {
			t.Errorf("regressions = %d, want 1", got)
		}
	})
	t.Run("leader beyond validUntil, and a resumed term", func(t *testing.T) {
		var f fakeSamples
		f.add(a, 0, 1, 5, 0, 2000)
		f.add(a, 10, 11, 5, 0, 0)
		f.add(a, 2100, 2101, 5, 0, 2000)
		vs := violationsOf(f.out)
		if got := kinds(vs)[other]; got != 2 {
			t.Errorf("other violations = %d, want 2: %v", got, vs)
		}
	})
}

func TestCheckerWaitRules(t *testing.T) {
	a, b := newMember("a"), newMember("b")
	var f fakeSamples
	f.add(a, 0, 1, 5, 0, 2000)
	f.add(b, 3100, 3101, 6, 3050, 5100) // b's term 6, acquired at 3050
	f.add(b, 3200, 3201, 6, 3050, 5100)
	cases := []struct {
		name string
		rule waitRule
		want int
	}{
		{"acquired after the bound", waitRule{m: b, notBefore: ms(3050)}, 0},
		{"acquired before the bound, reported once per term", waitRule{m: b, notBefore: ms(3051)}, 1},
		{"any member, tokens above", waitRule{above: 5, notBefore: ms(4000)}, 1},
		{"tokens at or below above are exempt", waitRule{above: 6, notBefore: ms(4000)}, 0},
		{"another member's rule", waitRule{m: a, above: 5, notBefore: ms(4000)}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := len(checkWaits(f.out, []waitRule{c.rule})); got != c.want {
				t.Errorf("violations = %d, want %d", got, c.want)
			}
		})
	}
}
