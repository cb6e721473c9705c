package group

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/group/member"
)

// gsim is a deterministic simulation of a lease group: several sidecar
// processes (nodes), each running the shipped decision cores — a
// member.Machine (membership and plan) and, for every Lease it serves, a
// decide.Machine — driven as package group's and package elect's drivers
// drive them (the I/O: requests with timeouts, watch streams in commit
// order, goroutine hand-offs, timers), against the in-memory gstore. No
// decision is made here: the simulator only carries the cores' outputs
// out and feeds them their inputs. One seed is one history and replays
// exactly.
//
// A seed draws either a faulty history or a clean scale-up. A faulty
// history has 2–6 nodes started at different times (in some, all within a
// few milliseconds of each other on fresh Leases) and, for a while, faults
// as package decide's simulator injects them: latency with a long tail,
// lost requests and lost answers, partitions that heal (every watch of the
// node breaks), pauses, crashes and graceful stops (most followed by a new
// process under a new identity; some not: a scale-down), scale-ups,
// health-gated candidacy leaving and rejoining the membership, watch
// streams closed by the server (a Lease's, or the member watch), clock
// offsets and rates within fence.MaxClockDrift, other objects' writes
// moving the global revision, and hand edits (a Lease deleted, emptied,
// given to a stranger, its duration shortened, an annotation; a member
// Lease deleted (some as another member leaves, which may hand it a Lease
// it then does not want), its duration changed, a ghost member Lease that nobody
// renews with the longest duration a Lease can have). Some histories start
// with member Leases of processes long gone (leftovers), which the members
// must collect. In some, nodes run different Lease lists under the one
// group name (a prefix of the group's Leases, in another order: a rolling
// update that changes the shards). In half of them the members hand their
// Leases over (Config.Handover: a graceful stop or a health step-down
// hands each Lease to its heir, in one write when the leaver's view has a
// version of the heir's member Lease, the witness; else in a release
// signed for the heir), and in a quarter every member campaigns for every
// Lease (greedy, Config.Balance false). A quiet, healthy tail follows: it
// must converge within the checker's bound, and the history ends three
// lease durations after it has (a Lease that moves then is flapping). A
// clean scale-up starts one node, lets it take every Lease, then starts k
// more within a quarter of the settle time, on a healthy network. The
// checker (gchecker) judges every step.
//
// Declines and handovers asked by the app: in a third of the faulty
// histories, a fault may be a release with a stay-out (POST
// /v1/leases/{lease}/release?for=D, 0.5–3 lease durations) or a handover
// to a named member (release?to=ID&for=D), as group.Election.Release and
// HandOver make them: the member's core records the decline (member.Decline)
// and writes it on its member Lease, and the elector is handed
// decide.Release after a goroutine hand-off. Once such a history has
// converged in its quiet tail, a member declines one Lease it holds for 1–2
// lease durations, the other members must take it within a few round
// trips (expectTakeover), and the group must converge again after the
// stay-out. Three quarters of these histories have wall clocks as NTP
// keeps them; in the others, clocks are as in every history (offsets up to
// half an hour, rates drifting), which the members' timing of a stay-out
// from the record's renewTime must make irrelevant.
//
// Observers: a third of the histories run 1–2 observer processes besides
// (Config.Candidate false): every Lease's Machine, started withdrawn and
// never put in, with its watch, no member core. They pause, are cut off,
// crash or stop (and are mostly replaced), have watches closed and may be
// asked to release (they write nothing: a Get at most).
type gsim struct {
	seed   uint64
	rng    *rand.Rand
	x      *rand.Rand // draws of declines, observers and the newer faults
	ranks  *rand.Rand // draws of the apps' ranks (ranked): a stream of its own
	p      gparams
	cfg    Config // the group's settings: its timings are p.timing
	base   time.Time
	now    time.Duration // real time since base
	seq    uint64
	queue  []gkey   // the pending events: a heap by (at, seq)
	events []gevent // the pending events' payloads, by gkey.slot
	free   []int32  // slots of events no longer pending

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
	// and observations of one by its heir that the heir could not date;
	// Leases a balanced member's plan withdrew again from because it led
	// them without wanting them; handovers asked of a node (release?to=);
	// member Leases of departed members collected; ghosts edited in.
	handovers, adopted, undated, rewithdrawn, handOvers, collected, ghosts int

	// memberWrites are the real times of the last commit of each member
	// Lease in the store (deleted ones removed): a departed member's must
	// be collected.
	memberWrites map[string]time.Duration

	end     time.Duration // the history ends here (set once the tail has converged: settled)
	check   *gchecker
	steps   int
	tracing bool
	trace   []string
}

// gsimMaxSteps bounds one history's Machine steps, and gsimMaxEvents its
// events (a spin of a driver steps no Machine): more means a spin.
const (
	gsimMaxSteps  = 3_000_000
	gsimMaxEvents = 4 * gsimMaxSteps
)

// gsimRollbackLog begins the line a Machine logs when it takes an answer
// as a rollback of etcd's revisions: the simulated store never goes back,
// so in a group history that line is a false alarm.
const gsimRollbackLog = "the Lease went back to a version older than one already seen"

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
	// ranked: data-aware failover (Config.Rank, greedy groups only): each
	// member's app reports a rank that changes now and then (gsim.ranks).
	ranked bool
	// together: the first nodes start within a few milliseconds of each
	// other, on fresh Leases.
	together bool
	// mixed: each node runs either every Lease of the group or the first
	// short of them, in an order of its own (shuffled).
	mixed    bool
	short    int
	shuffled bool
	// leftovers: member Leases of processes long gone are there at start.
	leftovers int

	joiners int           // a clean scale-up: this many nodes join at joinAt; no faults
	joinAt  time.Duration // when they start joining

	// declines: a fault may be a release with a stay-out (a decline) or a
	// handover to a named member, and a member declines a Lease once the
	// tail has converged.
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
	// observer: Config.Candidate false: no member core, every Machine
	// withdrawn for good.
	observer bool
	// stopping: told to stop (SIGTERM).
	stopping bool
	fit      bool // a member, as health-gated candidacy says (Group.SetCandidate)

	pausedUntil time.Duration
	inbox       []func() // what reached it while paused, in order
	cutOffUntil time.Duration

	// served are the Leases it runs, by index into gsim.leases, in its
	// configured order; els its elections by that index, nil for a Lease
	// it does not serve.
	served []int
	els    []*gelection
	core   *gcore // nil for an observer
	calls  uint64 // IDs of the inputs that get Replies
}

// gcore is a member's decision core (member.Machine) and what package
// group's driver keeps around it.
type gcore struct {
	m         *member.Machine
	members   *member.Members // as last published
	writes    []member.Write  // as last published
	wakeGen   uint64
	wakeAt    time.Duration
	tick      func() // a Tick for the Machine: made once, for every wake
	watch     gstream
	stopped   bool
	notifyDue bool                // an elector notified: the loop will feed the elections' states
	lastCall  map[int]member.Call // the last Call made of each election, by local index
	states    []member.LeaseState // reused for each Step (the Machine copies it)
}

// gelection is one Lease's election on a node: the Machine and what its
// driver (package elect) keeps.
type gelection struct {
	i       int // the Lease, by index into gsim.leases
	local   int // by index into the node's served Leases
	m       *decide.Machine
	report  decide.Report
	wakeGen uint64
	wakeAt  time.Duration
	tick    func() // a Tick for the Machine: made once, for every wake
	watch   gstream
	call    uint64        // the core's Call under way, 0 when none
	noticed decide.Report // the last report the group loop was notified of (elect.Noticeable)
	stopped bool
	// refusing: the last SetCandidate the Machine was handed took it out
	// with RefuseHandovers (its member not fit: Elector.Leave).
	refusing bool
	// declinedUntil is the end, on the node's clock, of the last decline
	// of this Lease whose Release the Machine has been handed.
	declinedUntil time.Time
}

// elections are n's elections, in its configured order.
func (n *gnode) elections() []*gelection {
	out := make([]*gelection, len(n.served))
	for j, i := range n.served {
		out[j] = n.els[i]
	}
	return out
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

// gevent is one event: do, at real time at. A delivery to a node (n not
// nil) runs do on n (gsim.in), or, when core is not nil, steps n's core
// with it (gsim.inCore); and only while *gen still reads g and, when open
// is not nil, *open holds: a timer or a watch stream of n not replaced or
// broken meanwhile.
type gevent struct {
	at   time.Duration
	do   func()
	core member.Input
	n    *gnode
	gen  *uint64
	g    uint64
	open *bool
}

// gkey orders one pending event: by time, then by when it was queued.
// The queue moves keys, not the events' payloads.
type gkey struct {
	at   time.Duration
	seq  uint64
	slot int32
}

func (k gkey) before(l gkey) bool { return k.at < l.at || (k.at == l.at && k.seq < l.seq) }

// fire runs e.
func (s *gsim) fire(e *gevent) {
	switch {
	case e.n == nil:
		e.do()
	case *e.gen != e.g || (e.open != nil && !*e.open):
	case e.core != nil:
		s.inCore(e.n, e.core)
	default:
		s.in(e.n, e.do)
	}
}

func newGSim(seed uint64) *gsim {
	rng := rand.New(rand.NewPCG(seed, 0x6a5e))
	t := gsimTimings[rng.IntN(len(gsimTimings))]
	p := gparams{
		timing: decide.Config{
			Namespace: "ns", LeaseDuration: t[0], RenewDeadline: t[1], RetryPeriod: t[2],
			ReleaseOnStop: rng.IntN(4) != 0,
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
	if p.joiners == 0 {
		p.together = x.IntN(4) == 0
		if p.leases > 1 && x.IntN(4) == 0 {
			p.mixed, p.short, p.shuffled = true, 1+x.IntN(p.leases-1), x.IntN(2) == 0
		}
		if x.IntN(4) == 0 {
			p.leftovers = 1 + x.IntN(3)
		}
	}
	ranks := rand.New(rand.NewPCG(seed, 0x4a4b))
	p.ranked = p.greedy && ranks.IntN(2) == 0
	s := buildGSim(seed, rng, x, p)
	s.ranks = ranks
	return s
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
		cfg: Config{Name: gsimGroup, Election: p.timing, Candidate: true, Balance: !p.greedy, Handover: p.handover,
			Rank: p.ranked, RankPeriod: p.timing.RetryPeriod},
		base:  time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		store: newGStore(), index: map[string]int{}, memberWrites: map[string]time.Duration{},
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
	if p.joiners == 0 && !p.together {
		for _, name := range s.leases {
			if rng.IntN(3) == 0 { // left behind by someone long gone
				s.store.create("admin", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{
					HolderIdentity: new("gone"), LeaseDurationSeconds: new(int32(p.timing.LeaseDuration / time.Second)),
				}})
			}
		}
	}
	for k := range p.leftovers {
		id := fmt.Sprintf("gone-%d", k)
		d := int32(p.timing.LeaseDuration / time.Second)
		if x.IntN(2) == 0 {
			d = math.MaxInt32
		}
		s.store.create("admin", s.ghostLease(id, d))
	}
	return s
}

// ghostLease is a member Lease for identity as a member writes it, with
// duration d, serving every Lease: one that nobody renews.
func (s *gsim) ghostLease(identity string, d int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: member.LeaseName(gsimGroup, identity), Labels: map[string]string{member.Label: gsimGroup},
			Annotations: map[string]string{member.ServesAnnotation: member.EncodeServes(s.leases)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new(identity), LeaseDurationSeconds: new(d)},
	}
}

// run plays the history and returns the checker's first violation.
func (s *gsim) run() error {
	for range s.p.observers {
		s.startObserver(time.Duration(s.x.Int64N(int64(s.p.timing.LeaseDuration))))
	}
	switch {
	case s.p.joiners > 0:
		s.start(0)
		s.at(s.p.joinAt, func() {
			s.check.scaleUp()
			for range s.p.joiners {
				s.start(s.now + time.Duration(s.rng.Int64N(int64(s.cfg.settleTime()/4))))
			}
		})
	default:
		spread := int64(s.p.timing.LeaseDuration)
		if s.p.together {
			spread = int64(3 * time.Millisecond)
		}
		for range s.p.nodes {
			s.start(time.Duration(s.rng.Int64N(spread)))
		}
		for t := s.nextFault(0); t < s.p.faults; t = s.nextFault(t) {
			s.at(t, s.fault)
		}
	}
	s.at(s.p.faults, s.judge)
	for events := 0; len(s.queue) > 0 && s.check.err == nil; events++ {
		if s.queue[0].at > s.end {
			break
		}
		e := s.next()
		s.now = e.at
		s.fire(&e)
		s.check.tail()
		if s.end == math.MaxInt64 && s.check.converged >= 0 {
			s.settled()
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

// judge fails the history unless its quiet tail has converged within the
// bound after the last disturbance (a disturbance late in the history,
// such as a restart, moves that); once it has converged, run ends the
// history (settled) and judge has nothing left to judge.
func (s *gsim) judge() {
	switch due := s.check.quietFrom + s.check.bound(); {
	case s.end != math.MaxInt64:
	case s.now < due:
		s.at(due, s.judge)
	default:
		s.check.judge()
	}
}

// settled is run's, when the quiet tail has just converged: the history
// ends three lease durations later, to see that nothing moves. With
// declines, a member first declines a Lease (tailDecline), once: the group
// must converge again within the bound after the stay-out has ended
// (judge), and the history ends three lease durations after it has.
func (s *gsim) settled() {
	if s.p.declines && !s.tailDone {
		s.tailDone = true
		if s.tailDecline() {
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
	s.decline(n, i, stayOut, "")
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
// group.Election.Release does it: a member's core takes the decline
// (member.Decline, with its end on n's clock), which its member Lease then
// carries; then, on a member or an observer, elect.Elector.Release hands
// the Machine decide.Release after a goroutine hand-off. The handler runs
// in the process: not while it is paused. Other members plan without the
// Lease for n while they see the stay-out running by their own clocks;
// the stay-out disturbs the group until it has ended on n's clock and n
// has written its member Lease without it. With to set, it is
// release?to=…: group.Election.HandOver, handed to that member if n's
// view has it live and serving the Lease (with its member Lease's version
// as witness), else nothing.
func (s *gsim) decline(n *gnode, i int, stayOut time.Duration, to string) {
	e := n.els[i]
	if e == nil {
		return
	}
	s.declines++
	s.in(n, func() {
		if n.stopping {
			return // not modelled: a request to a process that stops
		}
		var heir member.Heir
		if to != "" {
			members := n.core.members
			if to == n.name || !slices.Contains(members.IDs(), to) || !members.ServedBy(to, s.leases[i]) {
				return // ErrUnknownSuccessor: nothing released
			}
			heir = member.Heir{Identity: to, Witness: members.Versions[to]}
			s.handOvers++
		}
		until := n.clock.at(s.now).Add(stayOut)
		s.tracef("%s is asked to release %s to %q and stay out of it for %v (until %s)", n.name, s.leases[i], to, stayOut, until.Format("15:04:05.000"))
		if n.core != nil {
			s.check.disturbed(n.clock.when(until) + s.cfg.requestTimeout())
			s.coreStep(n, member.Decline{Lease: s.leases[i], Until: until})
		}
		n.calls++
		id := n.calls
		s.at(s.now+s.goroutine(), func() {
			s.in(n, func() {
				if !e.stopped {
					e.declinedUntil = until
				}
				s.step(n, e, decide.Release{ID: id, StayOut: stayOut, To: heir.Identity, Witness: heir.Witness})
			})
		})
	})
}

// start starts a new member process (a new identity) at real time t.
func (s *gsim) start(t time.Duration) { s.startNode(t, false) }

// startObserver starts a new observer process at real time t.
func (s *gsim) startObserver(t time.Duration) { s.startNode(t, true) }

// startNode starts a new process (a new identity) at real time t: a
// member, or an observer (Config.Candidate false: every Machine starts
// withdrawn, as group.New has it, and no member core runs). A member of a
// history with mixed lists runs, half the time, only the first p.short
// Leases; with shuffled lists, in an order of its own.
func (s *gsim) startNode(t time.Duration, observer bool) {
	s.check.disturbed(t)
	s.at(t, func() {
		offset := time.Duration(s.rng.Int64N(int64(time.Hour))) - 30*time.Minute
		if s.p.synced {
			offset = time.Duration(float64(offset) / float64(30*time.Minute) * float64(s.p.timing.LeaseDuration/10))
		}
		n := &gnode{
			alive: true, fit: !observer, observer: observer,
			clock: gclock{base: s.base, offset: offset, rate: 1 + s.p.drift*(2*s.rng.Float64()-1)},
			els:   make([]*gelection, len(s.leases)),
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
		served := len(s.leases)
		if s.p.mixed && !observer && s.x.IntN(2) == 0 {
			served = s.p.short
		}
		for i := range served {
			n.served = append(n.served, i)
		}
		if s.p.shuffled && !observer {
			s.x.Shuffle(len(n.served), func(a, b int) { n.served[a], n.served[b] = n.served[b], n.served[a] })
		}
		gc := s.cfg
		gc.Election.Identity, gc.Candidate = n.name, !observer
		for _, i := range n.served {
			gc.Leases = append(gc.Leases, s.leases[i])
		}
		for local, i := range n.served {
			m, err := decide.New(gc.electionConfig(s.leases[i]), seed+uint64(i)) // as group.New has it
			if err != nil {
				panic(err)
			}
			e := &gelection{i: i, local: local, m: m, watch: gstream{backoff: s.p.timing.RetryPeriod}}
			e.tick = func() { s.step(n, e, decide.Tick{}) }
			n.els[i] = e
		}
		s.nodes = append(s.nodes, n)
		s.tracef("%s starts (observer %v, serves %v, clock rate %.4f)", n.name, observer, n.served, n.clock.rate)
		for _, e := range n.elections() {
			s.step(n, e, decide.Start{})
			s.openLeaseWatch(n, e)
		}
		if observer {
			return
		}
		m, err := member.New(gc.memberConfig())
		if err != nil {
			panic(err)
		}
		n.core = &gcore{m: m, watch: gstream{backoff: s.cfg.requestTimeout()}, lastCall: map[int]member.Call{}}
		n.core.tick = func() { s.coreStep(n, member.Tick{}) }
		s.coreStep(n, member.Start{})
		s.openMemberWatch(n)
		if s.p.ranked {
			s.rankChange(n)
		}
	})
}

// rankChange has n's app report a rank, as the rank prober does every
// probe period: now and then a new one (a few generations, positions that
// collide now and then), or none (the probe failed); the generation goes
// to every election (Group.SetRank). It repeats while n lives.
func (s *gsim) rankChange(n *gnode) {
	if !n.alive || n.stopping {
		return
	}
	var r member.Rank
	if s.ranks.IntN(5) != 0 {
		r = member.Rank{Known: true, Generation: fmt.Sprintf("h%d", s.ranks.IntN(3)), Position: int64(s.ranks.IntN(8))}
	}
	s.in(n, func() {
		for _, e := range n.elections() {
			s.step(n, e, decide.SetGeneration{Generation: r.Generation})
		}
		s.coreStep(n, member.SetRank{Rank: r, ObservedAt: n.clock.at(s.now)})
	})
	every := s.p.timing.RetryPeriod * time.Duration(1+s.ranks.IntN(6))
	s.at(s.now+every, func() { s.rankChange(n) })
}

// step feeds one input to an election's Machine and carries out its
// output, as package elect's driver does; a watch's observation is dated
// first (dated).
func (s *gsim) step(n *gnode, e *gelection, input decide.Input) {
	if e.stopped {
		return
	}
	if o, ok := input.(decide.Observed); ok {
		if o, changed := s.dated(n, o); changed {
			input = o // boxed again only when dated: most observations are not
		}
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
		if strings.HasPrefix(l.Msg, gsimRollbackLog) {
			s.check.fail("%s/%s: reports that the Lease went back to an older version, which no store of this history does (%v)", n.name, s.leases[e.i], l.Args)
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
			s.callDone(n, e)
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
		if e.call != 0 { // the call under way returns elect.ErrStopped
			e.call = 0
			s.callDone(n, e)
		}
		s.exitIfDone(n)
		return
	}
	s.wake(n, &e.wakeGen, &e.wakeAt, now, out.Wake, e.tick)
	if elect.Noticeable(e.noticed, out.Report) {
		e.noticed = out.Report
		s.notify(n)
	}
}

// wake schedules tick at the real time n's clock reads at, as a driver's
// timer does: max(at−now, 0), so a Wake at or before now is a Tick at
// once. A newer wake (gen) replaces it.
func (s *gsim) wake(n *gnode, gen *uint64, wakeAt *time.Duration, now, at time.Time, tick func()) {
	when := s.now
	if at.After(now) {
		when = n.clock.when(at)
	}
	if when != *wakeAt || when <= s.now {
		*gen++
		*wakeAt = when
		s.schedule(gevent{at: when, do: tick, n: n, gen: gen, g: *gen})
	}
}

// exitIfDone ends n once every election and its core have stopped.
func (s *gsim) exitIfDone(n *gnode) {
	for _, e := range n.elections() {
		if !e.stopped {
			return
		}
	}
	if n.core != nil && !n.core.stopped {
		return
	}
	n.alive = false
	s.tracef("%s exits", n.name)
}

// dated is elect's driver.dated with group.New's Witnessed (member.SentAt
// over the writes the core published; an observer has none): an
// observation of a record handed to n (decide.HandedOverAnnotation) gets
// the local time before n sent the write of its member Lease that the
// annotation names, when n's core remembers that write. changed reports
// whether o was dated.
func (s *gsim) dated(n *gnode, o decide.Observed) (_ decide.Observed, changed bool) {
	if n.core == nil || o.Lease == nil || o.Lease.Spec.HolderIdentity == nil || *o.Lease.Spec.HolderIdentity != n.name {
		return o, false
	}
	if witness := o.Lease.Annotations[decide.HandedOverAnnotation]; witness != "" {
		var ok bool
		if o.WitnessSentAt, ok = member.SentAt(n.core.writes, witness); !ok {
			s.undated++
		} else {
			s.check.dated(n, witness, o.WitnessSentAt)
		}
		return o, ok
	}
	return o, false
}

// goroutine is how long a hand-off between goroutines of one process
// takes: a channel send, a wake-up.
func (s *gsim) goroutine() time.Duration {
	return time.Duration(s.rng.Int64N(int64(2 * time.Millisecond)))
}
func (s *gsim) nextFault(after time.Duration) time.Duration {
	return after + time.Duration(s.rng.ExpFloat64()*float64(s.p.faultEvery))
}

// at schedules do at real time t, not before now; events due at the same
// time run in the order they were scheduled. The queue is a binary
// min-heap on (at, seq).
func (s *gsim) at(t time.Duration, do func()) { s.schedule(gevent{at: t, do: do}) }

// schedule queues e at e.at, not before now, after the events queued
// before it for that time.
func (s *gsim) schedule(e gevent) {
	s.seq++
	e.at = max(e.at, s.now)
	var slot int32
	if n := len(s.free); n > 0 {
		slot, s.free = s.free[n-1], s.free[:n-1]
		s.events[slot] = e
	} else {
		slot = int32(len(s.events))
		s.events = append(s.events, e)
	}
	q := append(s.queue, gkey{at: e.at, seq: s.seq, slot: slot})
	for i := len(q) - 1; i > 0; {
		up := (i - 1) / 2
		if !q[i].before(q[up]) {
			break
		}
		q[i], q[up] = q[up], q[i]
		i = up
	}
	s.queue = q
}

// next takes the earliest event off the queue.
func (s *gsim) next() gevent {
	q := s.queue
	first := q[0]
	last := len(q) - 1
	q[0] = q[last]
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
	s.queue = q
	e := s.events[first.slot]
	s.events[first.slot] = gevent{} // nothing kept alive past its event
	s.free = append(s.free, first.slot)
	return e
}

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

// inCore steps n's core with in, as in runs it.
func (s *gsim) inCore(n *gnode, in member.Input) {
	if n.alive && len(n.inbox) == 0 && s.now >= n.pausedUntil {
		s.coreStep(n, in) // at once: no closure
		return
	}
	s.in(n, func() { s.coreStep(n, in) })
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
		if err == nil && req.Verb != decide.Get && s.tracing { // tracing: no boxing of the arguments otherwise
			s.tracef("%s's %s of %s landed at %s", n.name, req.Purpose, name, l.ResourceVersion)
		}
		return l, err
	}
	s.request(n, n.clock.at(s.now).Add(s.cfg.requestTimeout()), do, func(l *coordinationv1.Lease, err error) {
		s.step(n, e, decide.Result{Lease: l, Err: err})
	})
}

// committed hands a commit to the watches that see it: the one Lease's
// watches of each node that serves it, or the member watches; and keeps
// the time of each member Lease's last commit.
func (s *gsim) committed(name, rv string, l, gone *coordinationv1.Lease) {
	if v, _ := s.store.versions.at(s.store.rev); s.observers[v.writer] {
		s.check.fail("observer %s wrote %s (resourceVersion %s)", v.writer, name, rv)
	}
	if i, ok := s.index[name]; ok {
		for _, n := range s.nodes {
			e := n.els[i]
			if e == nil {
				continue
			}
			if !n.alive || !e.watch.open || s.now < n.cutOffUntil {
				e.watch.sent = "" // missed
				continue
			}
			follows := e.watch.sent
			e.watch.sent = ""
			if l != nil {
				e.watch.sent = rv
			}
			s.push(n, &e.watch, gevent{do: func() { s.step(n, e, decide.Observed{Lease: l, ResourceVersion: rv, Follows: follows}) }})
		}
		return
	}
	if obj := cmpOr(l, gone); obj == nil || obj.Labels[member.Label] != gsimGroup {
		return
	}
	var in member.Input = member.Changed{Lease: l}
	if l == nil {
		in = member.Deleted{Name: name}
		delete(s.memberWrites, name)
	} else {
		s.memberWrites[name] = s.now
	}
	for _, n := range s.nodes {
		if n.alive && n.core != nil && n.core.watch.open && s.now >= n.cutOffUntil {
			s.push(n, &n.core.watch, gevent{core: in})
		}
	}
}

// openMemberWatch lists the member Leases, then watches them (the group
// driver's watch), unless n is cut off: then the list times out and the
// watch backs off.
func (s *gsim) openMemberWatch(n *gnode) {
	st := &n.core.watch
	st.gen++
	gen := st.gen
	st.open = false
	s.at(s.now+2*s.latency(), func() {
		if !n.alive || st.gen != gen || n.core.stopped {
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
		items, _ := s.store.list(member.Label, gsimGroup)
		st.open, st.last, st.opened = true, s.now, s.now
		s.in(n, func() { s.coreStep(n, member.Listed{Items: items}) })
	})
}

// breakMemberWatch ends the member watch; the driver lists again after a
// backoff that starts at the request timeout and doubles up to 30s, back
// to the request timeout after a stream that lasted 30s (elect.WatchLeases).
// Until the member watch is back, n's view of the membership decays: that
// counts as a disturbance.
func (s *gsim) breakMemberWatch(n *gnode, why string) {
	if n.core == nil {
		return // an observer has none
	}
	st := &n.core.watch
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

// coreStep feeds one input to n's member core and carries out its output,
// with the elections' latest states, as package group's driver does:
// publish Members and Writes, stop every
// election with its heir on Heirs, make the Calls (each after a goroutine
// hand-off, answered by CandidacyDone), send the Request, wake at Wake.
func (s *gsim) coreStep(n *gnode, in member.Input) {
	c := n.core
	if c == nil || c.stopped || !n.alive {
		return
	}
	now := n.clock.at(s.now)
	out := c.m.Step(now, s.states(n), in)
	s.steps++
	if s.tracing {
		s.tracef("%s/core ← %s → %s", n.name, gsimCoreInput(in), gsimCoreOutput(out))
	}
	if out.Writes != nil {
		c.writes = out.Writes
	}
	if out.Members != nil {
		c.members = out.Members
	}
	s.collected += out.Collected
	if out.Heirs != nil {
		for j, e := range n.elections() { // group.Run: the electors stop, each handing its Lease to its heir
			h := out.Heirs[j]
			s.step(n, e, decide.Stop{To: h.Identity, Witness: h.Witness})
		}
	}
	for _, call := range out.Calls {
		s.call(n, call)
	}
	if out.Request != nil {
		s.memberRequest(n, *out.Request)
	}
	if out.Stopped {
		c.stopped = true
		s.tracef("%s's core stopped", n.name)
		s.exitIfDone(n)
		return
	}
	s.wake(n, &c.wakeGen, &c.wakeAt, now, out.Wake, c.tick)
}

// call makes one candidacy change of an election, as the group driver's
// call goroutine does: elect.Elector.SetCandidate, or Leave with the heir,
// handed to the election's loop after a goroutine hand-off; its Reply (or
// the election's end) returns it (callDone). The checker holds a balanced
// member's plan to its declines.
func (s *gsim) call(n *gnode, c member.Call) {
	e := n.elections()[c.Lease]
	last, seen := n.core.lastCall[c.Lease]
	if seen && !c.Candidate && !c.Leave && !last.Candidate && !last.Leave {
		s.rewithdrawn++ // led, though not wanted: withdrawn again
	}
	n.core.lastCall[c.Lease] = c
	s.check.call(n, e.i, c)
	n.calls++
	id := n.calls
	e.call = id
	in := decide.SetCandidate{ID: id, Candidate: c.Candidate, Reason: c.Reason}
	if c.Leave {
		in = decide.SetCandidate{ID: id, Reason: c.Reason, To: c.To.Identity, Witness: c.To.Witness, RefuseHandovers: true}
	}
	if s.tracing { // no boxing of the arguments otherwise
		s.tracef("%s's plan: %s %v (leave %v, to %q, witness %q)", n.name, s.leases[e.i], c.Candidate, c.Leave, c.To.Identity, c.To.Witness)
	}
	s.at(s.now+s.goroutine(), func() {
		s.in(n, func() {
			if e.stopped {
				if e.call == id {
					e.call = 0
					s.callDone(n, e)
				}
				return
			}
			s.step(n, e, in)
		})
	})
}

// callDone returns the call under way on e to n's core, after a goroutine
// hand-off.
func (s *gsim) callDone(n *gnode, e *gelection) {
	s.at(s.now+s.goroutine(), func() {
		s.inCore(n, member.CandidacyDone{Lease: e.local})
	})
}

// memberRequest carries out a member Lease request of n's core, with the
// driver's timeout; the checker learns when each write left.
func (s *gsim) memberRequest(n *gnode, req member.Request) {
	at := s.now
	do := func() (*coordinationv1.Lease, error) {
		var l *coordinationv1.Lease
		var err error
		switch req.Verb {
		case member.Create:
			l, err = s.store.create(n.name, req.Lease)
		case member.Get:
			l, err = s.store.get(req.Name)
		case member.Update:
			l, err = s.store.update(n.name, req.Lease)
		case member.Delete:
			var uid, rv string
			if p := req.Preconditions; p != nil {
				if p.UID != nil {
					uid = string(*p.UID)
				}
				if p.ResourceVersion != nil {
					rv = *p.ResourceVersion
				}
			}
			err = s.store.removeIf(n.name, req.Name, uid, rv)
		}
		if err == nil && (req.Verb == member.Create || req.Verb == member.Update) {
			s.check.memberSent(l.ResourceVersion, at)
		}
		if err == nil && req.Purpose == member.PurposeCollect {
			s.tracef("%s collects the member Lease %s", n.name, req.Name)
		}
		return l, err
	}
	s.request(n, n.clock.at(s.now).Add(s.cfg.requestTimeout()), do, func(l *coordinationv1.Lease, err error) {
		s.coreStep(n, member.Result{Lease: l, Err: err})
	})
}

// states are n's elections' states, in its configured order (the group
// driver's states of its snapshot).
func (s *gsim) states(n *gnode) []member.LeaseState {
	out := n.core.states[:0]
	for _, i := range n.served {
		r := n.els[i].report
		out = append(out, member.LeaseState{Name: s.leases[i], Observed: r.Observed, Leading: r.Leading, Holder: r.Holder, FreeAt: r.FreeAt,
			ReservedFor: r.ReservedFor, HandedOver: r.HandedOver, Generation: r.Generation})
	}
	n.core.states = out
	return out
}

// notify is an elector's Notify: the group driver's loop takes it, after
// a goroutine hand-off, and steps the core.
func (s *gsim) notify(n *gnode) {
	c := n.core
	if c == nil || c.notifyDue {
		return
	}
	c.notifyDue = true
	s.at(s.now+s.goroutine(), func() {
		s.in(n, func() {
			c.notifyDue = false
			s.coreStep(n, member.Tick{})
		})
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
		s.check.disturbed(n.pausedUntil + s.aftermath())
	case k == 2 && p.splits:
		n.cutOffUntil = max(n.cutOffUntil, s.now+upTo(2*ld))
		heal := n.cutOffUntil
		s.tracef("%s is cut off until %.4fs", n.name, heal.Seconds())
		s.check.disturbed(heal + s.aftermath())
		s.at(heal, func() {
			if n.cutOffUntil == heal && n.alive {
				for _, e := range n.elections() {
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
		if p.handEdits && s.x.IntN(4) == 0 {
			s.deleteAnotherMemberLease(n)
		}
		n.stopping = true
		s.tracef("%s is told to stop", n.name)
		s.check.disturbed(s.now)
		s.in(n, func() {
			if n.observer { // group.Run: the electors stop
				for _, e := range n.elections() {
					s.step(n, e, decide.Stop{})
				}
				return
			}
			s.coreStep(n, member.Stop{}) // the core names the heirs, the electors stop
		})
		replace()
	case k == 5 && members < 6:
		s.start(s.now)
	case k == 6 && n.fit:
		n.fit = false
		back := s.now + upTo(2*ld)
		s.tracef("%s's app is unhealthy: it leaves the membership until %.4fs", n.name, back.Seconds())
		s.check.disturbed(back)
		s.in(n, func() { s.coreStep(n, member.SetFit{Fit: false, Reason: "app unhealthy"}) })
		s.at(back, func() {
			n.fit = true
			s.tracef("%s's app is healthy again", n.name)
			s.in(n, func() { s.coreStep(n, member.SetFit{Fit: true, Reason: "app healthy"}) })
		})
	case k == 7:
		e := n.elections()[s.rng.IntN(len(n.served))]
		s.breakLeaseWatch(n, e, "stream closed by the server")
		s.check.disturbed(s.now)
	case k == 8:
		s.breakMemberWatch(n, "stream closed by the server")
	case k == 9:
		s.store.rev += 1 + s.rng.Int64N(50)
	case k == 10 && p.declines:
		i := n.served[s.x.IntN(len(n.served))]
		if held := s.held(n); len(held) > 0 && s.x.IntN(4) != 0 {
			i = held[s.x.IntN(len(held))]
		}
		stayOut := time.Duration((0.5 + 2.5*s.x.Float64()) * float64(ld))
		var to string
		if n.core != nil && s.x.IntN(3) == 0 { // release?to=: a live member, as n sees the group
			if ids := n.core.members.IDs(); len(ids) > 0 {
				to = ids[s.x.IntN(len(ids))]
			}
			if s.x.IntN(2) == 0 {
				stayOut = 0
			}
		}
		s.decline(n, i, stayOut, to)
	}
}

// aftermath is how long a member that was paused or cut off for longer
// than its TTL may take to be a member again in every view, its own
// included, once it runs and reaches the apiserver again: a renewal that
// times out or conflicts (its last write landed unanswered), the create,
// read and update that write it afresh, and the settle time after it
// joins again.
func (s *gsim) aftermath() time.Duration {
	return time.Duration(float64(2*s.cfg.requestTimeout()+s.cfg.settleTime())/(1-s.p.drift)) + 8*s.p.latency
}

// handEdit changes a group Lease, or a member Lease, as an admin would:
// without a precondition.
// deleteAnotherMemberLease deletes, by hand, the member Lease of a member
// other than leaver, just before leaver is told to stop: leaver's view
// still counts it and may name it heir, while it, once it has seen its
// member Lease gone, has withdrawn from every Lease, and is handed one it
// does not want (member.Machine's plan withdraws it again).
func (s *gsim) deleteAnotherMemberLease(leaver *gnode) {
	members, _ := s.store.list(member.Label, gsimGroup)
	members = slices.DeleteFunc(members, func(l coordinationv1.Lease) bool {
		return l.Name == member.LeaseName(gsimGroup, leaver.name)
	})
	if len(members) == 0 {
		return
	}
	s.edits++
	name := members[s.x.IntN(len(members))].Name
	s.store.remove("admin", name, "")
	s.tracef("admin deletes the member Lease %s as %s leaves (rev %d)", name, leaver.name, s.store.rev)
}

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
		members, _ := s.store.list(member.Label, gsimGroup)
		switch k := s.x.IntN(3); {
		case k == 0 || len(members) == 0:
			s.ghosts++
			ghost := s.ghostLease(fmt.Sprintf("ghost-%d", s.edits), math.MaxInt32)
			name, what = ghost.Name, "creates a ghost member Lease"
			if _, err := s.store.create("admin", ghost); err != nil {
				return
			}
		case k == 1:
			name = members[s.rng.IntN(len(members))].Name
			what = "deletes the member Lease"
			s.store.remove("admin", name, "")
		default:
			// Until its member next writes it (a renewal, or a fresh one
			// after the conflict), the others judge the member by the
			// edited duration, and it judges itself so: the group moves
			// until that write, and the settle time after it.
			s.check.disturbed(s.now + time.Duration(float64(s.p.timing.LeaseDuration/3)/(1-s.p.drift)) + s.aftermath())
			name = members[s.rng.IntN(len(members))].Name
			d := []int32{1, math.MaxInt32}[s.x.IntN(2)]
			what = fmt.Sprintf("sets leaseDurationSeconds to %d on the member Lease", d)
			s.store.edit(name, func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(d) })
		}
	}
	s.tracef("admin %s %s (rev %d)", what, name, s.store.rev)
}

func gsimCoreInput(in member.Input) string {
	switch in := in.(type) {
	case member.Listed:
		return fmt.Sprintf("listed %d member Leases", len(in.Items))
	case member.Changed:
		return "member Lease " + gsimLease(in.Lease, "")
	case member.Result:
		if in.Err != nil {
			return "answer: " + firstLine(in.Err.Error())
		}
		return "answer " + gsimLease(in.Lease, "")
	default:
		return strings.TrimPrefix(fmt.Sprintf("%T%+v", in, in), "member.")
	}
}

func gsimCoreOutput(out member.Output) string {
	var parts []string
	if out.Members != nil {
		parts = append(parts, fmt.Sprintf("members %v", out.Members.Identities))
	}
	if len(out.Calls) > 0 {
		parts = append(parts, fmt.Sprintf("calls %+v", out.Calls))
	}
	if out.Heirs != nil {
		parts = append(parts, fmt.Sprintf("heirs %+v", out.Heirs))
	}
	if q := out.Request; q != nil {
		parts = append(parts, "sends "+string(q.Purpose))
	}
	for _, l := range out.Logs {
		parts = append(parts, l.Msg)
	}
	return strings.Join(parts, "; ")
}

func cmpOr(a, b *coordinationv1.Lease) *coordinationv1.Lease {
	if a != nil {
		return a
	}
	return b
}

// push delivers e (its do or its core input) over a watch stream of n,
// after the latency, in order. A cut-off stream misses the event; it
// breaks when the cut heals.
func (s *gsim) push(n *gnode, st *gstream, e gevent) {
	st.last = max(st.last, s.now+s.latency())
	e.at, e.n, e.gen, e.g, e.open = st.last, n, &st.gen, st.gen, &st.open
	s.schedule(e)
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
