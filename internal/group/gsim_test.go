package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/fence"
)

// gsim is a deterministic simulation of a lease group: several sidecar
// processes (nodes), each running, as group.Run does, the real decision
// core (decide.Machine) for every Lease of the group, a model of
// members.go's membership (its I/O; the record keeping, publish, nextWake,
// and wrote and sentAt, which remember the member Lease's latest writes
// and when each was sent, are members.go's own code), and loop.go's plan
// (the real Balanced, one SetCandidate in flight per Lease), against the
// in-memory gstore. One seed is one history and replays exactly.
//
// A seed draws either a faulty history or a clean scale-up. A faulty
// history has 2–6 nodes started at different times and, for a while,
// faults as package decide's simulator injects them: latency with a long
// tail, lost requests and lost answers, partitions that heal (every watch
// of the node breaks), pauses, crashes and graceful stops (most followed by
// a new process under a new identity; some not: a scale-down), scale-ups,
// health-gated candidacy leaving and rejoining the membership, watch
// streams closed by the server (a Lease's, or the member watch), clock
// offsets and rates within fence.MaxClockDrift, other objects' writes
// moving the global revision, and hand edits (a Lease deleted, emptied,
// given to a stranger, its duration shortened, an annotation; a member
// Lease deleted); in half of them the members hand their Leases over
// (Config.Handover: a graceful stop or a health step-down hands each Lease
// to its heir: in one write that names the heir as holder when the
// leaver's view has a version of the heir's member Lease, the witness, as
// group.successorFor has it; else in a release signed for the heir), and
// in a quarter every member campaigns for every Lease (greedy,
// Config.Balance false). An heir leads on a handover in one write without
// writing when the watch delivers it, dated with the send time of the
// witness that its membership remembers (elect's driver.dated), even while
// its elector is withdrawn (a balanced member: AcceptHandovers), and its
// plan withdraws it again from a Lease it leads but does not want (loop.go's
// handedUnwanted). A quiet, healthy tail follows. A clean scale-up starts
// one node, lets it take every Lease, then starts k more within a quarter
// of the settle time, on a healthy network. The checker (gchecker) judges
// every step.
//
// Declines: in a third of the faulty histories, a fault may be a release
// with a stay-out (POST /v1/leases/{lease}/release?for=D, 0.5–3 lease
// durations) asked of a live process, most often for a Lease it holds, as
// group.Election.Release does it: the member records the decline (the
// package's declines), its membership writes it on its member Lease at once
// (DeclinedAnnotation, members.go's own record, publish and nextWake), and
// the elector is handed decide.Release{StayOut} after a goroutine hand-off;
// on an observer only the latter. Once such a history has converged in its
// quiet tail, a member declines one Lease it holds for 1–2 lease durations,
// the other members must take it within a few round trips (expectTakeover),
// and the group must converge again after the stay-out. Three quarters of
// these histories have wall clocks as NTP keeps them (synced: offsets within
// a tenth of the lease duration, rates within 1±10⁻⁴); in the others, clocks
// are as in every history (offsets up to half an hour, rates drifting),
// which the members' timing of a stay-out from the record's renewTime
// (localDeclines) must make irrelevant. Not modelled: HandOver (release?to=ID, which also
// records a decline), a decline asked while the process stops, and a request
// that ends before the elector answers (its context ends).
//
// Observers: a third of the histories (faulty or clean scale-ups) run 1–2
// observer processes besides (Config.Candidate false,
// LEASEHOLD_CANDIDATE=false): every Lease's Machine, started withdrawn and
// never put in, with its watch, no member Lease, no plan. They pause, are
// cut off, crash or stop (and are mostly replaced by a new observer), have
// watches closed and may be asked to release (they write nothing: a Get at
// most). Not modelled: an observer given an identity a member had (a
// record naming it would be released by it: a write), and health-gated
// candidacy on an observer (no effect but its log).
type gsim struct {
	seed   uint64
	rng    *rand.Rand
	x      *rand.Rand // draws of declines and observers: histories with neither replay as they did before these existed
	p      gparams
	cfg    Config // the group's settings: its timings are p.timing
	base   time.Time
	now    time.Duration // real time since base
	seq    uint64
	events []gevent // pending: a heap (at, next)

	store   *gstore
	leases  []string
	index   map[string]int // a group Lease's position in leases
	nodes   []*gnode
	started int
	edits   int
	// named are the identities of the processes started; observers those
	// of the observers, whom watchers counts for their names.
	named     map[string]bool
	observers map[string]bool
	watchers  int
	declines  int  // releases with a stay-out asked (declines of members, and releases asked of observers)
	tailDone  bool // the tail's decline has been made (or there is none)
	// Handovers in one write (decide.HandedOverAnnotation): written (by
	// the leaver), adopted (the heir leads on the record without writing),
	// and observations of one by its heir that the heir could not date
	// (its membership no longer remembers, or never learnt of, the write
	// named); and Leases a balanced member's plan withdrew again from
	// because it led them without wanting them (handedUnwanted).
	handovers, adopted, undated, rewithdrawn int

	end     time.Duration // the history ends here (set once the tail is judged)
	check   *gchecker
	steps   int
	tracing bool
	trace   []string
}

// gsimMaxSteps bounds one history's Machine steps, and gsimMaxEvents its
// events (a spin of the loop or the membership steps no Machine): more
// means a spin.
const (
	gsimMaxSteps  = 3_000_000
	gsimMaxEvents = 4 * gsimMaxSteps
)

// gsimGroup is the simulated group's name.
const gsimGroup = "g"

// gparams are one history's settings, drawn from its seed.
type gparams struct {
	timing     decide.Config
	leases     int
	nodes      int           // nodes started at first
	faults     time.Duration // faults happen before this; then the quiet tail
	latency    time.Duration // typical one-way latency
	loss       float64       // chance that a request or an answer is lost
	drift      float64       // clock rates lie in [1-drift, 1+drift]
	faultEvery time.Duration // mean interval between faults

	handEdits, pauses, crashes, splits bool
	// handover: leaving members hand each Lease to its heir (Config.Handover).
	handover bool
	// greedy: every member campaigns for every Lease (Config.Balance false).
	greedy bool

	joiners int           // a clean scale-up: this many nodes join at joinAt; no faults
	joinAt  time.Duration // when they start joining

	// declines: a fault may be a release with a stay-out (a decline), and
	// a member declines a Lease once the tail has converged.
	declines bool
	// synced: wall clocks as NTP keeps them (offsets within ±leaseDuration/10,
	// rates within 1±10⁻⁴) instead of half an hour apart and drifting.
	synced bool
	// observers is how many observer processes start with the first
	// members.
	observers int
}

// gsimTimings are the timings histories draw from, as package decide's
// simulator does: client-go's defaults down to 1s/500ms/300ms.
var gsimTimings = [][3]time.Duration{
	{15 * time.Second, 10 * time.Second, 2 * time.Second},
	{5 * time.Second, 3 * time.Second, time.Second},
	{3 * time.Second, 2 * time.Second, 500 * time.Millisecond},
	{time.Second, 500 * time.Millisecond, 300 * time.Millisecond},
	{10 * time.Second, 8 * time.Second, 1500 * time.Millisecond},
}

// gnode is one sidecar process of the group.
type gnode struct {
	name  string
	clock gclock
	alive bool // running (a crash, or the end of a graceful stop, ends it)
	// observer: Config.Candidate false: no member Lease, no plan, every
	// Machine withdrawn for good (mem is nil).
	observer bool
	// stopping: told to stop (SIGTERM): the loop has returned, the
	// membership leaves, then every election stops.
	stopping bool
	fit      bool // a member, as health-gated candidacy says (Group.SetCandidate)

	pausedUntil time.Duration
	inbox       []func() // what reached it while paused, in order
	cutOffUntil time.Duration

	els []*gelection
	mem *gmember

	// loop.go's state.
	requested, inflight []bool
	left                []bool // loop.go's left: the last call asked to leave (not fit)
	loopDue             bool   // notified: a turn of the loop is queued
	loopGen             uint64 // the loop's timer
	calls               uint64
	handedAt            time.Time // HandedTo last seen, on this node's clock
}

// gelection is one Lease's election on a node: the Machine and what its
// driver (package elect) keeps.
type gelection struct {
	i       int
	m       *decide.Machine
	report  decide.Report
	wakeGen uint64
	wakeAt  time.Duration
	watch   gstream
	call    uint64        // the loop's SetCandidate under way, 0 when none
	noticed decide.Report // the last report the loop was notified of (elect's driver)
	stopped bool
	// refusing: the last SetCandidate the Machine was handed took it out
	// with RefuseHandovers (its member not fit: Elector.Leave).
	refusing bool
	// declinedUntil is the end, on the node's clock, of the last decline
	// of this Lease whose Release the Machine has been handed.
	declinedUntil time.Time
}

// gstream is one list+watch: events of an older generation are dropped,
// and a stream delivers in commit order.
type gstream struct {
	gen     uint64
	open    bool
	last    time.Duration // delivery time of its latest event
	sent    string        // resourceVersion of the Lease version it sent last ("" when none, or one was missed)
	opened  time.Duration // when its current attempt began
	backoff time.Duration // before the next attempt after a failure
}

// gmember models members.go's run loop around the real record keeping.
type gmember struct {
	m      *membership
	notify chan struct{} // m.notify: publish says the plan has something new
	busy   bool          // the run loop is blocked in a request
	cancel func()        // cancels an upkeep under way (its context ends)
	events []memberEvent // delivered by the watch while busy
	woken  bool          // a wake arrived while busy
	timer  uint64
	watch  gstream
	done   bool // run has returned (the member Lease deleted, or given up)
}

// gclock is a node's clock: it reads base+offset at real time 0 and runs
// at rate local seconds per real second.
type gclock struct {
	base   time.Time
	offset time.Duration
	rate   float64
}

func (c gclock) at(t time.Duration) time.Time {
	return c.base.Add(c.offset + time.Duration(float64(t)*c.rate))
}

// when is the first real time at which the clock reads l or later (0
// when it reads l before real time 0).
func (c gclock) when(l time.Time) time.Duration {
	if !l.After(c.at(0)) {
		return 0
	}
	t := time.Duration(float64(l.Sub(c.base)-c.offset) / c.rate)
	for c.at(t).Before(l) {
		t++
	}
	for !c.at(t - 1).Before(l) {
		t--
	}
	return t
}

type gevent struct {
	at  time.Duration
	seq uint64
	do  func()
}

func newGSim(seed uint64) *gsim {
	rng := rand.New(rand.NewPCG(seed, 0x6a5e))
	t := gsimTimings[rng.IntN(len(gsimTimings))]
	p := gparams{
		timing: decide.Config{
			Namespace: "ns", LeaseDuration: t[0], RenewDeadline: t[1], RetryPeriod: t[2],
			ReleaseOnStop: rng.IntN(4) != 0, StartWithdrawn: true,
		},
		leases:  1 + rng.IntN(12),
		latency: time.Duration(1+rng.IntN(20)) * time.Millisecond,
		drift:   0.9 * fence.MaxClockDrift(t[0], t[1]) * rng.Float64(),
	}
	if rng.IntN(5) == 0 {
		p.cleanScaleUp(1 + rng.IntN(5))
	} else {
		p.nodes = 2 + rng.IntN(5)
		p.faults = time.Duration(6+rng.IntN(8)) * p.timing.LeaseDuration
		p.loss = []float64{0, 0.01, 0.05, 0.2}[rng.IntN(4)]
		p.faultEvery = time.Duration(float64(p.timing.LeaseDuration) * (0.2 + 2*rng.Float64()))
		p.handEdits, p.pauses, p.crashes, p.splits = rng.IntN(3) != 0, rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(3) != 0
		p.handover = rng.IntN(2) == 0
		p.greedy = rng.IntN(4) == 0
	}
	x := rand.New(rand.NewPCG(seed, 0xdec1))
	if x.IntN(3) == 0 {
		p.observers = 1 + x.IntN(2)
	}
	if p.joiners == 0 && x.IntN(3) == 0 {
		p.declines = true
		if x.IntN(4) != 0 {
			p.synced = true
			p.drift = min(p.drift, 1e-4)
		}
	}
	return buildGSim(seed, rng, x, p)
}

// cleanScaleUp makes p a clean scale-up: one node, then joiners more.
func (p *gparams) cleanScaleUp(joiners int) {
	p.nodes, p.joiners = 1, joiners
	p.joinAt = 3*p.timing.LeaseDuration + 4*max(p.timing.RetryPeriod, time.Second)
	p.faults = p.joinAt + p.timing.RetryPeriod
}

func buildGSim(seed uint64, rng, x *rand.Rand, p gparams) *gsim {
	s := &gsim{
		seed: seed, rng: rng, x: x, p: p, named: map[string]bool{}, observers: map[string]bool{},
		cfg:   Config{Name: gsimGroup, Election: p.timing, Candidate: true, Balance: !p.greedy, Handover: p.handover},
		base:  time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		store: newGStore(), index: map[string]int{},
		end: math.MaxInt64,
	}
	s.store.committed = s.committed
	s.store.now = func() time.Duration { return s.now }
	for i := range p.leases {
		s.leases = append(s.leases, fmt.Sprintf("orders-%d", i))
		s.index[s.leases[i]] = i
	}
	s.check = newGChecker(s)
	// The network is healthy from p.faults on, but a request sent before
	// may still land late or time out (and a renewal that times out then
	// may end its term): up to two timeouts and a few crossings later.
	s.check.disturbed(p.faults + time.Duration(float64(2*s.cfg.requestTimeout())/(1-p.drift)) + 20*p.latency)
	if p.joiners == 0 {
		for _, name := range s.leases {
			if rng.IntN(3) == 0 { // left behind by someone long gone
				s.store.create("admin", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{
					HolderIdentity: new("gone"), LeaseDurationSeconds: new(int32(p.timing.LeaseDuration / time.Second)),
				}})
			}
		}
	}
	return s
}

// run plays the history and returns the checker's first violation.
func (s *gsim) run() error {
	for range s.p.observers {
		s.startObserver(time.Duration(s.x.Int64N(int64(s.p.timing.LeaseDuration))))
	}
	if s.p.joiners > 0 {
		s.start(0)
		s.at(s.p.joinAt, func() {
			s.check.scaleUp()
			for range s.p.joiners {
				s.start(s.now + time.Duration(s.rng.Int64N(int64(s.cfg.settleTime()/4))))
			}
		})
	} else {
		for range s.p.nodes {
			s.start(time.Duration(s.rng.Int64N(int64(s.p.timing.LeaseDuration))))
		}
		for t := s.nextFault(0); t < s.p.faults; t = s.nextFault(t) {
			s.at(t, s.fault)
		}
	}
	s.at(s.p.faults, s.judge)
	for events := 0; len(s.events) > 0 && s.check.err == nil; events++ {
		if s.events[0].at > s.end {
			break
		}
		e := s.next()
		s.now = e.at
		e.do()
		s.check.tail()
		if s.tailDone && s.end == math.MaxInt64 && s.check.converged >= 0 {
			s.end = s.now + 3*s.p.timing.LeaseDuration // converged again after the tail's decline: see that nothing moves
		}
		if s.steps > gsimMaxSteps {
			s.check.fail("more than %d steps: something spins", gsimMaxSteps)
		}
		if events > gsimMaxEvents {
			s.check.fail("more than %d events: something spins", gsimMaxEvents)
		}
	}
	if s.check.err == nil {
		s.check.finish()
	}
	return s.check.err
}

// judge judges convergence once the quiet tail has lasted the bound (a
// disturbance late in the history, such as a restart, moves that), and
// then lets the history run a while longer, to see that nothing moves.
// With declines, a member then declines a Lease (tailDecline): the group
// must converge again within the bound after the stay-out has ended, and
// the history ends a while after it has (run), to see that nothing moves.
func (s *gsim) judge() {
	if due := s.check.quietFrom + s.check.bound(); s.now < due {
		s.at(due, s.judge)
		return
	}
	s.check.judge()
	if s.p.declines && !s.tailDone && s.check.err == nil {
		s.tailDone = true
		if s.tailDecline() {
			s.at(s.now, s.judge)
			return
		}
	}
	s.end = s.now + 3*s.p.timing.LeaseDuration
}

// tailDecline: once the quiet tail has converged, a member declines one
// Lease it holds for one to two lease durations (decline), and the checker
// expects another member to take it (gchecker.expectTakeover). False when
// no member holds a Lease.
func (s *gsim) tailDecline() bool {
	var holders []*gnode
	for _, n := range s.check.members() {
		if len(s.held(n)) > 0 {
			holders = append(holders, n)
		}
	}
	if len(holders) == 0 {
		return false
	}
	n := holders[s.x.IntN(len(holders))]
	held := s.held(n)
	i := held[s.x.IntN(len(held))]
	stayOut := time.Duration((1 + s.x.Float64()) * float64(s.p.timing.LeaseDuration))
	s.check.expectTakeover(n, i, stayOut)
	s.decline(n, i, stayOut)
	return true
}

// held lists the Leases n holds a valid term of now, as the checker has it.
func (s *gsim) held(n *gnode) []int {
	var held []int
	for i := range s.leases {
		if t := s.check.holderAt(i, s.now); t != nil && t.n == n {
			held = append(held, i)
		}
	}
	return held
}

// decline is POST /v1/leases/{lease}/release?for=stayOut served by n, as
// group.Election.Release does it: a member records the decline, with its
// end on n's clock (declines.set), and pokes its membership, whose upkeep
// writes it on the member Lease at once (memberTurn); then, on a member or
// an observer, elect.Elector.Release hands the Machine decide.Release
// after a goroutine hand-off. The handler runs in the process: not while
// it is paused. Other members plan without the Lease for n while they see
// the stay-out running by their own clocks; the stay-out disturbs the
// group until it has ended on n's clock and n has written its member Lease
// without it.
func (s *gsim) decline(n *gnode, i int, stayOut time.Duration) {
	e := n.els[i]
	s.declines++
	s.in(n, func() {
		if n.stopping {
			return // not modelled: a request to a process that stops
		}
		until := n.clock.at(s.now).Add(stayOut)
		s.tracef("%s is asked to release %s and stay out of it for %v (until %s)", n.name, s.leases[i], stayOut, until.Format("15:04:05.000"))
		if n.mem != nil {
			n.mem.m.declines.set(s.leases[i], until)
			s.check.disturbed(n.clock.when(until) + s.cfg.requestTimeout())
			s.memberWake(n)
		}
		n.calls++
		id := n.calls
		s.at(s.now+s.goroutine(), func() {
			s.in(n, func() {
				if !e.stopped {
					e.declinedUntil = until
				}
				s.step(n, e, decide.Release{ID: id, StayOut: stayOut})
			})
		})
	})
}

func (s *gsim) nextFault(after time.Duration) time.Duration {
	return after + time.Duration(s.rng.ExpFloat64()*float64(s.p.faultEvery))
}

// at schedules do at real time t, not before now; events due at the same
// time run in the order they were scheduled. The queue is a binary
// min-heap on (at, seq).
func (s *gsim) at(t time.Duration, do func()) {
	s.seq++
	q := append(s.events, gevent{at: max(t, s.now), seq: s.seq, do: do})
	for i := len(q) - 1; i > 0; {
		up := (i - 1) / 2
		if !q[i].before(q[up]) {
			break
		}
		q[i], q[up] = q[up], q[i]
		i = up
	}
	s.events = q
}

// next takes the earliest event off the queue.
func (s *gsim) next() gevent {
	q := s.events
	first := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = gevent{}
	q = q[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(q) && q[l].before(q[small]) {
			small = l
		}
		if r < len(q) && q[r].before(q[small]) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	s.events = q
	return first
}

func (e gevent) before(f gevent) bool { return e.at < f.at || (e.at == f.at && e.seq < f.seq) }

func (s *gsim) tracef(format string, args ...any) {
	if s.tracing {
		s.trace = append(s.trace, fmt.Sprintf("%10.4fs ", s.now.Seconds())+fmt.Sprintf(format, args...))
	}
}

// in runs f on node n: now, or, while n is paused, once the pause ends,
// after whatever reached n before it. Nothing runs on a dead node.
func (s *gsim) in(n *gnode, f func()) {
	switch {
	case !n.alive:
	case len(n.inbox) > 0:
		n.inbox = append(n.inbox, f)
	case s.now < n.pausedUntil:
		n.inbox = []func(){f}
		s.at(n.pausedUntil, func() { s.unpause(n) })
	default:
		f()
	}
}

// unpause runs what reached n during its pause, in order, once the pause
// (which may have been extended meanwhile) is over.
func (s *gsim) unpause(n *gnode) {
	if s.now < n.pausedUntil {
		s.at(n.pausedUntil, func() { s.unpause(n) })
		return
	}
	for n.alive && len(n.inbox) > 0 {
		f := n.inbox[0]
		n.inbox = n.inbox[1:]
		f()
	}
	n.inbox = nil
}

// start starts a new member process (a new identity) at real time t.
func (s *gsim) start(t time.Duration) { s.startNode(t, false) }

// startObserver starts a new observer process at real time t.
func (s *gsim) startObserver(t time.Duration) { s.startNode(t, true) }

// startNode starts a new process (a new identity) at real time t: a
// member, or an observer (Config.Candidate false: every Machine starts
// withdrawn, as group.New has it, and no membership runs).
func (s *gsim) startNode(t time.Duration, observer bool) {
	s.check.disturbed(t)
	s.at(t, func() {
		timeout := s.cfg.requestTimeout()
		offset := time.Duration(s.rng.Int64N(int64(time.Hour))) - 30*time.Minute
		if s.p.synced {
			offset = time.Duration(float64(offset) / float64(30*time.Minute) * float64(s.p.timing.LeaseDuration/10))
		}
		n := &gnode{
			alive: true, fit: !observer, observer: observer,
			clock: gclock{
				base:   s.base,
				offset: offset,
				rate:   1 + s.p.drift*(2*s.rng.Float64()-1),
			},
			requested: make([]bool, len(s.leases)), inflight: make([]bool, len(s.leases)), left: make([]bool, len(s.leases)),
		}
		seed := s.seed << 16
		if observer {
			s.watchers++
			n.name = fmt.Sprintf("o%d", s.watchers)
			s.observers[n.name] = true
			seed ^= 0xb5e<<52 + uint64(s.watchers)<<10
		} else {
			s.started++
			n.name = fmt.Sprintf("m%d", s.started)
			seed += uint64(s.started) << 10
		}
		s.named[n.name] = true
		for i, lease := range s.leases {
			cfg := s.p.timing
			cfg.Name, cfg.Identity = lease, n.name
			if observer {
				cfg.StartWithdrawn = true // !Config.Candidate
			}
			// group.New: a balanced member's elector takes a Lease handed
			// to it even while withdrawn.
			cfg.AcceptHandovers = !observer && s.cfg.Balance
			m, err := decide.New(cfg, seed+uint64(i))
			if err != nil {
				panic(err)
			}
			n.els = append(n.els, &gelection{i: i, m: m, watch: gstream{backoff: s.p.timing.RetryPeriod}})
		}
		s.nodes = append(s.nodes, n)
		if observer {
			s.tracef("%s starts, an observer (clock rate %.4f)", n.name, n.clock.rate)
			for _, e := range n.els {
				s.step(n, e, decide.Start{})
				s.openLeaseWatch(n, e)
			}
			return
		}
		notify := make(chan struct{}, 1) // group.New: the group's notify, which the loop reads
		n.mem = &gmember{
			m: &membership{
				group: gsimGroup, identity: n.name, name: MemberLeaseName(gsimGroup, n.name),
				ttl: s.p.timing.LeaseDuration, timeout: timeout, log: slog.New(slog.DiscardHandler),
				records: map[string]memberRecord{}, declines: &declines{}, notify: notify,
			},
			notify: notify,
			watch:  gstream{backoff: timeout},
		}
		s.tracef("%s starts (clock rate %.4f)", n.name, n.clock.rate)
		for _, e := range n.els {
			s.step(n, e, decide.Start{})
			s.openLeaseWatch(n, e)
		}
		s.openMemberWatch(n)
		s.memberTurn(n)
	})
}

// step feeds one input to a Machine and carries out its output, as
// package elect's driver does; a watch's observation is dated first
// (dated).
func (s *gsim) step(n *gnode, e *gelection, input decide.Input) {
	if e.stopped {
		return
	}
	if o, ok := input.(decide.Observed); ok {
		input = s.dated(n, o)
	}
	if c, ok := input.(decide.SetCandidate); ok {
		e.refusing = !c.Candidate && c.RefuseHandovers
	}
	now := n.clock.at(s.now)
	out := e.m.Step(now, input)
	s.steps++
	for _, l := range out.Logs {
		switch l.Msg {
		case "took over the Lease handed to this instance":
			s.adopted++
			if e.refusing {
				s.check.fail("%s/%s: took over a Lease handed to it after leaving the group (RefuseHandovers)", n.name, s.leases[e.i])
			}
		case "handed the Lease over":
			s.handovers++
		}
	}
	if s.tracing {
		s.tracef("%s/%d ← %s → %s", n.name, e.i, gsimInput(input), gsimOutput(out))
	}
	if out.Fatal != nil {
		s.check.fail("%s/%s: fatal: %v", n.name, s.leases[e.i], out.Fatal)
		return
	}
	e.report = out.Report
	s.check.report(n, e.i, out.Report)
	for _, r := range out.Replies {
		if r.ID == e.call && r.ID != 0 {
			e.call = 0
			s.at(s.now+s.goroutine(), func() {
				s.in(n, func() {
					n.inflight[e.i] = false
					s.notify(n)
				})
			})
		}
	}
	if out.Request != nil {
		s.sendLease(n, e, *out.Request)
	}
	if out.AwaitHolds != 0 { // no runner holds a group's terms here
		s.at(s.now, func() { s.in(n, func() { s.step(n, e, decide.HoldsCleared{}) }) })
	}
	if out.Stopped {
		e.stopped = true
		s.tracef("%s/%d stopped", n.name, e.i)
		if !slices.ContainsFunc(n.els, func(e *gelection) bool { return !e.stopped }) {
			n.alive = false
			s.tracef("%s exits", n.name)
		}
		return
	}
	// The driver's timer waits max(Wake−now, 0): a Wake at or before now
	// (even the zero time: a term adopted while a read is due) is a Tick
	// at once.
	wakeAt := s.now
	if out.Wake.After(now) {
		wakeAt = n.clock.when(out.Wake)
	}
	if wakeAt != e.wakeAt || wakeAt <= s.now {
		e.wakeGen++
		gen := e.wakeGen
		e.wakeAt = wakeAt
		s.at(wakeAt, func() {
			if e.wakeGen == gen {
				s.in(n, func() { s.step(n, e, decide.Tick{}) })
			}
		})
	}
	if noticeable(e.noticed, out.Report) {
		e.noticed = out.Report
		s.notify(n)
	}
}

// dated is elect's driver.dated with group.New's Witnessed (the
// membership's sentAt; an observer has none): an observation of a record
// handed to n (decide.HandedOverAnnotation) gets the local time before n
// sent the write of its member Lease that the annotation names, when n's
// membership remembers that write.
func (s *gsim) dated(n *gnode, o decide.Observed) decide.Observed {
	if n.mem == nil || o.Lease == nil || o.Lease.Spec.HolderIdentity == nil || *o.Lease.Spec.HolderIdentity != n.name {
		return o
	}
	if witness := o.Lease.Annotations[decide.HandedOverAnnotation]; witness != "" {
		var ok bool
		if o.WitnessSentAt, ok = n.mem.m.sentAt(witness); !ok {
			s.undated++
		} else {
			s.check.dated(n, witness, o.WitnessSentAt)
		}
	}
	return o
}

// noticeable is elect's noticeable: whether report differs from the last
// one the loop was notified of in what the loop acts on (a change of
// Index, LeaderAddress included, of Observed, Candidate, Leading or
// ReservedFor, or FreeAt becoming zero or not zero). A renewal, or another
// holder's, is not noticeable; nor is a change of HandedOver alone.
func noticeable(last, report decide.Report) bool {
	return last.Leading != report.Leading || last.Holder != report.Holder || last.Term != report.Term ||
		last.Token != report.Token || last.LeaderAddress != report.LeaderAddress || last.Observed != report.Observed || last.Candidate != report.Candidate ||
		last.FreeAt.IsZero() != report.FreeAt.IsZero() || last.ReservedFor != report.ReservedFor
}

// goroutine is how long a hand-off between goroutines of one process
// takes: a channel send, a wake-up.
func (s *gsim) goroutine() time.Duration {
	return time.Duration(s.rng.Int64N(int64(2 * time.Millisecond)))
}

// request carries one request of n across the network: do runs at the
// store when the request lands, answer runs on n with its result, or with
// a timeout once n's clock reads deadline, whichever comes first. Either
// may be lost; a request may land after its sender gave up. The returned
// func abandons the request (its context is cancelled): no answer comes.
func (s *gsim) request(n *gnode, deadline time.Time, do func() (*coordinationv1.Lease, error), answer func(*coordinationv1.Lease, error)) (cancel func()) {
	done := false
	s.at(n.clock.when(deadline), func() {
		if !done {
			done = true
			s.in(n, func() { answer(nil, context.DeadlineExceeded) })
		}
	})
	if s.lost(n) {
		return func() { done = true }
	}
	s.at(s.now+s.latency(), func() {
		l, err := do()
		if s.lost(n) {
			return
		}
		s.at(s.now+s.latency(), func() {
			if !done && !s.lost(n) {
				done = true
				s.in(n, func() { answer(l, err) })
			}
		})
	})
	return func() { done = true }
}

// lost reports whether a message to or from n is lost now; nothing is in
// the quiet tail.
func (s *gsim) lost(n *gnode) bool {
	return s.now < n.cutOffUntil || (s.now < s.p.faults && s.p.loss > 0 && s.rng.Float64() < s.p.loss)
}

// latency is one crossing of the network: mostly near the typical
// latency, now and then longer than a request's timeout while faults
// happen; at most 2.5 times the typical latency in the quiet tail and in
// a clean scale-up.
func (s *gsim) latency() time.Duration {
	x := s.rng.ExpFloat64()
	if s.now >= s.p.faults || s.p.joiners > 0 {
		x = min(x, 2)
	} else if s.rng.IntN(100) == 0 {
		return time.Duration(float64(s.p.latency)*(0.5+x)) + time.Duration(s.rng.Int64N(int64(2*s.cfg.requestTimeout())))
	}
	return time.Duration(float64(s.p.latency) * (0.5 + x))
}

// sendLease sends an election's request, with the driver's timeout.
func (s *gsim) sendLease(n *gnode, e *gelection, req decide.Request) {
	name := s.leases[e.i]
	if n.observer && req.Verb != decide.Get {
		s.check.fail("observer %s sends a %s (%s) of %s", n.name, req.Verb, req.Purpose, name)
	}
	do := func() (*coordinationv1.Lease, error) {
		var l *coordinationv1.Lease
		var err error
		switch req.Verb {
		case decide.Get:
			l, err = s.store.get(name)
		case decide.Create:
			req.Lease.Name = name
			l, err = s.store.create(n.name, req.Lease)
		case decide.Update:
			req.Lease.Name = name
			prev := gsimHolder(s.store.objects[name])
			if l, err = s.store.update(n.name, req.Lease); err == nil && req.Purpose == decide.ReleaseSend && prev != n.name {
				s.check.fail("%s's release of %s landed on a record held by %q", n.name, name, prev)
			}
		}
		if err == nil && req.Verb != decide.Get {
			s.tracef("%s's %s of %s landed at %s", n.name, req.Purpose, name, l.ResourceVersion)
		}
		return l, err
	}
	s.request(n, n.clock.at(s.now).Add(s.cfg.requestTimeout()), do, func(l *coordinationv1.Lease, err error) {
		s.step(n, e, decide.Result{Lease: l, Err: err})
	})
}

// committed hands a commit to the watches that see it: the one Lease's
// watches of each node, or the member watches.
func (s *gsim) committed(name, rv string, l, gone *coordinationv1.Lease) {
	if w := s.store.versions[s.store.rev].writer; s.observers[w] {
		s.check.fail("observer %s wrote %s (resourceVersion %s)", w, name, rv)
	}
	if i, ok := s.index[name]; ok {
		for _, n := range s.nodes {
			e := n.els[i]
			if !n.alive || !e.watch.open || s.now < n.cutOffUntil {
				e.watch.sent = "" // missed
				continue
			}
			follows := e.watch.sent
			e.watch.sent = ""
			if l != nil {
				e.watch.sent = rv
			}
			s.push(n, &e.watch, func() { s.step(n, e, decide.Observed{Lease: l, ResourceVersion: rv, Follows: follows}) })
		}
		return
	}
	if obj := cmpOr(l, gone); obj == nil || obj.Labels[MemberLabel] != gsimGroup {
		return
	}
	ev := memberEvent{lease: l}
	if l == nil {
		ev = memberEvent{deleted: name}
	}
	for _, n := range s.nodes {
		if n.alive && n.mem != nil && n.mem.watch.open && s.now >= n.cutOffUntil {
			s.push(n, &n.mem.watch, func() { s.memberEvent(n, ev) })
		}
	}
}

func cmpOr(a, b *coordinationv1.Lease) *coordinationv1.Lease {
	if a != nil {
		return a
	}
	return b
}

// push delivers f over a watch stream, after the latency, in order. A
// cut-off stream misses the event; it breaks when the cut heals.
func (s *gsim) push(n *gnode, st *gstream, f func()) {
	gen := st.gen
	st.last = max(st.last, s.now+s.latency())
	s.at(st.last, func() {
		if st.gen == gen && st.open {
			s.in(n, f)
		}
	})
}

// openLeaseWatch lists the Lease, then watches it (package elect's
// watchLease), unless n is cut off: then the list times out and the watch
// backs off.
func (s *gsim) openLeaseWatch(n *gnode, e *gelection) {
	st := &e.watch
	st.gen++
	gen := st.gen
	st.open, st.opened = false, s.now
	s.at(s.now+2*s.latency(), func() {
		if !n.alive || st.gen != gen || e.stopped {
			return
		}
		if s.now < n.cutOffUntil {
			s.at(n.clock.when(n.clock.at(s.now).Add(s.cfg.requestTimeout())), func() {
				if st.gen == gen {
					st.open = true // so that it can break
					s.breakLeaseWatch(n, e, "list: timeout")
				}
			})
			return
		}
		l := s.store.objects[s.leases[e.i]]
		rv := fmt.Sprint(s.store.rev)
		if l != nil {
			rv = l.ResourceVersion
		}
		st.open, st.last, st.sent = true, s.now, ""
		if l != nil {
			st.sent = rv
		}
		s.in(n, func() { s.step(n, e, decide.Observed{Lease: l, ResourceVersion: rv}) })
		s.in(n, func() { s.step(n, e, decide.WatchUp{}) })
	})
}

// breakLeaseWatch ends a Lease's watch: WatchDown, then a new attempt
// after elect's backoff (doubling up to 30s, back to retryPeriod after a
// stream that lasted 30s).
func (s *gsim) breakLeaseWatch(n *gnode, e *gelection, why string) {
	st := &e.watch
	if !st.open {
		return
	}
	st.open = false
	st.gen++
	gen := st.gen
	s.tracef("%s/%d's watch breaks: %s", n.name, e.i, why)
	s.in(n, func() { s.step(n, e, decide.WatchDown{Err: errors.New(why)}) })
	if s.now-st.opened > 30*time.Second {
		st.backoff = s.p.timing.RetryPeriod
	}
	wait := st.backoff
	st.backoff = min(2*st.backoff, 30*time.Second)
	s.at(n.clock.when(n.clock.at(s.now).Add(wait)), func() {
		if st.gen == gen {
			s.openLeaseWatch(n, e)
		}
	})
}

// openMemberWatch lists the member Leases, then watches them (members.go's
// watch), unless n is cut off: then the list times out and the watch backs
// off.
func (s *gsim) openMemberWatch(n *gnode) {
	st := &n.mem.watch
	st.gen++
	gen := st.gen
	st.open = false
	s.at(s.now+2*s.latency(), func() {
		if !n.alive || st.gen != gen || n.mem.done {
			return
		}
		if s.now < n.cutOffUntil {
			s.at(n.clock.when(n.clock.at(s.now).Add(s.cfg.requestTimeout())), func() {
				if st.gen == gen {
					st.open = true
					s.breakMemberWatch(n, "list: timeout")
				}
			})
			return
		}
		items, _ := s.store.list(MemberLabel, gsimGroup)
		st.open, st.last, st.opened = true, s.now, s.now
		s.in(n, func() { s.memberEvent(n, memberEvent{list: items, listed: true}) })
	})
}

// breakMemberWatch ends the member watch; members.go lists again after a
// backoff that starts at the request timeout and doubles up to 30s, back to
// the request timeout after a stream that lasted 30s. Until the member watch is back, n's view of the membership
// decays: that counts as a disturbance.
func (s *gsim) breakMemberWatch(n *gnode, why string) {
	if n.mem == nil {
		return // an observer has none
	}
	st := &n.mem.watch
	if !st.open {
		return
	}
	st.open = false
	st.gen++
	gen := st.gen
	if s.now-st.opened > 30*time.Second {
		st.backoff = s.cfg.requestTimeout()
	}
	wait := st.backoff
	st.backoff = min(2*st.backoff, 30*time.Second)
	back := n.clock.when(n.clock.at(s.now).Add(wait))
	s.tracef("%s's member watch breaks: %s; lists again in %v", n.name, why, wait)
	s.check.disturbed(back + 4*s.p.latency)
	s.at(back, func() {
		if st.gen == gen {
			s.openMemberWatch(n)
		}
	})
}

// memberEvent hands a watch event to members.go's run loop: at once when
// it waits in its select, after the request under way when it is busy.
func (s *gsim) memberEvent(n *gnode, ev memberEvent) {
	g := n.mem
	if g.done {
		return
	}
	g.events = append(g.events, ev)
	if !g.busy {
		s.memberIdle(n)
	}
}

// memberTurn is one turn of members.go's run loop: stop, or leave or join
// as asked, create or renew the member Lease when due or when this member's
// declines (as declines.current has them now) differ from those last
// written, then publish and wait (memberIdle).
func (s *gsim) memberTurn(n *gnode) {
	g := n.mem
	m := g.m
	if g.busy || g.done || !n.alive {
		return
	}
	if n.stopping {
		s.memberStop(n)
		return
	}
	if n.fit != m.want {
		if !n.fit && m.own != nil {
			s.memberLeave(n, func() {
				m.want = false
				s.memberTurn(n)
			})
			return
		}
		m.want = n.fit
	}
	now := n.clock.at(s.now)
	declined := encodeDeclines(m.declines.current(now))
	if m.want && (m.own == nil || !now.Before(m.renewAt) || declined != m.written) {
		s.memberUpkeep(n, declined, func() { s.memberIdle(n) })
		return
	}
	s.memberIdle(n)
}

// memberIdle publishes the membership and waits in the select: for the
// next renewal or expiry, a wake, or a watch event (taken at once if one
// is waiting).
func (s *gsim) memberIdle(n *gnode) {
	g := n.mem
	m := g.m
	if g.done || !n.alive {
		return
	}
	if n.stopping {
		s.memberStop(n)
		return
	}
	now := n.clock.at(s.now)
	m.publish(now)
	select {
	case <-g.notify: // publish notified: not when only Members.Versions changed (a renewal)
		if cur := m.load(); s.tracing {
			s.tracef("%s sees members %v (joined at %s)", n.name, cur.Identities, cur.JoinedAt.Format("15:04:05.000"))
		}
		s.notify(n)
	default:
	}
	switch {
	case len(g.events) > 0:
		ev := g.events[0]
		g.events = g.events[1:]
		m.observe(now, ev)
		s.memberTurn(n)
		return
	case g.woken:
		g.woken = false
		s.memberTurn(n)
		return
	}
	g.timer++
	gen := g.timer
	s.at(n.clock.when(m.nextWake(now)), func() {
		if g.timer == gen {
			s.in(n, func() { s.memberTurn(n) })
		}
	})
}

// memberWake is membership.setMember's wake: the run loop turns now, or
// after the request under way.
func (s *gsim) memberWake(n *gnode) {
	if n.mem.busy {
		n.mem.woken = true
		return
	}
	n.mem.timer++
	s.memberTurn(n)
}

// memberCall makes one request of the membership's run loop, which blocks
// in it.
func (s *gsim) memberCall(n *gnode, deadline time.Time, do func() (*coordinationv1.Lease, error), answer func(*coordinationv1.Lease, error)) {
	g := n.mem
	g.busy = true
	g.timer++
	g.cancel = s.request(n, deadline, do, func(l *coordinationv1.Lease, err error) {
		g.busy, g.cancel = false, nil
		answer(l, err)
	})
}

// memberUpkeep is members.go's upkeep: create the member Lease (on
// AlreadyExists, read and update it) or renew it, within one timeout, with
// declined as its DeclinedAnnotation; a write that succeeded is remembered
// with the local time before the first request was sent (membership.wrote,
// which sentAt, the electors' Witnessed, reads).
func (s *gsim) memberUpkeep(n *gnode, declined string, then func()) {
	m := n.mem.m
	start := n.clock.at(s.now)
	deadline := start.Add(m.timeout)
	done := func(l *coordinationv1.Lease, err error) {
		if err != nil {
			s.tracef("%s: member Lease write failed: %v", n.name, firstLine(err.Error()))
			if m.own != nil && (apierrors.IsConflict(err) || apierrors.IsNotFound(err)) {
				m.own = nil
			}
			m.renewAt = start.Add(m.timeout)
		} else {
			m.own, m.written = l, declined
			m.wrote(l.ResourceVersion, start)
			m.renewAt = start.Add(m.ttl / 3)
			m.observe(n.clock.at(s.now), memberEvent{lease: l})
		}
		then()
	}
	// sent tells the checker when, in real time, the request that made a
	// version left.
	sent := func(l *coordinationv1.Lease, err error, at time.Duration) (*coordinationv1.Lease, error) {
		if err == nil {
			s.check.memberSent(l.ResourceVersion, at)
		}
		return l, err
	}
	update := func(base *coordinationv1.Lease) {
		body, at := m.record(start, base, declined), s.now
		s.memberCall(n, deadline, func() (*coordinationv1.Lease, error) {
			l, err := s.store.update(n.name, body)
			return sent(l, err, at)
		}, done)
	}
	if m.own != nil {
		update(m.own)
		return
	}
	body, at := m.record(start, nil, declined), s.now
	s.memberCall(n, deadline, func() (*coordinationv1.Lease, error) {
		l, err := s.store.create(n.name, body)
		return sent(l, err, at)
	}, func(l *coordinationv1.Lease, err error) {
		if !apierrors.IsAlreadyExists(err) {
			done(l, err)
			return
		}
		s.memberCall(n, deadline, func() (*coordinationv1.Lease, error) { return s.store.get(m.name) }, func(got *coordinationv1.Lease, err error) {
			if err != nil {
				done(nil, err)
				return
			}
			update(got)
		})
	})
}

// memberLeave is members.go's leave: delete the member Lease with its
// UID as precondition, within a timeout of its own.
func (s *gsim) memberLeave(n *gnode, then func()) {
	m := n.mem.m
	if m.own == nil {
		then()
		return
	}
	uid := m.own.UID
	s.memberCall(n, n.clock.at(s.now).Add(m.timeout), func() (*coordinationv1.Lease, error) {
		return nil, s.store.remove(n.name, m.name, uid)
	}, func(_ *coordinationv1.Lease, err error) {
		s.tracef("%s leaves the membership (%v)", n.name, err)
		m.own = nil
		delete(m.records, m.name)
		then()
	})
	n.mem.cancel = nil // leave's context is its own: a stop waits for it
}

// memberStop is the end of members.go's run and what group.Run does with
// it: the watch stops, and the member Lease is deleted while every election
// stops (handing its Lease to its heir with handover).
func (s *gsim) memberStop(n *gnode) {
	g := n.mem
	g.watch.gen++
	g.watch.open = false
	heirs := s.heirs(n)
	for i, e := range n.els {
		s.step(n, e, decide.Stop{To: heirs[i].Identity, Witness: heirs[i].Witness}) // elect's driver.run
	}
	s.memberLeave(n, func() { g.done = true })
}

// heirs is, with handover, whom n hands each Lease to as it leaves
// (group.successorFor, in a balanced group: Heirs), each with its witness,
// the version of its member Lease in n's view (heir); a zero Heir for each
// without.
func (s *gsim) heirs(n *gnode) []elect.Heir {
	heirs := make([]elect.Heir, len(n.els))
	if !s.p.handover {
		return heirs
	}
	members := n.mem.m.load()
	var to []string
	if s.p.greedy {
		to = make([]string, len(n.els))
		for i := range to {
			to[i] = Successor(n.name, s.leases[i], members)
		}
	} else {
		to = Heirs(n.name, n.clock.at(s.now), members, s.states(n))
	}
	for i := range heirs {
		heirs[i] = heir(members, to[i])
	}
	return heirs
}

// states is what the plan needs of n's elections now (leaseStateOf, of
// the snapshots elect's driver.publish makes of the reports).
func (s *gsim) states(n *gnode) []LeaseState {
	states := make([]LeaseState, len(n.els))
	for i, e := range n.els {
		r := e.report
		states[i] = LeaseState{Name: s.leases[i], Observed: r.Observed, Leading: r.Leading, Holder: r.Holder, FreeAt: r.FreeAt, ReservedFor: r.ReservedFor, HandedOver: r.HandedOver}
	}
	return states
}

// notify is an elector's or the membership's notify: a turn of loop.go's
// run loop follows.
func (s *gsim) notify(n *gnode) {
	if n.loopDue {
		return
	}
	n.loopDue = true
	s.at(s.now, func() {
		s.in(n, func() {
			n.loopDue = false
			s.plan(n)
		})
	})
}

// plan is loop.go's plan: the candidacy Balanced wants, asked of each
// elector whose last request differs, or that leads a Lease it is not to
// have (handed to it while withdrawn: withdrawn again), and that has no
// call under way; then the loop sleeps until Balanced's wake at the latest.
func (s *gsim) plan(n *gnode) {
	if !n.alive || n.stopping || n.observer {
		return // an observer's loop asks nothing of its electors
	}
	now := n.clock.at(s.now)
	wake := now.Add(s.p.timing.LeaseDuration)
	want := make([]bool, len(s.leases))
	ok := true
	var heirs []elect.Heir
	switch {
	case n.fit && s.p.greedy:
		for i := range want {
			want[i] = true
		}
	case n.fit:
		var next time.Time
		states := s.states(n)
		if HandedTo(n.name, states) {
			n.handedAt = now
		}
		members := n.mem.m.load()
		if want, next, ok = Balanced(n.name, now, members, states, s.cfg.settleTime(), n.handedAt); ok && next.Before(wake) {
			wake = next
		}
		if ok {
			s.check.plan(n, now, members, states, want)
		}
	default:
		heirs = s.heirs(n) // leaving the group: hand over, as on shutdown
	}
	leave := !n.fit
	for i, w := range want {
		handedUnwanted := !w && n.els[i].report.Leading
		if !ok || (w == n.requested[i] && leave == n.left[i] && !handedUnwanted) || n.inflight[i] {
			continue
		}
		if w == n.requested[i] && leave == n.left[i] {
			s.rewithdrawn++
		}
		n.requested[i], n.left[i], n.inflight[i] = w, leave, true
		n.calls++
		e, id := n.els[i], n.calls
		e.call = id
		var to elect.Heir
		if heirs != nil {
			to = heirs[i]
		}
		s.tracef("%s's plan: candidate for %s: %v (to %q, witness %q)", n.name, s.leases[i], w, to.Identity, to.Witness)
		s.at(s.now+s.goroutine(), func() {
			s.in(n, func() {
				s.step(n, e, decide.SetCandidate{ID: id, Candidate: w, Reason: "plan", To: to.Identity, Witness: to.Witness, RefuseHandovers: leave})
			})
		})
	}
	n.loopGen++
	gen := n.loopGen
	s.at(n.clock.when(wake), func() {
		if n.loopGen == gen {
			s.in(n, func() { s.plan(n) })
		}
	})
}

// live lists the nodes running and not stopping, observers included.
func (s *gsim) live() []*gnode {
	var live []*gnode
	for _, n := range s.nodes {
		if n.alive && !n.stopping {
			live = append(live, n)
		}
	}
	return live
}

// fault injects one fault, drawn among those the history allows.
func (s *gsim) fault() {
	p := s.p
	live := s.live()
	if len(live) == 0 {
		return
	}
	n := live[s.rng.IntN(len(live))]
	members := 0
	for _, m := range live {
		if !m.observer {
			members++
		}
	}
	ld := p.timing.LeaseDuration
	upTo := func(d time.Duration) time.Duration { return time.Duration(s.rng.Float64() * float64(d)) }
	// replace starts a new process for one that ended, unless (a
	// scale-down) others remain: a member for a member (always for the
	// last one), an observer for an observer.
	replace := func() {
		switch {
		case n.observer:
			if s.rng.IntN(4) != 0 {
				s.startObserver(s.now + upTo(ld))
			}
		case members == 1 || s.rng.IntN(4) != 0:
			s.start(s.now + upTo(ld))
		}
	}
	switch k := s.rng.IntN(11); {
	case k == 0 && p.handEdits:
		s.handEdit()
	case k == 1 && p.pauses:
		n.pausedUntil = max(n.pausedUntil, s.now+upTo(2*ld))
		s.tracef("%s pauses until %.4fs", n.name, n.pausedUntil.Seconds())
		s.check.disturbed(n.pausedUntil)
	case k == 2 && p.splits:
		n.cutOffUntil = max(n.cutOffUntil, s.now+upTo(2*ld))
		heal := n.cutOffUntil
		s.tracef("%s is cut off until %.4fs", n.name, heal.Seconds())
		s.check.disturbed(heal)
		s.at(heal, func() {
			if n.cutOffUntil == heal && n.alive {
				for _, e := range n.els {
					s.breakLeaseWatch(n, e, "partition healed")
				}
				s.breakMemberWatch(n, "partition healed")
			}
		})
	case k == 3 && p.crashes:
		n.alive = false
		s.tracef("%s crashes", n.name)
		s.check.crashed(n)
		replace()
	case k == 4:
		n.stopping = true
		s.tracef("%s is told to stop", n.name)
		s.check.disturbed(s.now)
		s.in(n, func() {
			if n.observer { // group.Run: the loop returns, every elector stops
				for _, e := range n.els {
					s.step(n, e, decide.Stop{})
				}
				return
			}
			if g := n.mem; g.cancel != nil && !g.done {
				g.cancel() // the upkeep's context ends: it fails at once
				g.busy, g.cancel = false, nil
				s.memberIdle(n)
			} else {
				s.memberTurn(n)
			}
		})
		replace()
	case k == 5 && members < 6:
		s.start(s.now)
	case k == 6 && n.fit:
		n.fit = false
		back := s.now + upTo(2*ld)
		s.tracef("%s's app is unhealthy: it leaves the membership until %.4fs", n.name, back.Seconds())
		s.check.disturbed(back)
		s.in(n, func() { s.memberWake(n); s.notify(n) })
		s.at(back, func() {
			n.fit = true
			s.tracef("%s's app is healthy again", n.name)
			s.in(n, func() { s.memberWake(n); s.notify(n) })
		})
	case k == 7:
		e := n.els[s.rng.IntN(len(n.els))]
		s.breakLeaseWatch(n, e, "stream closed by the server")
		s.check.disturbed(s.now)
	case k == 8:
		s.breakMemberWatch(n, "stream closed by the server")
	case k == 9:
		s.store.rev += 1 + s.rng.Int64N(50)
	case k == 10 && p.declines:
		i := s.x.IntN(len(s.leases))
		if held := s.held(n); len(held) > 0 && s.x.IntN(4) != 0 {
			i = held[s.x.IntN(len(held))]
		}
		s.decline(n, i, time.Duration((0.5+2.5*s.x.Float64())*float64(ld)))
	}
}

// handEdit changes a group Lease, or deletes a member Lease, as an admin
// would: without a precondition.
func (s *gsim) handEdit() {
	s.edits++
	s.check.disturbed(s.now)
	name := s.leases[s.rng.IntN(len(s.leases))]
	var what string
	switch s.rng.IntN(6) {
	case 0:
		what = "deletes"
		s.store.remove("admin", name, "")
	case 1:
		what = "empties the holder of"
		s.store.edit(name, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") })
	case 2:
		what = "sets leaseDurationSeconds to 1 on"
		s.store.edit(name, func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(1)) })
	case 3:
		what = "gives to a stranger"
		s.store.edit(name, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new(fmt.Sprintf("admin-%d", s.edits)) })
	case 4:
		what = "annotates"
		s.store.edit(name, func(l *coordinationv1.Lease) {
			l.Annotations = map[string]string{"example.com/note": fmt.Sprint(s.edits), fence.Annotation: l.Annotations[fence.Annotation]}
		})
	case 5:
		members, _ := s.store.list(MemberLabel, gsimGroup)
		if len(members) == 0 {
			return
		}
		name = members[s.rng.IntN(len(members))].Name
		what = "deletes the member Lease"
		s.store.remove("admin", name, "")
	}
	s.tracef("admin %s %s (rev %d)", what, name, s.store.rev)
}

func gsimInput(in decide.Input) string {
	switch in := in.(type) {
	case decide.Observed:
		if w := handedWitness(in.Lease); w != "" {
			sent := "undated"
			if !in.WitnessSentAt.IsZero() {
				sent = "sent at " + in.WitnessSentAt.Format("15:04:05.000")
			}
			return fmt.Sprintf("watch %s, handed over, witness %s %s", gsimLease(in.Lease, in.ResourceVersion), w, sent)
		}
		return "watch " + gsimLease(in.Lease, in.ResourceVersion)
	case decide.Result:
		if in.Err != nil {
			return "answer: " + firstLine(in.Err.Error())
		}
		return "answer " + gsimLease(in.Lease, "")
	case decide.SetCandidate:
		if in.To != "" {
			return fmt.Sprintf("SetCandidate(%v, to %s, witness %q)", in.Candidate, in.To, in.Witness)
		}
		return fmt.Sprintf("SetCandidate(%v)", in.Candidate)
	case decide.Release:
		return fmt.Sprintf("Release(stay out %v)", in.StayOut)
	case decide.Stop:
		if in.To != "" {
			return fmt.Sprintf("Stop(to %s, witness %q)", in.To, in.Witness)
		}
		return "Stop"
	default:
		return strings.TrimPrefix(fmt.Sprintf("%T", in), "decide.")
	}
}

func gsimOutput(out decide.Output) string {
	r := out.Report
	s := fmt.Sprintf("following %q", r.Holder)
	if r.Leading {
		s = fmt.Sprintf("LEADING token %d until %s", r.Token, r.ValidUntil.Format("15:04:05.000"))
	}
	if q := out.Request; q != nil {
		s += "; sends " + string(q.Purpose)
	}
	for _, l := range out.Logs {
		s += "; " + l.Msg
	}
	return s
}

func gsimLease(l *coordinationv1.Lease, rv string) string {
	if l == nil {
		return "missing@" + rv
	}
	return fmt.Sprintf("%s{holder %q}", l.ResourceVersion, gsimHolder(l))
}

// handedWitness is the witness a record handed over in one write names
// (decide.HandedOverAnnotation), "" for any other record.
func handedWitness(l *coordinationv1.Lease) string {
	if gsimHolder(l) == "" {
		return ""
	}
	return l.Annotations[decide.HandedOverAnnotation]
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
