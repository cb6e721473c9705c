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
//     it: a write of that very instance naming it, or a handover to it in
//     one write (the term is adopted), written by the Lease's previous
//     holder on the version naming it, citing a member Lease write of the
//     heir's that committed before it;
//   - tokens grow: a term's token is larger than every resourceVersion
//     its instance was given before it sent that write (an adopted term's,
//     than every one given before the handover, and at least every one
//     given since), and larger than the token of every term whose first
//     write landed before its own (terms start in that order, but for a
//     term whose first write landed before a restore and that starts after
//     one whose first write landed after it), and of every earlier term
//     up to the largest resourceVersion its instance was given;
//   - across an etcd restore (sim.restore), all of these but as the
//     contract allows (restored): a term whose first write landed before
//     a restore is not judged against one whose first write landed after
//     it, for renewDeadline from the restore, nor is a term its instance
//     took back at once in that time on the validity of such a term;
//     after a restore without --bump-revision, tokens need only grow per
//     instance, holders' tokens are not judged, and until the revision
//     has caught up (an unsafe window) neither are overlaps, adopted
//     terms' bounds, where releases land, nor what the write that
//     started a term landed on;
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
//   - with Config.FencingFloor, every write that starts a term (an
//     acquire, a handover) publishes a fencing floor above the token of
//     every earlier term of its line of history and not above its own
//     resourceVersion, the new term's token; without it, none
//     (floorWrite);
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
	reported  map[*instance]fence.Token
	quietFrom time.Duration
	reused    bool            // a restore without --bump-revision took the revision back (restored)
	restores  []restoreRecord // every etcd restore, in order
	unsafe    []window        // after restores without --bump-revision, until the revision caught up (restored)

	adopted, adoptedWithdrawn int // terms adopted from a handover (by a withdrawn instance)

	termWrites map[int]bool // the versions (store.versions indexes) that an instance wrote to start a term
	floors     int          // the fencing floors judged (floorWrite)
}

// holdersToken judges the token r reports for a holder other than its
// reporter: when the holder is an instance (hand edits name no instance),
// the token must be a version written by that instance's acquire. Not
// after a restore without --bump-revision: a version a watch delivered
// after another of the same resourceVersion is no evidence of an acquire.
func (c *checker) holdersToken(in *instance, r Report) {
	if r.Leading || r.Holder == in.identity || !slices.ContainsFunc(c.s.instances, func(i *instance) bool { return i.identity == r.Holder }) || c.reused {
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
	case cited && !c.s.store.wroteOther(int64(tokenOf(w)), identity, v):
		return true, fmt.Errorf("a handover by %s citing %s, not a write of %s's before it", v.writer, w, identity)
	}
	return true, nil
}

// termRecord is one term, in real time.
type termRecord struct {
	in         *instance
	token      fence.Token
	start, end time.Duration
	write      int // the index of the version that started it (store.versions)
}

func newChecker(s *sim) *checker {
	return &checker{s: s, open: map[*instance]*termRecord{}, reported: map[*instance]fence.Token{}, termWrites: map[int]bool{}}
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
	v, adopted, err := c.termStart(in.identity, r.Token, true)
	for _, t := range c.terms {
		switch {
		case t.token == r.Token && (!c.reused || t.in == in):
			c.fail("%s reports term %d again (first started by %s at %.4fs)", in.identity, r.Token, t.in.identity, t.start.Seconds())
		case t.token > r.Token && (t.write < v.index || t.token <= in.seen) && !c.reused:
			c.fail("%s's new term has token %d, not above the earlier %d", in.identity, r.Token, t.token)
		}
	}
	switch {
	case err != nil && !c.inUnsafe(now):
		c.fail("%s's token %d is not the resourceVersion of the write that started its term: %v", in.identity, r.Token, err)
	case err != nil:
		// In an unsafe window that write may have landed on a record
		// its writer did not know, which reused the resourceVersion it
		// wrote on (restored).
	case !adopted && r.Token <= v.floor:
		c.fail("%s's new term has token %d, not above resourceVersion %d, which it had been given before it sent that write", in.identity, r.Token, v.floor)
	case adopted && (r.Token < in.seen || r.Token <= in.handedFloor[v.lease.ResourceVersion]):
		c.fail("%s adopted term %d, not above resourceVersion %d, which it had been given before the handover, or below %d, given since",
			in.identity, r.Token, in.handedFloor[v.lease.ResourceVersion], in.seen)
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
		if bound := witness.sentAt.Add(c.s.params.timing.RenewDeadline); r.ValidUntil.After(bound) && !c.inUnsafe(now) {
			c.fail("%s adopted term %d valid until %s, past its witness's send time %s + renewDeadline",
				in.identity, r.Token, r.ValidUntil.Format("15:04:05.000"), witness.sentAt.Format("15:04:05.000"))
		}
	}
	t := &termRecord{in: in, token: r.Token, start: now, end: end, write: v.index}
	c.terms = append(c.terms, t)
	c.open[in] = t
	c.overlaps(t)
}

// floorWrite judges v, a write of writer's that starts a term (an acquire,
// or a handover in one write), as it commits. With Config.FencingFloor,
// its fencing floor (fence.FloorAnnotation) is above the token of every
// earlier term of its line of history, the versions it descends from
// (across a restore, those the snapshot kept, not those the restore
// undid, which the restore rolled back with every fenced object), and
// not above v's resourceVersion, the new term's token: an admission
// policy that refuses a token below the floor refuses every earlier
// term's writes and none of the new one's. The earlier terms are those
// started by a write of an instance, whether or not it learnt that it
// landed (hand edits start none). Without FencingFloor, v carries no
// floor.
func (c *checker) floorWrite(writer string, v version) {
	c.termWrites[v.index] = true
	text, has := v.lease.Annotations[fence.FloorAnnotation]
	if !c.s.params.timing.FencingFloor {
		if has {
			c.fail("%s's write %d starts a term with the fencing floor off, and carries the floor %q", writer, v.rev, text)
		}
		return
	}
	c.floors++
	floor, err := fence.FromResourceVersion(text)
	switch {
	case !has:
		c.fail("%s's write %d starts a term and carries no fencing floor", writer, v.rev)
		return
	case err != nil:
		c.fail("%s's write %d starts a term with the fencing floor %q: %v", writer, v.rev, text, err)
		return
	case floor > fence.Token(v.rev):
		c.fail("%s's write %d starts a term with the fencing floor %d, above the new term's token %d: the policy would refuse the new term's writes", writer, v.rev, floor, v.rev)
	}
	for u, ok := c.s.store.previous(v); ok; u, ok = c.s.store.previous(u) {
		if c.termWrites[u.index] && floor <= fence.Token(u.rev) {
			c.fail("%s's write %d starts a term with the fencing floor %d, not above the earlier term's token %d (written by %s): the policy would let that term's writes land",
				writer, v.rev, floor, u.rev, u.writer)
			return
		}
	}
}

// restored is told that etcd was restored, now, with --bump-revision or
// without. The restore serves a past version of the Lease as the present,
// with its resourceVersion: any instance whose latest knowledge is that
// version (it saw nothing newer), and whose claim on it ran out, rightly
// writes on it at once, though a term acquired since (from that very
// version, or a later one) may still be valid. No instance can tell; the
// term valid at the restore ends at its next renewal (the conflict) or
// when its validity runs out. So a term whose first write landed before a
// restore is not judged against a term whose first write landed after it
// for the validity it can have from writes sent before the restore (see
// excused); any other overlap still fails. Without --bump-revision, later
// writes reuse revisions: a term's token is then no longer larger than
// every earlier term's, only than every resourceVersion its own instance
// saw, which is what the contract promises of a rollback (observe checks
// it). And until the revision is past every one written before such a
// restore, and renewDeadline more (an unsafe window), a write conditioned
// on a resourceVersion from before the restore can land on another record
// that reused it, as for every resourceVersion precondition in
// Kubernetes: overlaps that begin in such a window, and what a record
// reached that way makes an instance report or write, are not judged.
func (c *checker) restored(bumped bool) {
	now := c.s.now
	if !bumped {
		c.reused = true
		if n := len(c.unsafe); n == 0 || c.unsafe[n-1].to != 0 {
			c.unsafe = append(c.unsafe, window{from: now})
		}
	}
	c.restores = append(c.restores, restoreRecord{at: now, versions: len(c.s.store.versions)})
	c.disturbed(now)
}

// restoreRecord is one etcd restore: when, and how many versions of the
// Lease had been written before it.
type restoreRecord struct {
	at       time.Duration
	versions int
}

// window is a span of real time, [from, to); to is 0 while it is open.
type window struct{ from, to time.Duration }

// caughtUp is told that the store's revision is now past every one
// written before a restore without --bump-revision: the open unsafe
// window closes renewDeadline later (on the slowest clock).
func (c *checker) caughtUp() {
	if n := len(c.unsafe); n > 0 && c.unsafe[n-1].to == 0 {
		p := c.s.params
		c.unsafe[n-1].to = c.s.now + time.Duration(float64(p.timing.RenewDeadline)/(1-p.drift)) + 1
	}
}

// inUnsafe reports whether at is in an unsafe window (restored).
func (c *checker) inUnsafe(at time.Duration) bool {
	return slices.ContainsFunc(c.unsafe, func(w window) bool { return w.from <= at && (w.to == 0 || at < w.to) })
}

// excused is when u starts to be judged against t (restored): for the
// last restore after u's first write landed and not after t's did, when
// renewDeadline has passed on u's clock since that restore (a write sent
// before it gives no validity beyond that, and one sent after it lands
// before t's first write, which then conflicts, or not at all). And never,
// when t was valid before u started, and u started within renewDeadline
// of a restore at which its instance held a term whose first write
// preceded it: that term's validity let its instance take back at once a
// record emptied or deleted meanwhile (the shield: nobody else can have
// acquired while it was valid), which the restore made untrue. At u.start
// when there is no such restore.
func (c *checker) excused(u, t *termRecord) time.Duration {
	for _, r := range slices.Backward(c.restores) {
		if u.write < r.versions && r.versions <= t.write {
			return max(u.start, c.afterRestore(u.in, r))
		}
	}
	for _, r := range c.restores {
		if t.start <= u.start && u.start < c.afterRestore(u.in, r) && r.versions <= u.write &&
			slices.ContainsFunc(c.terms, func(p *termRecord) bool { return p.in == u.in && p.write < r.versions && p.end > r.at }) {
			return u.end
		}
	}
	return u.start
}

// afterRestore is when renewDeadline has passed on in's clock since the
// restore r.
func (c *checker) afterRestore(in *instance, r restoreRecord) time.Duration {
	base := c.s.base
	return in.real(base, in.local(base, r.at).Add(c.s.params.timing.RenewDeadline))
}

func (c *checker) close(t *termRecord, now time.Duration) {
	t.end = min(t.end, now)
	delete(c.open, t.in)
}

// overlaps fails if t is valid at an instant some other term is, but for
// the validity a restore excuses (excused), and overlaps that begin in an
// unsafe window (restored).
func (c *checker) overlaps(t *termRecord) {
	for _, u := range c.terms {
		if u == t {
			continue
		}
		if us, ts := c.excused(u, t), c.excused(t, u); max(us, ts) < min(u.end, t.end) && !c.inUnsafe(max(us, ts)) {
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
