package decide

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
)

// checker is the simulator's one validator. It judges every report, at the
// real time it is published, against the safety contract:
//
//   - no two terms are valid at the same real instant (a term is valid from
//     the report that starts it until its ValidUntil, read on its instance's
//     clock, or until a report ends it; a crashed instance's last term stays
//     valid until its ValidUntil, as a paused one's would);
//   - every term's token is the resourceVersion of the write that started
//     it, and is larger than every earlier term's: a write of that very
//     instance naming it, or a handover to it in one write (the term is
//     adopted), written by the Lease's previous holder on the version
//     naming it, citing a member Lease write of the heir's that committed
//     before it;
//   - an adopted term is valid at most until the send time of the member
//     Lease write its handover cites plus renewDeadline, on the heir's
//     clock;
//   - no term starts on an instance told to stop or to stay out, nor on a
//     withdrawn one, but for a handover it adopts with AcceptHandovers
//     when not told to refuse handovers;
//   - no term resumes once its validity ran out, and no token is reused;
//   - the tokens an instance reports never go backwards;
//   - a token an instance reports for another instance that holds the
//     Lease is the resourceVersion of the write that started that holder's
//     term: its acquiring write, or a handover to it;
//   - a release lands only on a record its releaser held (sim.apply);
//   - every step asks to be woken after its own local time, so never at
//     the zero time, and no instance steps more than maxStepsPerInstant
//     times at one instant (sim.step): plan did at the step all that was
//     due then, and a Machine that asks again and again spins;
//
// and, at the end, liveness: once nothing has disturbed the history for
// the liveness bound, some term is valid at every instant.
type checker struct {
	s   *sim
	err error

	terms     []*termRecord
	open      map[*instance]*termRecord
	maxToken  fence.Token
	reported  map[*instance]fence.Token
	quietFrom time.Duration

	adopted, adoptedWithdrawn int // terms adopted from a handover (by a withdrawn instance)
}

// holdersToken judges the token r reports for a holder other than its
// reporter: when the holder is an instance (hand edits name no instance),
// the token must be a version written by that instance's acquire.
func (c *checker) holdersToken(in *instance, r Report) {
	if r.Leading || r.Holder == in.identity || !slices.ContainsFunc(c.s.instances, func(i *instance) bool { return i.identity == r.Holder }) {
		return
	}
	var err error
	for _, v := range c.s.store.versionsAt(int64(r.Token)) {
		var adopted bool
		if adopted, err = c.startsTerm(v, r.Holder, false); err == nil && (adopted || acquiring(v.lease)) {
			return
		} else if err == nil {
			err = fmt.Errorf("a write of %s's that starts no term (%+v)", r.Holder, v)
		}
	}
	c.fail("%s reports token %d for holder %s, which is not the resourceVersion of an acquiring write of %s nor of a handover to it (%v)", in.identity, r.Token, r.Holder, r.Holder, err)
}

// termStart judges a write whose resourceVersion is token (the latest
// that can be, after a restore that reused revisions) as the start of a
// term of
// identity's: a write of its own naming it (adopted false), or a handover
// to it in one write (adopted true), written by the Lease's previous
// holder on the version that named it, starting a term (acquireTime =
// renewTime), and, when cited is set (identity leads on it), citing
// (HandedOverAnnotation) a member Lease write of identity's that committed
// before it. (Others see a handover that cites a write the heir cannot
// date begin a term as well, as they see an acquire whose answer was
// lost.) It returns that write; the error says why none is either.
func (c *checker) termStart(identity string, token fence.Token, cited bool) (v version, adopted bool, err error) {
	vs := c.s.store.versionsAt(int64(token))
	if len(vs) == 0 {
		return version{prev: -1}, false, fmt.Errorf("no version at %d", token)
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if adopted, err = c.startsTerm(vs[i], identity, cited); err == nil {
			return vs[i], adopted, nil
		}
	}
	return vs[0], adopted, err
}

// startsTerm judges v as the start of a term of identity's (termStart).
func (c *checker) startsTerm(v version, identity string, cited bool) (adopted bool, err error) {
	switch {
	case v.lease == nil || v.holder != identity:
		return false, fmt.Errorf("not a version naming %s (%+v)", identity, v)
	case v.writer == identity:
		return false, nil
	}
	w := handedWitness(v.lease)
	prev, _ := c.s.store.previous(v)
	switch {
	case w == "":
		return true, fmt.Errorf("written by %s, and not a handover", v.writer)
	case prev.lease == nil || prev.holder != v.writer:
		return true, fmt.Errorf("a handover written by %s on a version it did not hold (held by %q)", v.writer, prev.holder)
	case !acquiring(v.lease):
		return true, fmt.Errorf("a handover by %s that starts no term", v.writer)
	case cited && (!c.s.store.wroteOther(int64(tokenOf(w)), identity) || tokenOf(w) >= fence.Token(v.rev)):
		return true, fmt.Errorf("a handover by %s citing %s, not a write of %s's before it", v.writer, w, identity)
	}
	return true, nil
}

// termRecord is one term, in real time.
type termRecord struct {
	in         *instance
	token      fence.Token
	start, end time.Duration
}

func newChecker(s *sim) *checker {
	return &checker{s: s, open: map[*instance]*termRecord{}, reported: map[*instance]fence.Token{}}
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("at %.4fs: %s", c.s.now.Seconds(), fmt.Sprintf(format, args...))
	}
}

// observe judges a report in published at the current real time.
func (c *checker) observe(in *instance, r Report) {
	now := c.s.now
	if r.Token != 0 {
		if r.Token < c.reported[in] {
			c.fail("%s reported token %d after %d", in.identity, r.Token, c.reported[in])
		}
		c.reported[in] = r.Token
		c.holdersToken(in, r)
	}
	cur := c.open[in]
	if !r.Leading || !in.local(c.s.base, now).Before(r.ValidUntil) {
		if cur != nil {
			c.close(cur, now)
		}
		return
	}
	end := in.real(c.s.base, r.ValidUntil)
	if cur != nil && cur.token == r.Token {
		if now >= cur.end {
			c.fail("%s's term %d resumed after its validity ran out", in.identity, r.Token)
		}
		if end > cur.end {
			cur.end = end
			c.overlaps(cur)
		}
		return
	}
	if cur != nil {
		c.close(cur, now)
	}
	for _, t := range c.terms {
		if t.token == r.Token {
			c.fail("%s reports term %d again (first started by %s at %.4fs)", in.identity, r.Token, t.in.identity, t.start.Seconds())
		}
	}
	if r.Token <= c.maxToken {
		c.fail("%s's new term has token %d, not above the earlier %d", in.identity, r.Token, c.maxToken)
	}
	v, adopted, err := c.termStart(in.identity, r.Token, true)
	if err != nil {
		c.fail("%s's token %d is not the resourceVersion of the write that started its term: %v", in.identity, r.Token, err)
	}
	told, local := in.told, in.local(c.s.base, now)
	switch {
	case told.stopping:
		c.fail("%s started term %d while stopping", in.identity, r.Token)
	case local.Before(told.stayOutUntil):
		c.fail("%s started term %d while staying out", in.identity, r.Token)
	case told.withdrawn && !(adopted && c.s.params.timing.AcceptHandovers && !told.refusing):
		c.fail("%s started term %d while withdrawn (adopted %v, AcceptHandovers %v, refusing handovers %v)", in.identity, r.Token, adopted, c.s.params.timing.AcceptHandovers, told.refusing)
	}
	if adopted {
		c.adopted++
		if told.withdrawn {
			c.adoptedWithdrawn++
		}
		witness := c.s.witnesses[handedWitness(v.lease)]
		if bound := witness.sentAt.Add(c.s.params.timing.RenewDeadline); r.ValidUntil.After(bound) {
			c.fail("%s adopted term %d valid until %s, past its witness's send time %s + renewDeadline",
				in.identity, r.Token, r.ValidUntil.Format("15:04:05.000"), witness.sentAt.Format("15:04:05.000"))
		}
	}
	t := &termRecord{in: in, token: r.Token, start: now, end: end}
	c.terms = append(c.terms, t)
	c.open[in] = t
	c.maxToken = r.Token
	c.overlaps(t)
}

func (c *checker) close(t *termRecord, now time.Duration) {
	t.end = min(t.end, now)
	delete(c.open, t.in)
}

// overlaps fails if t is valid at an instant some other term is.
func (c *checker) overlaps(t *termRecord) {
	for _, u := range c.terms {
		if u != t && u.start < t.end && t.start < u.end {
			c.fail("two valid leaders: %s (token %d, valid %.4fs–%.4fs) and %s (token %d, valid %.4fs–%.4fs)",
				u.in.identity, u.token, u.start.Seconds(), u.end.Seconds(), t.in.identity, t.token, t.start.Seconds(), t.end.Seconds())
		}
	}
}

// crashed keeps the crashed instance's term as it is: valid until its end.
func (c *checker) crashed(in *instance) {
	delete(c.open, in)
	c.disturbed(c.s.now)
}

// disturbed notes that the history is disturbed until the real time until:
// liveness is judged only after that.
func (c *checker) disturbed(until time.Duration) {
	c.quietFrom = max(c.quietFrom, until)
}

// livenessBound is how long after the last disturbance a leader must have
// been elected: a lease duration for the last claim (or a new placeholder)
// to be waited out, twice (a crashed instance's write may land late), plus
// polls, the error backoff, watch reconnects and request timeouts.
func (c *checker) livenessBound() time.Duration {
	p := c.s.params.timing
	timeout := max(p.RetryPeriod, time.Second)
	return time.Duration(float64(2*p.LeaseDuration+8*p.RetryPeriod+4*timeout)/(1-c.s.params.drift)) + 20*c.s.params.latency
}

// probeBound is how soon after the probe's release a successor must lead:
// its acquire's timeout, one retry period (with the poll jitter), and a few
// round trips, on a clock that may run slow (local durations last up to
// 1/(1-drift) times longer in real time).
func (c *checker) probeBound() time.Duration {
	p := c.s.params.timing
	timeout := max(p.RetryPeriod, time.Second)
	return time.Duration(float64(timeout+p.RetryPeriod*6/5)/(1-c.s.params.drift)) + 20*c.s.params.latency
}

// finish judges liveness over the quiet tail that ends at end: from
// quietFrom + livenessBound on, some term is valid at every instant, but
// for the probe's handover, which must take at most probeBound from the
// release (and be to another instance).
func (c *checker) finish(end time.Duration) {
	from := c.quietFrom + c.livenessBound()
	p := c.s.probe
	switch {
	case from >= end:
		return
	case p == nil:
		c.covered(from, end, "nothing disturbed the history after %.4fs", c.quietFrom.Seconds())
		return
	}
	c.covered(from, p.at, "nothing disturbed the history after %.4fs", c.quietFrom.Seconds())
	if p.releasedAt == 0 {
		c.fail("the probe's release by %s never landed", p.releaser.identity)
		return
	}
	c.covered(p.releasedAt+c.probeBound(), end, "%s released at %.4fs and the answer to the next acquire was lost (bound %v)",
		p.releaser.identity, p.releasedAt.Seconds(), c.probeBound())
	for _, t := range c.terms {
		if t.in == p.releaser && t.start > p.at {
			c.fail("%s led again while staying out", t.in.identity)
		}
	}
}

// covered fails unless some term is valid at every instant of [from, to).
func (c *checker) covered(from, to time.Duration, why string, args ...any) {
	terms := slices.Clone(c.terms)
	slices.SortFunc(terms, func(a, b *termRecord) int { return int(a.start - b.start) })
	covered := from
	for _, t := range terms {
		if t.start > covered {
			break
		}
		covered = max(covered, t.end)
	}
	if covered < to {
		c.s.now = covered
		c.fail("no valid leader from %.4fs to %.4fs, although %s", covered.Seconds(), to.Seconds(), fmt.Sprintf(why, args...))
	}
}

func (t *termRecord) String() string {
	return t.in.identity + "/" + strconv.FormatUint(uint64(t.token), 10)
}
