// Package overlap decides, from observations taken from outside, whether two
// members of an election certainly led at one same instant. It is the one
// checker behind the fault suite (test/e2e), the `leasehold run` tests
// (test/run) and the bench's overlap trials (bench), so that all three count
// an overlap by the same rule.
//
// An observation is one answer of one member: at some unknown instant of
// [Sent, Recv] it said whether it led, and under which token. An instant
// known exactly (a beat the command wrote while it ran) is an observation
// with Sent == Recv. Only certain overlaps are reported:
//
//   - A run is a maximal sequence of one member's leader:true observations
//     under one token, in order of Sent, ended by a leader:false one or by
//     another token.
//   - A run's member led throughout its certain span [min Recv, max Sent],
//     when that span is not empty: it led at some instant of each
//     observation's window, and a term, once ended, is never resumed under
//     the same token. (With token 0, for implementations that have none,
//     leader:true observations not separated by a leader:false one are one
//     term.)
//   - Two runs of different members certainly overlap when their certain
//     spans intersect (bounds included), or when a run with an empty span
//     has an observation window wholly inside the other's certain span.
//     Two runs with empty spans never certainly overlap: each led at an
//     unknown instant of windows that may not meet.
//
// The checker assumes nothing about the observers: windows of one member may
// overlap in time (two concurrent requests) and observations may come in any
// order.
package overlap

import (
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
)

// Observation is one answer of Member: at some instant of [Sent, Recv] it
// led under Token (Leader), or did not.
type Observation[M comparable] struct {
	Member     M
	Sent, Recv time.Time
	Leader     bool
	Token      fence.Token // 0 for an implementation without tokens
}

// Run is a maximal sequence of one member's leader:true observations under
// one token, in order of Sent.
type Run[M comparable] struct {
	Member M
	Token  fence.Token
	Obs    []Observation[M] // at least one
	// End is the observation that ended the run (leader:false, or another
	// token); nil when the member's observations ended first.
	End *Observation[M]
}

// First and Last are the run's first and last observations.
func (r Run[M]) First() Observation[M] { return r.Obs[0] }
func (r Run[M]) Last() Observation[M]  { return r.Obs[len(r.Obs)-1] }

// Certain returns the span [lo, hi] throughout which the run's member
// certainly led, and false when it is empty (a single observation of
// non-zero width, or observations whose windows all meet).
func (r Run[M]) Certain() (lo, hi time.Time, ok bool) {
	lo, hi = r.Obs[0].Recv, r.Obs[0].Sent
	for _, o := range r.Obs[1:] {
		lo = earlier(lo, o.Recv)
		hi = later(hi, o.Sent)
	}
	return lo, hi, !hi.Before(lo)
}

// Certainly reports whether the members of a and b certainly led at one
// same instant (see the package comment). It does not look at the members:
// two runs of one member are not an overlap, and Find skips them.
func Certainly[M comparable](a, b Run[M]) bool {
	alo, ahi, aok := a.Certain()
	blo, bhi, bok := b.Certain()
	switch {
	case aok && bok:
		return !later(alo, blo).After(earlier(ahi, bhi))
	case aok:
		return anyWithin(b.Obs, alo, ahi)
	case bok:
		return anyWithin(a.Obs, blo, bhi)
	default:
		return false
	}
}

// anyWithin reports whether one of obs lies wholly inside [lo, hi].
func anyWithin[M comparable](obs []Observation[M], lo, hi time.Time) bool {
	for _, o := range obs {
		if !o.Sent.Before(lo) && !o.Recv.After(hi) {
			return true
		}
	}
	return false
}

// Runs groups observations into runs: each member's (members in order of
// their first observation), in order of Sent.
func Runs[M comparable](obs []Observation[M]) []Run[M] {
	byMember := map[M][]Observation[M]{}
	var order []M
	for _, o := range obs {
		if _, ok := byMember[o.Member]; !ok {
			order = append(order, o.Member)
		}
		byMember[o.Member] = append(byMember[o.Member], o)
	}
	var runs []Run[M]
	for _, m := range order {
		mine := byMember[m]
		slices.SortStableFunc(mine, func(a, b Observation[M]) int { return a.Sent.Compare(b.Sent) })
		var cur *Run[M]
		for i, o := range mine {
			if cur != nil && (!o.Leader || o.Token != cur.Token) {
				cur.End = &mine[i]
				runs = append(runs, *cur)
				cur = nil
			}
			if !o.Leader {
				continue
			}
			if cur == nil {
				cur = &Run[M]{Member: m, Token: o.Token}
			}
			cur.Obs = append(cur.Obs, o)
		}
		if cur != nil {
			runs = append(runs, *cur)
		}
	}
	return runs
}

// Pair is two runs of different members that certainly overlap; A began
// (its first observation was sent) no later than B.
type Pair[M comparable] struct{ A, B Run[M] }

// By is how long the two certainly led at once: the length of the
// intersection of their certain spans, or 0 when one of them has none (it
// led at one unknown instant inside the other's span).
func (p Pair[M]) By() time.Duration {
	alo, ahi, aok := p.A.Certain()
	blo, bhi, bok := p.B.Certain()
	if !aok || !bok {
		return 0
	}
	return earlier(ahi, bhi).Sub(later(alo, blo))
}

// Find returns every pair of runs of different members that certainly
// overlap.
func Find[M comparable](runs []Run[M]) []Pair[M] {
	var pairs []Pair[M]
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			if a.Member == b.Member || !Certainly(a, b) {
				continue
			}
			p := Pair[M]{a, b}
			if b.First().Sent.Before(a.First().Sent) {
				p = Pair[M]{b, a}
			}
			pairs = append(pairs, p)
		}
	}
	return pairs
}

// Check returns every certain overlap among obs: Find(Runs(obs)).
func Check[M comparable](obs []Observation[M]) []Pair[M] {
	return Find(Runs(obs))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
