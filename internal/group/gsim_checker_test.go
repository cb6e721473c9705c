package group

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/group/member"
	"github.com/leasehold/leasehold/internal/testing/fairshare"
)

// gchecker judges a group history. At every step, per Lease, the safety
// contract of a single Lease (package decide's):
//
//   - no two terms of one Lease are valid at the same real instant (a term
//     is valid from the report that starts it until its ValidUntil, read on
//     its node's clock, or until a report ends it; a crashed node's terms
//     stay valid until their ValidUntil);
//   - a term's token is the resourceVersion of the write of that Lease that
//     began it, and exceeds every earlier term's token of the Lease: the
//     node's own write naming it, or a handover in one write naming it
//     (decide.HandedOverAnnotation, handedTo), which the node adopted
//     without writing: written by the previous holder, and whose witness
//     is a write of the node's own member Lease;
//   - no term can outlast the claim of the write that began it: the others
//     may take the Lease a lease duration, on their clocks, after they
//     observe that write, so no earlier than leaseDuration/(1+drift) after
//     its commit; a term must end by then (claimed), whether it began with
//     the node's own acquire (validity from before its send) or with a
//     handover to it (validity from before the send of the witness);
//   - no term resumes after its validity ran out, no token is reused, and
//     the tokens a node reports for a Lease never go backwards;
//   - a release lands only on its releaser's record (gsim.sendLease);
//   - no Machine takes an answer for a rollback of etcd's revisions
//     (gsimRollbackLog, judged in gsim.step): the store never goes back,
//     so that is always an answer misread (an absence served before a
//     version the watch had shown, taken as the latest);
//   - a handover is dated right: the send time a node's membership gives
//     for the witness of a handover to it (membership.sentAt, the
//     Machine's Observed.WitnessSentAt) is a write of its own member Lease,
//     and reads on its clock no later than the moment its request left
//     (dated);
//   - a token a node reports for another node holding the Lease is the
//     resourceVersion of that node's own acquiring write of it, or of a
//     handover of it to that node (handedTo);
//   - observers: an observer never reports leading or campaigning, sends
//     nothing but reads (gsim.sendLease), and writes no object at all, no
//     member Lease either (gsim.committed);
//   - declines: from the moment a node's Machine is handed the Release of
//     a decline until the stay-out has ended on the node's clock, the
//     Machine neither campaigns for that Lease nor holds it; and a
//     balanced member's plan never campaigns for a Lease its own view of
//     the members says it declines, unless that view has it holding the
//     Lease (plan).
//
// In the quiet tail, convergence: within bound() of the last disturbance
// the group reaches the fair share, that is every live member's view of
// the membership is exactly the live members, every Lease has a valid term
// held by a live member, and each member holds ⌊L/M⌋ or ⌈L/M⌉ of them.
// From then until the end of the history, three lease durations later
// (gsim.settled: meanwhile every member renews its member Lease nine times
// and every holder its Leases at least ten times), no Lease starts a new term
// (no move, no flapping) and every converged term stays valid.
//
// Observers are not members: they hold nothing, and no member's view may
// count them. At the end of the history every live node, member or
// observer, reports each Lease's holder and that holder's token.
//
// A decline made once the tail has converged (gsim.tailDecline): another
// member takes the Lease within takeoverBound, when there is one, whatever
// the offsets between the members' wall clocks (expectTakeover); the
// stay-out disturbs the group until it has ended, and the group must
// converge again.
//
// In a clean scale-up, besides: the Leases change holder exactly as often
// as the fewest moves a fair share needs from the holders when the new
// members start (fewestMoves, as plan_test.go counts them).
type gchecker struct {
	s   *gsim
	err error

	terms    [][]*gterm // per Lease, in start order
	open     map[gslot]*gterm
	maxToken []fence.Token
	reported map[gslot]fence.Token

	quietFrom time.Duration // the last disturbance
	converged time.Duration // when the fair share was reached after quietFrom; -1 while not
	late      float64       // (converged − quietFrom) / bound, for the log

	// A clean scale-up: the holders when the new members start, and how
	// many terms each Lease had then.
	scaled    bool
	heldAt    []string
	termsAtUp []int

	take     *gtake  // the tail's decline, when its takeover is judged
	takeLate float64 // how much of takeoverBound the takeover took

	handed int // terms begun by a handover in one write (adopted)
	// sent is when, in real time, the request that wrote each version of
	// a member Lease left its member.
	sent map[string]time.Duration
}

// gtake is a decline in the quiet tail that another member must take over.
type gtake struct {
	from  *gnode
	i     int
	at    time.Duration
	bound time.Duration
	done  bool
}

// gslot is one node's election for one Lease.
type gslot struct {
	n *gnode
	i int
}

// gterm is one term of one Lease, in real time.
type gterm struct {
	n          *gnode
	token      fence.Token
	start, end time.Duration
}

func newGChecker(s *gsim) *gchecker {
	return &gchecker{
		s: s, converged: -1,
		terms: make([][]*gterm, s.p.leases), maxToken: make([]fence.Token, s.p.leases),
		open: map[gslot]*gterm{}, reported: map[gslot]fence.Token{}, sent: map[string]time.Duration{},
	}
}

func (c *gchecker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("at %.4fs: %s", c.s.now.Seconds(), fmt.Sprintf(format, args...))
	}
}

// report judges a report of n's election for Lease i, published now.
func (c *gchecker) report(n *gnode, i int, r decide.Report) {
	now, lease, slot := c.s.now, c.s.leases[i], gslot{n, i}
	if r.Token != 0 {
		if r.Token < c.reported[slot] {
			c.fail("%s reported token %d for %s after %d", n.name, r.Token, lease, c.reported[slot])
		}
		c.reported[slot] = r.Token
		c.holdersToken(n, i, r)
	}
	if n.observer && (r.Leading || r.Candidate) {
		c.fail("observer %s reports leading %v, candidate %v for %s", n.name, r.Leading, r.Candidate, lease)
	}
	if until := n.els[i].declinedUntil; (r.Leading || r.Candidate) && n.clock.at(now).Before(until) {
		c.fail("%s reports leading %v, candidate %v for %s, which it declined until %s", n.name, r.Leading, r.Candidate, lease, until.Format("15:04:05.000"))
	}
	cur := c.open[slot]
	if !r.Leading || !n.clock.at(now).Before(r.ValidUntil) {
		if cur != nil {
			cur.end = min(cur.end, now)
			delete(c.open, slot)
		}
		return
	}
	end := n.clock.when(r.ValidUntil)
	if cur != nil && cur.token == r.Token {
		if now >= cur.end {
			c.fail("%s's term %d of %s resumed after its validity ran out", n.name, r.Token, lease)
		}
		if end > cur.end {
			cur.end = end
			c.overlaps(i, cur)
		}
		return
	}
	if cur != nil {
		cur.end = min(cur.end, now)
	}
	for _, t := range c.terms[i] {
		if t.token == r.Token {
			c.fail("%s reports term %d of %s again (first started by %s at %.4fs)", n.name, r.Token, lease, t.n.name, t.start.Seconds())
		}
	}
	if r.Token <= c.maxToken[i] {
		c.fail("%s's new term of %s has token %d, not above the earlier %d", n.name, lease, r.Token, c.maxToken[i])
	}
	v, ok := c.s.store.versions.at(int64(r.Token))
	handover, witnessed := c.handedTo(n.name, r.Token)
	handed := ok && v.writer != n.name && handover && witnessed // its heir can date only its own write
	if !ok || v.name != lease || v.holder != n.name || (v.writer != n.name && !handed) {
		c.fail("%s's token %d for %s is not the resourceVersion of its own acquiring write of it, nor of a handover of it to it (%+v)", n.name, r.Token, lease, v)
	}
	if handed {
		c.handed++
		c.s.tracef("%s leads %s on the handover at %d, without writing", n.name, lease, r.Token)
	}
	if claimed := v.at + time.Duration(float64(c.s.p.timing.LeaseDuration)/(1+c.s.p.drift)); ok && end > claimed {
		c.fail("%s's new term %d of %s is valid until %.4fs, after the others may take the Lease (%.4fs: a lease duration on the fastest clock after the write that began it, committed at %.4fs)",
			n.name, r.Token, lease, end.Seconds(), claimed.Seconds(), v.at.Seconds())
	}
	if c.converged >= 0 {
		prev := "nobody"
		if h := c.holderAt(i, now); h != nil {
			prev = h.n.name
		}
		c.fail("%s moved from %s to %s (new term %d) after the group reached its fair share at %.4fs, with nothing disturbing it since %.4fs",
			lease, prev, n.name, r.Token, c.converged.Seconds(), c.quietFrom.Seconds())
	}
	if tk := c.take; tk != nil && !tk.done && tk.i == i && n != tk.from {
		tk.done = true
		c.takeLate = max(c.takeLate, float64(now-tk.at)/float64(tk.bound))
		c.s.tracef("%s takes %s %v after %s declined it", n.name, lease, now-tk.at, tk.from.name)
	}
	t := &gterm{n: n, token: r.Token, start: now, end: end}
	c.terms[i] = append(c.terms[i], t)
	c.open[slot] = t
	c.maxToken[i] = r.Token
	c.overlaps(i, t)
}

// holdersToken judges the token n reports for Lease i's holder when that
// is another node (hand edits name strangers): it must be the
// resourceVersion of that node's own acquiring write of the Lease.
func (c *gchecker) holdersToken(n *gnode, i int, r decide.Report) {
	if r.Leading || r.Holder == n.name || !c.s.named[r.Holder] {
		return
	}
	handover, _ := c.handedTo(r.Holder, r.Token)
	if v, ok := c.s.store.versions.at(int64(r.Token)); !ok || v.name != c.s.leases[i] || (v.writer != r.Holder && !handover) || v.holder != r.Holder || !v.acquiring {
		c.fail("%s reports token %d for %s's holder %s, which is not the resourceVersion of an acquiring write of it by %s, nor of a handover to it (%+v)",
			n.name, r.Token, c.s.leases[i], r.Holder, r.Holder, v)
	}
}

// handedTo reports whether the version token is a handover in one write
// to the member named to (decide.HandedOverAnnotation): written by the
// holder of the version before it, naming to, and naming as its witness an
// earlier version of to's member Lease; witnessed, whether to wrote that
// version itself (only then can it date the handover and lead on it; a
// hand edit of its member Lease can still be a leaver's witness, and the
// others report the handover's token for it). A hand edit that keeps the
// annotation is no handover: its resourceVersion is not the term's first
// write, whose token the others report.
func (c *gchecker) handedTo(to string, token fence.Token) (handover, witnessed bool) {
	st := c.s.store
	v, ok := st.versions.at(int64(token))
	if !ok || v.witness == "" || v.holder != to {
		return false, false
	}
	w, err := strconv.ParseInt(v.witness, 10, 64)
	wv, ok := st.versions.at(w)
	if err != nil || !ok || w >= int64(token) || wv.name != member.LeaseName(gsimGroup, to) || wv.holder != to {
		return false, false
	}
	for rev := int64(token) - 1; rev >= gstoreFirst; rev-- {
		if prev, ok := st.versions.at(rev); ok && prev.name == v.name {
			return prev.holder == v.writer, prev.holder == v.writer && wv.writer == to
		}
	}
	return false, false
}

// memberSent notes that the member Lease write that got resourceVersion
// rv left its member at real time at.
func (c *gchecker) memberSent(rv string, at time.Duration) { c.sent[rv] = at }

// dated judges the send time n's membership gives for witness, a version
// of n's member Lease: n's clock read sentAt before the write was sent.
func (c *gchecker) dated(n *gnode, witness string, sentAt time.Time) {
	v, err := strconv.ParseInt(witness, 10, 64)
	at, ok := c.sent[witness]
	switch w, _ := c.s.store.versions.at(v); {
	case err != nil || !ok || w.writer != n.name || w.name != member.LeaseName(gsimGroup, n.name):
		c.fail("%s dates the witness %s of a handover to it, which is not a write of its member Lease by it (%+v)", n.name, witness, w)
	case sentAt.After(n.clock.at(at)):
		c.fail("%s dates the witness %s of a handover to it %s, after it sent that write (%s on its clock)",
			n.name, witness, sentAt.Format("15:04:05.000"), n.clock.at(at).Format("15:04:05.000"))
	}
}

// call judges a Call of n's core for Lease i: a balanced member never
// asks to campaign for a Lease its own view of the members says it
// declines, unless its election holds that Lease (or it is reserved for
// it): Candidacy keeps what a member holds while membership settles, and
// the Machine's stay-out keeps it from acquiring again. Nor does it ask to
// campaign for a Lease it does not serve.
func (c *gchecker) call(n *gnode, i int, call member.Call) {
	if !call.Candidate || c.s.p.greedy {
		return
	}
	lease, r := c.s.leases[i], n.els[i].report
	if declined := n.core.members.Declined[n.name]; slices.Contains(declined, lease) && !r.Leading && r.Holder != n.name && r.ReservedFor != n.name {
		c.fail("%s's plan campaigns for %s, which it declines (its view: %v declined by it)", n.name, lease, declined)
	}
}

// takeoverBound is how long a Lease declined in the quiet tail may go
// without another member's term: the decliner's member Lease write and its
// release (each perhaps after a request under way), the watch events that
// carry them, the others' candidacy (goroutine hand-offs) and an acquire:
// 8 crossings of the network (at most 2.5 typical latencies each in the
// tail) and 10ms of hand-offs; plus a poll (1.2 retryPeriods on a slow
// clock) if a member's watch of the Lease is down; with data-aware
// failover (ranked), plus the rank deferral's bound (member.RankDeferBound,
// on a slow clock) and a goroutine hand-off for the candidacy it ends.
func (c *gchecker) takeoverBound(i int) time.Duration {
	p := c.s.p
	bound := 20*p.latency + 10*time.Millisecond
	if p.ranked {
		bound += time.Duration(float64(member.RankDeferBound(p.timing.LeaseDuration))/(1-p.drift)) + 10*time.Millisecond
	}
	for _, n := range c.members() {
		if e := n.els[i]; e != nil && !e.watch.open {
			return bound + time.Duration(1.2*float64(p.timing.RetryPeriod)/(1-p.drift))
		}
	}
	return bound
}

// expectTakeover notes that member n declines Lease i, which it holds,
// now, in the quiet tail, for stayOut: every member then plans without n
// for it (Assign), so another member holds it within takeoverBound. Not
// Members time a stay-out from the member Lease's renewTime
// (localDeclines), so wall clocks far apart do not make them disagree. Not
// judged when no other member serves the Lease.
func (c *gchecker) expectTakeover(n *gnode, i int, stayOut time.Duration) {
	others := slices.DeleteFunc(c.members(), func(m *gnode) bool { return m == n || m.els[i] == nil })
	if len(others) == 0 {
		c.s.tracef("the takeover of %s is not judged: no other member serves it", c.s.leases[i])
		return
	}
	bound := c.takeoverBound(i)
	c.take = &gtake{from: n, i: i, at: c.s.now, bound: bound}
	c.s.at(c.s.now+bound, func() {
		if t := c.take; !t.done {
			c.fail("%s declined %s at %.4fs and no other member took it within %v (shares: %s)", n.name, c.s.leases[i], t.at.Seconds(), t.bound, c.shares())
		}
	})
}

// overlaps fails if t is valid at an instant another term of Lease i is.
func (c *gchecker) overlaps(i int, t *gterm) {
	for _, u := range c.terms[i] {
		if u != t && u.start < t.end && t.start < u.end {
			c.fail("two valid leaders of %s: %s (token %d, valid %.4fs–%.4fs) and %s (token %d, valid %.4fs–%.4fs)",
				c.s.leases[i], u.n.name, u.token, u.start.Seconds(), u.end.Seconds(), t.n.name, t.token, t.start.Seconds(), t.end.Seconds())
		}
	}
}

// collected judges the member Leases left at the end of the history: one
// whose holder is not a live node (a crashed member's, a leftover, a
// ghost) must have been deleted once it had stayed unchanged for
// collectAfter TTLs (3, on the slowest clock) from its last write or the
// start of the quiet tail, whichever is later (every live member has
// observed it by then), plus two request timeouts and a few crossings.
func (c *gchecker) collected() {
	if len(c.members()) == 0 {
		return
	}
	live := map[string]bool{}
	for _, n := range c.s.nodes {
		if n.alive && n.core != nil && !n.core.stopped {
			live[member.LeaseName(gsimGroup, n.name)] = true
		}
	}
	limit := time.Duration(float64(3*c.s.p.timing.LeaseDuration+2*c.s.cfg.requestTimeout())/(1-c.s.p.drift)) + 40*c.s.p.latency
	for name, at := range c.s.memberWrites {
		if !live[name] && c.s.end-max(at, c.quietFrom) > limit {
			c.fail("the member Lease %s, last written at %.4fs, is still there at the end (%.4fs): nobody collected it", name, at.Seconds(), c.s.end.Seconds())
		}
	}
}

// crashed keeps the crashed node's terms as they are: valid to their end.
func (c *gchecker) crashed(n *gnode) {
	for i := range c.s.leases {
		delete(c.open, gslot{n, i})
	}
	c.disturbed(c.s.now)
}

// disturbed notes that something disturbs the group until the real time
// until: convergence is judged from then on.
func (c *gchecker) disturbed(until time.Duration) {
	if until > c.quietFrom {
		c.quietFrom = until
		c.converged = -1
	}
}

// bound is how long after the last disturbance the group must have
// reached its fair share: the three waits that can follow one another,
// each on a clock that may run slow (a local duration d lasts up to
// d/(1−drift) in real time), plus network crossings.
//
//   - The membership: a crashed member's record drops out of every view a
//     lease duration (its TTL) after its last renewal was observed; a new
//     member's record is created at once, or one request timeout later if
//     the first attempt failed before the tail: leaseDuration + timeout.
//   - The settle time (2 × retryPeriod) after the last member joined, before
//     a member gives Leases up.
//   - Each Lease's own election, as package decide's liveness bound has it:
//     a crashed holder's claim (or a placeholder, or an unsigned empty
//     record) is waited out once, twice if a write of the crashed holder
//     lands late, plus polls, backoff, watch reconnects and timeouts:
//     2 × leaseDuration + 8 × retryPeriod + 4 × timeout. A move (the holder's
//     release: a read and a write; the taker's acquire on the watch event)
//     is a few round trips within that slack. With handover, a Lease
//     handed to an heir that dies before taking it is left alone for
//     renewDeadline more (a release signed for it); handed over in one
//     write, it is the heir's claim, waited out as a crashed holder's.
//
// The network crossings: 40 typical latencies (one crossing in the tail is
// at most 2.5 of them).
func (c *gchecker) bound() time.Duration {
	p, cfg := c.s.p, c.s.cfg
	timeout := cfg.requestTimeout()
	local := 3*p.timing.LeaseDuration + cfg.settleTime() + 8*p.timing.RetryPeriod + 5*timeout
	if p.handover {
		local += p.timing.RenewDeadline // a Lease handed to an heir that never takes it
	}
	return time.Duration(float64(local)/(1-p.drift)) + 40*p.latency
}

// tail notes convergence, after each event of the quiet tail.
func (c *gchecker) tail() {
	if c.converged < 0 && c.s.now >= c.quietFrom && c.err == nil && c.unfair() == "" {
		c.converged = c.s.now
		c.late = max(c.late, float64(c.s.now-c.quietFrom)/float64(c.bound()))
		c.s.tracef("the group is at its fair share: %s", c.shares())
	}
}

// judge fails unless the group has converged by now, the bound after the
// last disturbance.
func (c *gchecker) judge() {
	if c.converged < 0 {
		c.fail("no fair share %v after the last disturbance at %.4fs: %s (shares: %s)",
			c.bound(), c.quietFrom.Seconds(), c.unfair(), c.shares())
	}
}

// members are the nodes that are, in truth, live members: running, not
// stopping, fit, not observers; by name.
func (c *gchecker) members() []*gnode {
	var ms []*gnode
	for _, n := range c.s.nodes {
		if n.alive && !n.stopping && n.fit && !n.observer {
			ms = append(ms, n)
		}
	}
	return ms
}

// unfair says why the group is not at its fair share now, "" when it is:
// every member sees the live members, every Lease that a live member
// serves has a valid holder among those that serve it, and (balanced)
// among the members that serve the same Leases (a class: one, the whole
// group, unless the members run different lists), each holds ⌊L/M⌋ or
// ⌈L/M⌉ of the class's L Leases.
func (c *gchecker) unfair() string {
	members := c.members()
	if len(members) == 0 {
		return "no live member"
	}
	names := make([]string, len(members))
	for i, n := range members {
		names[i] = n.name
	}
	slices.Sort(names)
	for _, n := range members {
		if v := n.core.members; v == nil || !slices.Equal(v.Identities, names) {
			return fmt.Sprintf("%s's view of the members is %v, not %v", n.name, v.IDs(), names)
		}
	}
	servers := make([][]string, len(c.s.leases)) // per Lease, the live members that serve it, by name
	for i := range c.s.leases {
		for _, n := range members {
			if n.els[i] != nil {
				servers[i] = append(servers[i], n.name)
			}
		}
	}
	count := map[string]map[string]int{} // per class, per member
	size := map[string]int{}             // Leases per class
	for i, lease := range c.s.leases {
		if len(servers[i]) == 0 {
			continue // no live member serves it: nobody can hold it
		}
		t := c.holderAt(i, c.s.now)
		switch {
		case t == nil:
			return lease + " has no valid holder"
		case !slices.Contains(servers[i], t.n.name):
			return fmt.Sprintf("%s is held by %s, not a live member that serves it", lease, t.n.name)
		}
		class := strings.Join(servers[i], ",")
		if count[class] == nil {
			count[class] = map[string]int{}
		}
		count[class][t.n.name]++
		size[class]++
	}
	if c.s.p.greedy {
		return "" // every Lease held by a live member is all greedy promises
	}
	for class, l := range size {
		names := strings.Split(class, ",")
		m := len(names)
		for _, name := range names {
			if k := count[class][name]; k != l/m && k != (l+m-1)/m {
				return fmt.Sprintf("%s holds %d of the %d Leases that %v serve, not %d or %d", name, k, l, names, l/m, (l+m-1)/m)
			}
		}
	}
	return ""
}

// holderAt is the term of Lease i valid at t, nil when none is.
func (c *gchecker) holderAt(i int, t time.Duration) *gterm {
	for _, u := range slices.Backward(c.terms[i]) {
		if u.start <= t && t < u.end {
			return u
		}
	}
	return nil
}

// shares describes who holds what now.
func (c *gchecker) shares() string {
	var b strings.Builder
	for i, lease := range c.s.leases {
		h := "-"
		if t := c.holderAt(i, c.s.now); t != nil {
			h = t.n.name
		}
		fmt.Fprintf(&b, "%s:%s ", strings.TrimPrefix(lease, "orders-"), h)
	}
	return strings.TrimSpace(b.String())
}

// scaleUp notes the holders as the new members of a clean scale-up start;
// the one node must hold every Lease by then.
func (c *gchecker) scaleUp() {
	c.scaled = true
	first := c.members()[0]
	for i, lease := range c.s.leases {
		t := c.holderAt(i, c.s.now)
		if t == nil || t.n != first {
			c.fail("scale-up: %s is not held by %s before the others join (shares: %s)", lease, first.name, c.shares())
			return
		}
		c.heldAt = append(c.heldAt, t.n.name)
		c.termsAtUp = append(c.termsAtUp, len(c.terms[i]))
	}
}

// finish judges the end of the history: every converged term is still
// valid (no Lease went unheld), every live node reports each Lease's
// holder and its token, and a clean scale-up moved the fewest Leases.
func (c *gchecker) finish() {
	if c.handed != c.s.adopted {
		c.fail("%d terms began with a handover in one write, but the Machines logged %d adoptions", c.handed, c.s.adopted)
	}
	end := c.s.end
	for i, lease := range c.s.leases {
		t := c.holderAt(i, c.converged)
		if t != nil && t.end < end {
			c.fail("%s's holder %s let its term end at %.4fs, after the group reached its fair share at %.4fs", lease, t.n.name, t.end.Seconds(), c.converged.Seconds())
		}
		for _, n := range c.s.nodes {
			if n.els[i] == nil {
				continue
			}
			if r := n.els[i].report; t != nil && n.alive && !n.stopping && (r.Holder != t.n.name || r.Token != t.token) {
				c.fail("%s reports %s held by %q with token %d at the end, not by %s with token %d", n.name, lease, r.Holder, r.Token, t.n.name, t.token)
			}
		}
	}
	c.collected()
	if !c.scaled || c.err != nil {
		return
	}
	var names []string
	for _, n := range c.members() {
		names = append(names, n.name)
	}
	changes, path := 0, make([]string, len(c.s.leases))
	for i := range c.s.leases {
		prev := c.heldAt[i]
		path[i] = prev
		for _, t := range c.terms[i][c.termsAtUp[i]:] {
			if t.n.name != prev {
				changes++
				prev = t.n.name
				path[i] += "→" + prev
			}
		}
	}
	if least := fairshare.FewestMoves(names, c.heldAt); changes != least {
		c.fail("scale-up from 1 to %d members with %d Leases: %d holder changes, the fewest possible is %d (holders: %s)",
			len(names), len(c.s.leases), changes, least, strings.Join(path, " "))
	}
}
