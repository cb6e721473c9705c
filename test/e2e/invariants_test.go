package e2e

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/overlap"
)

// kind classifies a violation, for the soak summary.
type kind int

const (
	overlapped kind = iota // two instances led at once (samples or reported terms)
	regression             // a token went backwards (per instance or across terms)
	other                  // any other broken promise
)

type violation struct {
	kind kind
	msg  string
}

// termInfo is one term as the observer saw it: one member, one token.
type termInfo struct {
	m          *member
	token      fence.Token
	acquiredAt time.Time // as reported
	last       sample    // last leader:true sample
	validUntil time.Time // largest validUntil reported
	endSeen    time.Time // recv of the first answer after its last leader:true one; zero if none
	// released: ended voluntarily, because the test SIGTERMed its member
	// before the promise ran out, or because the test failed its member's
	// app so that health-gated candidacy withdrew it (see check).
	released bool
}

// promiseEnd is when the term's promise to its app ends: the largest
// validUntil it reported, or, for a term ended voluntarily, its last
// leader:true sample (it was certainly leading when that request was sent).
func (t *termInfo) promiseEnd() time.Time {
	if t.released && t.last.sent.Before(t.validUntil) {
		return t.last.sent
	}
	return t.validUntil
}

func (t *termInfo) String() string {
	return fmt.Sprintf("term of %s token %d [acquiredAt %s, validUntil %s]%s",
		t.m.Name, t.token, clock(t.acquiredAt), clock(t.validUntil), map[bool]string{true: " (released)"}[t.released])
}

// check verifies the invariants over the samples of one trial and returns
// the terms it found, ordered by acquiredAt.
func check(samples []sample) ([]*termInfo, []violation) {
	var vs []violation
	add := func(k kind, format string, args ...any) {
		vs = append(vs, violation{k, fmt.Sprintf(format, args...)})
	}

	byMember := map[*member][]sample{}
	var order []*member
	for _, s := range samples {
		if _, ok := byMember[s.m]; !ok {
			order = append(order, s.m)
		}
		byMember[s.m] = append(byMember[s.m], s)
	}

	type key struct {
		m     *member
		token fence.Token
	}
	var terms []*termInfo
	byTerm := map[key]*termInfo{}
	for _, m := range order {
		ss := byMember[m]
		slices.SortFunc(ss, func(a, b sample) int { return a.seq - b.seq })
		var maxToken fence.Token
		regressed := map[fence.Token]bool{}
		for _, s := range ss {
			tok := s.st.FencingToken
			if tok != 0 && tok < maxToken && !regressed[tok] {
				regressed[tok] = true
				add(regression, "%s reported token %d after having reported %d: %s", m.Name, tok, maxToken, s)
			}
			maxToken = max(maxToken, tok)
			if !s.st.Leader {
				continue
			}
			// Validity is never overstated.
			if !s.validUntil.After(s.sent) {
				add(other, "%s answered leader:true with a validUntil not after the request was sent: %s", m.Name, s)
			}
			if v := time.Duration(s.st.ValidForMs) * time.Millisecond; v > s.validUntil.Sub(s.sent)+time.Millisecond {
				add(other, "%s overstated validForMs (%v > validUntil − sent = %v): %s", m.Name, v, s.validUntil.Sub(s.sent), s)
			}
			if tok == 0 || s.acquiredAt.IsZero() {
				add(other, "%s answered leader:true without a token or acquiredAt: %s", m.Name, s)
			}
			t := byTerm[key{m, tok}]
			if t == nil {
				t = &termInfo{m: m, token: tok, acquiredAt: s.acquiredAt}
				byTerm[key{m, tok}] = t
				terms = append(terms, t)
			}
			t.last = s
			t.validUntil = later(t.validUntil, s.validUntil)
			if !s.acquiredAt.Equal(t.acquiredAt) {
				add(other, "%s changed acquiredAt within term %d: %s then %s", m.Name, tok, clock(t.acquiredAt), clock(s.acquiredAt))
			}
		}
	}

	// Runs of leader:true samples (internal/testing/overlap): a term never
	// resumes, and its end is the answer that ended its last run.
	obs := make([]overlap.Observation[*member], len(samples))
	for i, s := range samples {
		obs[i] = overlap.Observation[*member]{Member: s.m, Sent: s.sent, Recv: s.recv, Leader: s.st.Leader, Token: s.st.FencingToken}
	}
	runs := overlap.Runs(obs)
	ended := map[key]bool{}
	for _, r := range runs {
		k := key{r.Member, r.Token}
		if ended[k] {
			add(other, "%s resumed its term (token %d) after answering it was not leader: %s", r.Member.Name, r.Token, observation(r.First()))
		}
		ended[k] = true
		if r.End != nil {
			byTerm[k].endSeen = r.End.Recv
		}
	}
	for _, t := range terms {
		if at := t.m.terminatedAt(); !at.IsZero() && at.Before(t.validUntil) {
			t.released = true
		}
		// Health-gated candidacy: a leader whose app fails threshold probes
		// in a row steps down and releases the Lease, as on SIGTERM. The
		// test caused that if it had the member's app failing at some
		// instant between withdrawWindow before the term's last leader:true
		// answer was sent and the answer that ended the term.
		if t.m.app != nil {
			end := t.endSeen
			if end.IsZero() {
				end = t.validUntil
			}
			if t.m.app.failingDuring(t.last.sent.Add(-withdrawWindow), end) {
				t.released = true
			}
		}
	}

	// No overlap of samples.
	for _, p := range overlap.Find(runs) {
		add(overlapped, "two leaders at once (samples): run %s .. %s and run %s .. %s",
			observation(p.A.First()), observation(p.A.Last()), observation(p.B.First()), observation(p.B.Last()))
	}

	// No overlap of reported terms; tokens increase with acquiredAt.
	slices.SortFunc(terms, func(a, b *termInfo) int { return a.acquiredAt.Compare(b.acquiredAt) })
	for i, a := range terms {
		for _, b := range terms[i+1:] {
			if a.m == b.m {
				continue
			}
			lo, hi := a, b
			if hi.token < lo.token {
				lo, hi = hi, lo
			}
			if hi.acquiredAt.Before(lo.promiseEnd()) && lo.acquiredAt.Before(hi.promiseEnd()) {
				add(overlapped, "two leaders at once (reported terms): %s overlaps %s by %v",
					lo, hi, earlier(lo.promiseEnd(), hi.promiseEnd()).Sub(later(lo.acquiredAt, hi.acquiredAt)))
			}
		}
		if i > 0 && terms[i-1].token >= a.token {
			add(regression, "token did not increase from term to term: %s, then %s", terms[i-1], a)
		}
	}
	return terms, vs
}

// ledger carries the last term of the run across trials and scenarios, so
// that tokens are checked to increase across all of them.
var ledger struct {
	sync.Mutex
	last *termInfo
	from string // the scenario of last
}

// checkAcrossRun appends a trial's terms (ordered by acquiredAt) to the
// run-wide ledger.
func checkAcrossRun(scenario string, terms []*termInfo) []violation {
	ledger.Lock()
	defer ledger.Unlock()
	var vs []violation
	if len(terms) > 0 && ledger.last != nil && terms[0].token <= ledger.last.token {
		vs = append(vs, violation{regression, fmt.Sprintf("token went backwards across the run: %s (scenario %s), then %s (scenario %s)",
			ledger.last, ledger.from, terms[0], scenario)})
	}
	if len(terms) > 0 {
		ledger.last, ledger.from = terms[len(terms)-1], scenario
	}
	return vs
}

// observation formats one sample as the overlap checker saw it.
func observation(o overlap.Observation[*member]) string {
	return fmt.Sprintf("%s [%s, %s] leader=%v token=%d", o.Member.Name, clock(o.Sent), clock(o.Recv), o.Leader, o.Token)
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
