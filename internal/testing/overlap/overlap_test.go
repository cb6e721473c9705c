package overlap

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

type obs = Observation[string]

// lead is an answer of m over [sent, recv] ms: leader under tok.
func lead(m string, sent, recv int, tok fence.Token) obs {
	return obs{Member: m, Sent: ms(sent), Recv: ms(recv), Leader: true, Token: tok}
}

// not is an answer of m over [sent, recv] ms: not leader.
func not(m string, sent, recv int) obs {
	return obs{Member: m, Sent: ms(sent), Recv: ms(recv)}
}

// beat is an instant at which m certainly led under tok (a beat written by
// the command `leasehold run` runs).
func beat(m string, at int, tok fence.Token) obs { return lead(m, at, at, tok) }

func describe(pairs []Pair[string]) string {
	var s []string
	for _, p := range pairs {
		s = append(s, fmt.Sprintf("%s:%d [%d obs] & %s:%d [%d obs] by %v",
			p.A.Member, p.A.Token, len(p.A.Obs), p.B.Member, p.B.Token, len(p.B.Obs), p.By()))
	}
	return strings.Join(s, "; ")
}

// The cases name the checkers this package replaced where they disagreed
// with it: the bench's overlaps() (a single sample strictly inside another
// instance's span), test/run's beat intervals, and the fault suite's own
// (which looked at a run's first window only when its span was empty).
func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		obs  []obs
		want int // certain overlaps
	}{
		// Agreed by all three.
		{"A's answer received before B's was sent: no overlap", []obs{
			lead("a", 0, 10, 5),
			lead("b", 11, 20, 6),
		}, 0},
		{"single answers whose windows meet are not certain", []obs{
			lead("a", 0, 10, 5),
			lead("b", 5, 15, 6),
		}, 0},
		{"an answer wholly inside the other's certain span", []obs{
			lead("a", 0, 10, 5),
			lead("a", 50, 60, 5), // a led throughout [10, 50]
			lead("b", 20, 30, 6),
		}, 1},
		{"a not-leader answer ends the run", []obs{
			lead("a", 0, 10, 5),
			not("a", 20, 30),
			lead("a", 40, 50, 5), // a term never resumes: not [10, 40]
			lead("b", 15, 25, 6),
			lead("b", 26, 35, 6),
		}, 0},
		{"another token ends the run", []obs{
			lead("a", 0, 10, 5),
			lead("a", 40, 50, 7),
			lead("b", 15, 16, 6),
			lead("b", 20, 21, 6),
		}, 0},
		{"two runs of one member are not an overlap", []obs{
			lead("a", 0, 10, 5),
			lead("a", 20, 30, 5),
			lead("a", 25, 26, 7),
			lead("a", 40, 50, 7),
		}, 0},

		// The bench's overlaps() missed these.
		{"bench missed: an answer sent at the very instant the other's span begins", []obs{
			lead("a", 0, 10, 5),
			lead("a", 50, 60, 5), // [10, 50]
			lead("b", 10, 30, 6),
		}, 1},
		{"bench missed: an answer received at the very instant the other's span ends", []obs{
			lead("a", 0, 10, 5),
			lead("a", 50, 60, 5), // [10, 50]
			lead("b", 30, 50, 6),
		}, 1},
		{"bench missed: certain spans that intersect with no answer wholly inside the other's", []obs{
			lead("a", -1, 0, 5),
			lead("a", 10, 20, 5), // a led throughout [0, 10]; this answer was slow
			lead("b", -5, 5, 6),  // slow
			lead("b", 15, 16, 6), // b led throughout [5, 15]
		}, 1},
		{"bench missed: certain spans that touch at one instant", []obs{
			lead("a", 0, 10, 5),
			lead("a", 50, 60, 5), // [10, 50]
			lead("b", 40, 50, 6),
			lead("b", 90, 95, 6), // [50, 90]
		}, 1},

		// test/run's beats are instants: Sent == Recv. Its rule (a beat of
		// one member between the first and last beats of another's run,
		// bounds included) is this one on zero-width windows.
		{"beats: one member's beat between another's", []obs{
			beat("a", 0, 5), beat("a", 100, 5),
			beat("b", 50, 6),
		}, 1},
		{"beats: at the same instant", []obs{
			beat("a", 0, 5), beat("a", 100, 5),
			beat("b", 100, 6), beat("b", 200, 6),
		}, 1},
		{"beats: one nanosecond apart", []obs{
			beat("a", 0, 5), beat("a", 100, 5),
			{Member: "b", Sent: ms(100).Add(1), Recv: ms(100).Add(1), Leader: true, Token: 6},
		}, 0},

		// The fault suite's checker looked only at a run's first window
		// when the run's windows all met.
		{"fault suite missed: concurrent answers, the second inside the other's span", []obs{
			lead("a", 0, 100, 5),
			lead("a", 50, 60, 5), // sent before the first was received
			lead("b", 0, 40, 6),
			lead("b", 70, 80, 6), // [40, 70]
		}, 1},

		// Order and tokens.
		{"observations in any order", []obs{
			lead("b", 20, 30, 6),
			lead("a", 50, 60, 5),
			lead("a", 0, 10, 5),
		}, 1},
		{"token 0 (no tokens): runs end only at leader:false", []obs{
			lead("a", 0, 10, 0),
			lead("a", 50, 60, 0),
			lead("b", 20, 30, 0),
		}, 1},
		{"token 0: a not-leader answer ends the run", []obs{
			lead("a", 0, 10, 0),
			not("a", 15, 16),
			lead("a", 50, 60, 0),
			lead("b", 20, 30, 0),
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Check(c.obs)
			if len(got) != c.want {
				t.Errorf("%d overlaps, want %d: %s", len(got), c.want, describe(got))
			}
		})
	}
}

func TestRuns(t *testing.T) {
	runs := Runs([]obs{
		lead("a", 0, 10, 5),
		lead("b", 5, 6, 6),
		lead("a", 20, 30, 5),
		lead("a", 40, 50, 7),
		not("a", 60, 70),
		lead("a", 80, 90, 9),
	})
	want := []struct {
		member     string
		token      fence.Token
		n          int
		end        int // Sent of End, -1 for none
		lo, hi     int
		certainNot bool
	}{
		{"a", 5, 2, 40, 10, 20, false},
		{"a", 7, 1, 60, 50, 40, true},
		{"a", 9, 1, -1, 90, 80, true},
		{"b", 6, 1, -1, 6, 5, true},
	}
	if len(runs) != len(want) {
		t.Fatalf("%d runs, want %d: %+v", len(runs), len(want), runs)
	}
	for i, w := range want {
		r := runs[i]
		if r.Member != w.member || r.Token != w.token || len(r.Obs) != w.n {
			t.Errorf("run %d: %s:%d with %d observations, want %s:%d with %d", i, r.Member, r.Token, len(r.Obs), w.member, w.token, w.n)
		}
		switch {
		case w.end < 0 && r.End != nil:
			t.Errorf("run %d: ended by %+v, want no end", i, *r.End)
		case w.end >= 0 && (r.End == nil || !r.End.Sent.Equal(ms(w.end))):
			t.Errorf("run %d: ended by %+v, want the answer sent at %d", i, r.End, w.end)
		}
		lo, hi, ok := r.Certain()
		if !lo.Equal(ms(w.lo)) || !hi.Equal(ms(w.hi)) || ok == w.certainNot {
			t.Errorf("run %d: certain span [%v, %v] %v, want [%d, %d] %v", i, lo.Sub(t0), hi.Sub(t0), ok, w.lo, w.hi, !w.certainNot)
		}
	}
}

func TestPair(t *testing.T) {
	pairs := Check([]obs{
		lead("b", 40, 50, 6),
		lead("b", 90, 95, 6), // [50, 90]
		lead("a", 0, 10, 5),
		lead("a", 70, 80, 5), // [10, 70]
		lead("c", 60, 61, 7), // inside both
	})
	if len(pairs) != 3 {
		t.Fatalf("pairs: %s", describe(pairs))
	}
	for _, p := range pairs {
		if p.B.First().Sent.Before(p.A.First().Sent) {
			t.Errorf("pair %s & %s: A began after B", p.A.Member, p.B.Member)
		}
		want := time.Duration(0)
		if p.A.Member == "a" && p.B.Member == "b" {
			want = 20 * time.Millisecond // [50, 70]
		}
		if p.By() != want {
			t.Errorf("pair %s & %s: by %v, want %v", p.A.Member, p.B.Member, p.By(), want)
		}
	}
}
