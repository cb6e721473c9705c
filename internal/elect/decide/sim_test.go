package decide

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/fence"
)

// sim is a deterministic simulation of several instances of the real
// decision core (Machine) electing over one Lease in the in-memory store,
// driven by a seeded scheduler. One seed is one history; replaying a seed
// replays it exactly. It injects, at random: network latency with a long
// tail, lost requests and lost answers (seen by the instance as a timeout;
// a request may also land after its timeout), partitions of one instance
// that heal, watch streams that break, process pauses, crashes and
// restarts under a new identity, graceful stops, clock rate drift within
// the documented bound and constant clock offsets, releases and
// withdrawals asked by the app, other objects' writes moving the global
// revision, and hand edits of the Lease (delete, empty, shorten the
// duration, change the holder, touch an annotation). The checker judges
// every step.
//
// Every instance also writes its member Lease, another object in the same
// store, now and then (memberWrite), and its driver remembers when it
// sent each of those writes whose answer came back. A leaver that hands
// the Lease over cites, most of the time, one of its successor's member
// Lease writes that had committed when it was told to leave (it observed
// it): a handover in one write (HandedOverAnnotation), which the successor
// adopts without writing when it can date it (Observed.WitnessSentAt).
// Some histories run with Config.AcceptHandovers; half of them, drawn
// apart, with Config.FencingFloor (the checker judges every term-starting
// write's floor).
//
// A history draws its faults from one of two mixes (simMix): the default
// one, or the stress mix, whose faults come several times as often, half
// of them handovers in one write, often to a successor that is briefly
// out of the election, with many lost answers and late watch events, and,
// in a third of its histories, etcd restored from a snapshot (restore).
type sim struct {
	seed   uint64
	rng    *rand.Rand
	params simParams
	// ranks draws the apps' generations (SetGeneration): a stream of its
	// own, so that the histories of the other draws stay those of their
	// seeds.
	ranks *rand.Rand
	base  time.Time     // real time 0
	now   time.Duration // real time since base
	seq   uint64
	queue eventQueue

	store     *store
	instances []*instance
	nextID    int
	adminSeq  int

	end   time.Duration // the history ends here
	probe *probe        // the quiet tail's recovery probe, once started

	snapshots []snapshot // the store's latest snapshots, oldest first (histories with restores)

	// witnesses are the member Lease writes committed: resourceVersion →
	// its writer and the writer's local time before it sent it.
	witnesses map[string]memberWrite
	handovers int // one-write handovers that landed

	check   *checker
	tracing bool     // record the trace (replays of a failed seed do)
	trace   []string // the history, one line per step, when tracing
	steps   int
}

// maxSteps bounds one history, and maxStepsPerInstant the steps of one
// instance at one real instant: a Machine that asks to be woken again and
// again without doing anything would spin the simulation (and a real CPU).
// Each step's Output.Wake must also be after the step's local time (and
// so not the zero time): plan has done at the step whatever was due then.
const (
	maxSteps           = 200000
	maxStepsPerInstant = 1000
)

// simParams are one history's settings, drawn from its seed.
type simParams struct {
	timing                             Config
	instances                          int
	duration                           time.Duration // faults happen in [0, duration); a quiet tail follows
	quiet                              time.Duration // the quiet tail: no faults, no loss, short latencies
	latency                            time.Duration // typical one-way latency
	loss                               float64       // probability that a request or answer is lost
	drift                              float64       // clock rates lie in [1-drift, 1+drift]
	faultEvery                         time.Duration // mean interval between injected faults
	handEdits, pauses, crashes, splits bool
	memberEvery                        time.Duration // mean interval between an instance's member Lease writes

	// The stress mix's (see simParams.stress).
	mix      simMix
	watchLag bool // now and then a watch event comes late, and all that follow it
	restores bool // etcd is restored from a snapshot now and then (sim.restore)
}

// memberWrite is a write of an instance's member Lease, as committed: the
// witness a leaver may cite when it hands the Lease over to it.
type memberWrite struct {
	by     *instance
	sentAt time.Time // on its writer's clock
}

// memberAnswer is the answer to an instance's member Lease write, fed to
// its driver (not to its Machine) in order with the Machine's inputs: from
// then on the driver knows when it sent that write.
type memberAnswer struct {
	rv     string
	sentAt time.Time
}

func (memberAnswer) isInput() {}

// told is what an instance's Machine was last told by the app, as it
// stepped it: the checker holds it to it.
type told struct {
	withdrawn    bool
	refusing     bool      // withdrawn with RefuseHandovers
	stayOutUntil time.Time // local
	stopping     bool
}

// probe measures recovery in the quiet tail: the leader releases and stays
// out, and the answer to the first acquire that lands after that is lost.
// A successor must lead within the checker's probeBound of the release
// (a timeout, one retry period and a few round trips), not a lease duration
// later: that is how a lost acquire answer is recovered.
type probe struct {
	at         time.Duration // the Release
	releaser   *instance
	releasedAt time.Duration // the signed release landed; 0 until then
	loseAnswer bool          // the next acquire that lands loses its answer
}

// instance is one simulated sidecar process: a Machine, its clock, its
// network and its watch.
type instance struct {
	id       int
	identity string
	m        *Machine
	offset   time.Duration // local clock at real time 0, minus base
	rate     float64       // local seconds per real second
	alive    bool
	stopping bool

	pausedUntil time.Duration
	inbox       []Input // inputs that arrived while paused, in order
	cutOffUntil time.Duration

	instant      time.Duration // the real time of its last step
	instantSteps int           // its steps at that instant

	reqSeq    uint64 // the request outstanding, 0 when none
	reqSent   time.Duration
	wakeGen   uint64
	wakeAt    time.Duration // when the Tick of wakeGen is due
	watchGen  uint64        // the watch stream's generation: events of older streams are dropped
	watchOpen bool
	lastWatch time.Duration // delivery time of the watch's last event: a stream keeps order
	watchLast string        // resourceVersion of the version the stream sent last ("" after a deletion or a missed event)

	candidate    bool          // the app wants it in the election (SetCandidate)
	stayOutUntil time.Duration // real time its last Release's stay-out ends
	told         told
	report       Report

	seen        fence.Token            // the largest resourceVersion its Machine was given (its token floor)
	handedFloor map[string]fence.Token // handovers to it its watch delivered → seen just before the first delivery

	members  []string             // resourceVersions of its member Lease writes that committed (and were not undone by a restore), in order
	answered map[string]time.Time // its driver's: member Lease writes answered → local send time
}

// local is the instance's clock reading at real time t.
func (in *instance) local(base time.Time, t time.Duration) time.Time {
	return base.Add(in.offset + time.Duration(float64(t)*in.rate))
}

// real is the first real time at which the instance's clock reads l or
// later.
func (in *instance) real(base time.Time, l time.Time) time.Duration {
	t := time.Duration(math.Ceil(float64(l.Sub(base)-in.offset) / in.rate))
	for in.local(base, t).Before(l) {
		t++
	}
	for t > 0 && !in.local(base, t-1).Before(l) {
		t--
	}
	return t
}

type event struct {
	at  time.Duration
	seq uint64
	do  func()
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || (q[i].at == q[j].at && q[i].seq < q[j].seq)
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// timings the simulator draws from: each within every rule.
var simTimings = []struct{ lease, renew, retry time.Duration }{
	{15 * time.Second, 10 * time.Second, 2 * time.Second}, // client-go's defaults
	{5 * time.Second, 3 * time.Second, time.Second},
	{3 * time.Second, 2 * time.Second, 500 * time.Millisecond},
	{time.Second, 500 * time.Millisecond, 300 * time.Millisecond},
	{10 * time.Second, 8 * time.Second, 1500 * time.Millisecond},
}

// newSim draws the history of seed under the fault mix mix.
func newSim(seed uint64, mix simMix) *sim {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	t := simTimings[rng.IntN(len(simTimings))]
	p := simParams{
		timing: Config{
			Namespace: "ns", Name: "lease",
			LeaseDuration: t.lease, RenewDeadline: t.renew, RetryPeriod: t.retry,
			ReleaseOnStop:   rng.IntN(4) != 0,
			AcceptHandovers: rng.IntN(3) == 0,
		},
		instances:  2 + rng.IntN(3),
		duration:   time.Duration(6+rng.IntN(8)) * t.lease,
		latency:    time.Duration(1+rng.IntN(20)) * time.Millisecond,
		loss:       []float64{0, 0.01, 0.05, 0.2}[rng.IntN(4)],
		drift:      0.9 * fence.MaxClockDrift(t.lease, t.renew) * rng.Float64(),
		faultEvery: time.Duration(float64(t.lease) * (0.2 + 2*rng.Float64())),
		handEdits:  rng.IntN(3) != 0,
		pauses:     rng.IntN(2) == 0,
		crashes:    rng.IntN(2) == 0,
		splits:     rng.IntN(3) != 0,
		// A member Lease renews every retryPeriod; less often here, to
		// keep histories cheap: a leaver's witness is then up to a few
		// retry periods old, and some heirs cannot adopt for want of
		// validity left.
		memberEvery: time.Duration(1+rng.IntN(4)) * t.retry,
	}
	if mix == stressMix {
		p.stress(rng)
	}
	ranks := rand.New(rand.NewPCG(seed, 0x4a4b))
	p.timing.PublishGeneration = ranks.IntN(2) == 0
	// The fencing floor is drawn from a stream of its own too: it changes
	// the writes' annotations, never their timing.
	p.timing.FencingFloor = rand.New(rand.NewPCG(seed, 0xf100)).IntN(2) == 0
	s := &sim{
		seed:   seed,
		rng:    rng,
		ranks:  ranks,
		params: p,
		base:   time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		store:  newStore("ns", "lease"),

		witnesses: map[string]memberWrite{},
	}
	s.check = newChecker(s)
	// The network is healthy only in the quiet tail, long enough to judge
	// liveness in.
	s.check.disturbed(p.duration)
	s.params.quiet = s.check.livenessBound() + 4*t.lease
	s.store.watchers = append(s.store.watchers, s.broadcast)
	if rng.IntN(3) == 0 { // a Lease left behind by someone else
		holder := "gone"
		s.store.create("admin", &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: new(int32(t.lease / time.Second)),
		}})
	}
	return s
}

// run plays the whole history and returns the checker's first violation,
// if any.
func (s *sim) run() error {
	for range s.params.instances {
		s.startInstance(time.Duration(s.rng.Int64N(int64(s.params.timing.LeaseDuration))))
	}
	fault := s.fault
	if s.params.mix == stressMix {
		fault = s.stressFault
	}
	for t := s.nextFaultTime(0); t < s.params.duration; t = s.nextFaultTime(t) {
		s.at(t, fault)
	}
	if s.params.restores {
		s.at(0, s.takeSnapshots)
	}
	s.end = s.params.duration + s.params.quiet
	s.at(s.params.duration, s.quietTail) // every fault is in
	for s.queue.Len() > 0 && s.check.err == nil {
		e := heap.Pop(&s.queue).(event)
		if e.at > s.end {
			break
		}
		s.now = e.at
		e.do()
		if s.store.peak != 0 && s.store.rev > s.store.peak {
			s.check.caughtUp()
		}
		if s.steps > maxSteps {
			s.check.fail("more than %d steps: an instance spins", maxSteps)
		}
	}
	if s.check.err == nil {
		s.check.finish(s.end)
	}
	return s.check.err
}

// startProbe starts the recovery probe: the leader releases and stays out.
func (s *sim) startProbe() {
	for in, t := range s.check.open {
		if t.end > s.now && in.alive {
			s.probe = &probe{at: s.now, releaser: in, loseAnswer: true}
			s.tracef("probe: %s releases and stays out; the next acquire to land loses its answer", in.identity)
			s.deliver(in, Release{ID: s.seq, StayOut: time.Hour})
			return
		}
	}
	// No leader: finish reports the liveness failure.
}

func (s *sim) nextFaultTime(after time.Duration) time.Duration {
	return after + time.Duration(s.rng.ExpFloat64()*float64(s.params.faultEvery))
}

// at schedules do at real time t (never before now).
func (s *sim) at(t time.Duration, do func()) {
	s.seq++
	heap.Push(&s.queue, event{at: max(t, s.now), seq: s.seq, do: do})
}

func (s *sim) tracef(format string, args ...any) {
	if s.tracing {
		s.trace = append(s.trace, fmt.Sprintf("%10.4fs ", s.now.Seconds())+fmt.Sprintf(format, args...))
	}
}

// startInstance starts a fresh instance (a new process: a new identity) at
// real time t.
func (s *sim) startInstance(t time.Duration) {
	s.at(t, func() {
		s.nextID++
		cfg := s.params.timing
		cfg.Identity = fmt.Sprintf("i%d", s.nextID)
		m, err := New(cfg, s.seed*1000+uint64(s.nextID))
		if err != nil {
			panic(err)
		}
		in := &instance{
			id: s.nextID, identity: cfg.Identity, m: m, alive: true, candidate: true,
			offset:   time.Duration(s.rng.Int64N(int64(time.Hour))) - 30*time.Minute,
			rate:     1 + s.params.drift*(2*s.rng.Float64()-1),
			answered: map[string]time.Time{}, handedFloor: map[string]fence.Token{},
		}
		s.instances = append(s.instances, in)
		s.tracef("%s starts (clock rate %.4f)", in.identity, in.rate)
		s.deliver(in, Start{})
		s.openWatch(in)
		s.memberWrite(in)
	})
}

// memberWrite has the instance write its member Lease now, unless it is
// paused, and again about every memberEvery while it runs. The write takes
// a resourceVersion of the store; it and its answer cross the network like
// the Lease's requests (they may be lost, or the instance cut off), and
// the driver learns the write's send time only from its answer.
func (s *sim) memberWrite(in *instance) {
	if !in.alive {
		return
	}
	s.at(s.now+time.Duration((0.5+s.rng.Float64())*float64(s.params.memberEvery)), func() { s.memberWrite(in) })
	s.rankChange(in)
	if s.now < in.pausedUntil || s.lost(in) {
		return
	}
	sentAt := in.local(s.base, s.now)
	s.at(s.now+s.latency(), func() {
		rv := s.store.otherWrite(in.identity)
		s.witnesses[rv] = memberWrite{by: in, sentAt: sentAt}
		in.members = append(in.members, rv)
		if s.lost(in) {
			return
		}
		s.at(s.now+s.latency(), func() {
			if !s.lost(in) {
				s.deliver(in, memberAnswer{rv: rv, sentAt: sentAt})
			}
		})
	})
}

// rankChange, now and then, has the app of in report a new generation of
// its data (or none: its rank probe failed), as data-aware failover feeds
// it with every probe; it changes what a leader writes on the record, and
// nothing of its safety.
func (s *sim) rankChange(in *instance) {
	if s.ranks.IntN(3) != 0 {
		return
	}
	gen := ""
	if k := s.ranks.IntN(4); k > 0 {
		gen = fmt.Sprintf("h%d", k)
	}
	s.deliver(in, SetGeneration{Generation: gen})
}

// witnessFor picks the witness a leaver cites for its handover to to: one
// of to's member Lease writes committed by now, which the leaver has thus
// observed; mostly the latest, now and then an older one. A quarter of the
// time none (a signed release reserved for to, the old way). A successor
// that is no instance, or has no write yet, gets another instance's write
// now and then: nobody can date it.
func (s *sim) witnessFor(to string) string {
	if to == "" || s.rng.IntN(4) == 0 {
		return ""
	}
	var writes []string
	for _, in := range s.instances {
		if in.identity == to {
			writes = in.members
		}
	}
	if len(writes) == 0 {
		if other := s.instances[s.rng.IntN(len(s.instances))]; len(other.members) > 0 && s.rng.IntN(2) == 0 {
			return other.members[len(other.members)-1]
		}
		return ""
	}
	if s.rng.IntN(4) == 0 {
		return writes[s.rng.IntN(len(writes))]
	}
	return writes[len(writes)-1]
}

// deliver feeds input to the instance now or, in arrival order, when its
// pause ends.
func (s *sim) deliver(in *instance, input Input) {
	if !in.alive {
		return
	}
	if s.now < in.pausedUntil || len(in.inbox) > 0 {
		if len(in.inbox) == 0 {
			s.at(in.pausedUntil, func() { s.resume(in) })
		}
		in.inbox = append(in.inbox, input)
		return
	}
	s.step(in, input)
}

// resume feeds a paused instance what arrived meanwhile, once its pause
// (which may have been extended) ends.
func (s *sim) resume(in *instance) {
	if s.now < in.pausedUntil {
		s.at(in.pausedUntil, func() { s.resume(in) })
		return
	}
	for len(in.inbox) > 0 && in.alive {
		input := in.inbox[0]
		in.inbox = in.inbox[1:]
		s.step(in, input)
	}
	in.inbox = nil
}

// step feeds one input to the instance's Machine now and carries out its
// output.
func (s *sim) step(in *instance, input Input) {
	now := in.local(s.base, s.now)
	switch i := input.(type) {
	case memberAnswer: // for the driver, not the Machine
		in.answered[i.rv] = i.sentAt
		s.tracef("%s's member Lease write %s answered", in.identity, i.rv)
		return
	case Observed:
		// The driver dates a handover to this instance by the write it
		// cites, if it got that write's answer.
		if w := handedWitness(i.Lease); w != "" && holderOf(i.Lease) == in.identity {
			i.WitnessSentAt = in.answered[w]
			input = i
			if _, ok := in.handedFloor[i.Lease.ResourceVersion]; !ok {
				in.handedFloor[i.Lease.ResourceVersion] = in.seen
			}
		}
	case SetCandidate:
		in.told.withdrawn = !i.Candidate
		in.told.refusing = !i.Candidate && i.RefuseHandovers
	case Release:
		in.told.stayOutUntil = now.Add(i.StayOut)
	case Stop:
		in.told.stopping = true
	}
	in.seeInput(input)
	out := in.m.Step(now, input)
	s.steps++
	if in.instant != s.now {
		in.instant, in.instantSteps = s.now, 0
	}
	in.instantSteps++
	if s.tracing {
		s.tracef("%s ← %s → %s", in.identity, describeInput(input), describeOutput(out))
	}
	switch {
	case out.Fatal != nil:
		s.check.fail("%s: fatal: %v", in.identity, out.Fatal)
		return
	case in.instantSteps > maxStepsPerInstant:
		s.check.fail("%s stepped more than %d times at one instant: it spins", in.identity, maxStepsPerInstant)
		return
	case !out.Stopped && out.Wake.IsZero():
		s.check.fail("%s asked to be woken at the zero time (after %s)", in.identity, describeInput(input))
		return
	case !out.Stopped && !out.Wake.After(now):
		s.check.fail("%s asked to be woken at %s, not after its step at %s (after %s): nothing is left to do then",
			in.identity, out.Wake.Format("15:04:05.000000"), now.Format("15:04:05.000000"), describeInput(input))
		return
	}
	in.report = out.Report
	s.check.observe(in, out.Report)
	if out.Request != nil {
		s.send(in, *out.Request)
	}
	if out.AwaitHolds != 0 {
		// A runner stops its command and lets go of its hold, or does not
		// (the Machine then waits until validity ends).
		if s.rng.IntN(2) == 0 {
			s.at(s.now+time.Duration(s.rng.Int64N(int64(s.params.timing.RenewDeadline))), func() { s.deliver(in, HoldsCleared{}) })
		}
	}
	if out.Stopped {
		in.alive = false
		s.tracef("%s stopped", in.identity)
		return
	}
	wakeAt := in.real(s.base, out.Wake)
	if wakeAt == in.wakeAt && wakeAt > s.now {
		return // that Tick is already due
	}
	in.wakeGen++
	gen := in.wakeGen
	in.wakeAt = wakeAt
	s.at(wakeAt, func() {
		if in.wakeGen == gen {
			s.deliver(in, Tick{})
		}
	})
}

// seeInput notes the largest resourceVersion in is given to in's Machine:
// the Machine's own floor for the tokens of its terms.
func (in *instance) seeInput(input Input) {
	switch i := input.(type) {
	case Observed:
		rv := i.ResourceVersion
		if i.Lease != nil {
			rv = i.Lease.ResourceVersion
		}
		in.seen = max(in.seen, tokenOf(rv))
	case Result:
		if i.Lease != nil {
			in.seen = max(in.seen, tokenOf(i.Lease.ResourceVersion))
		}
	}
}

// send carries a request across the network: it may be lost, land late,
// or lose its answer; the instance times out by its own clock.
func (s *sim) send(in *instance, req Request) {
	s.seq++
	id := s.seq
	in.reqSeq, in.reqSent = id, s.now
	floor := in.seen
	timeout := max(s.params.timing.RetryPeriod, time.Second)
	s.at(in.real(s.base, in.local(s.base, s.now).Add(timeout)), func() {
		if in.reqSeq == id {
			in.reqSeq = 0
			s.deliver(in, Result{Err: context.DeadlineExceeded})
		}
	})
	if s.lost(in) {
		return
	}
	s.at(s.now+s.latency(), func() {
		answer := s.apply(in, req, floor)
		if p := s.probe; p != nil && p.loseAnswer && req.Purpose == Acquire && answer.Err == nil {
			p.loseAnswer = false
			s.tracef("probe: %s's acquire answer is lost", in.identity)
			return
		}
		if s.lost(in) {
			return
		}
		s.at(s.now+s.latency(), func() {
			if in.reqSeq == id && !s.lost(in) {
				in.reqSeq = 0
				s.deliver(in, answer)
			}
		})
	})
}

// apply performs req at the store, as the instance's write, sent when
// the largest resourceVersion its Machine had been given was floor.
func (s *sim) apply(in *instance, req Request, floor fence.Token) Result {
	var l *coordinationv1.Lease
	var err error
	switch req.Verb {
	case Get:
		l, err = s.store.get()
	case Create:
		l, err = s.store.create(in.identity, req.Lease)
	case Update:
		prev := holderOf(s.store.lease)
		l, err = s.store.update(in.identity, req.Lease)
		if err == nil && req.Purpose == ReleaseSend && prev != in.identity && !s.check.inUnsafe(s.now) {
			s.check.fail("%s's release landed on a record held by %q", in.identity, prev)
		}
	}
	if err == nil && req.Verb != Get {
		s.store.versions[s.store.latest].floor = floor
		s.tracef("%s's %s landed at %s: holder %q", in.identity, req.Purpose, l.ResourceVersion, holderOf(l))
		if req.Purpose == Acquire || req.Purpose == ReleaseSend && holderOf(l) != "" {
			s.check.floorWrite(in.identity, s.store.versions[s.store.latest])
		}
		if req.Purpose == ReleaseSend && holderOf(l) != "" {
			s.handovers++
			s.handedOver(holderOf(l))
		}
		s.landed()
	}
	return Result{Lease: l, Err: err}
}

// lost reports whether a message to or from in is lost now. The network is
// healthy in the quiet tail.
func (s *sim) lost(in *instance) bool {
	return s.now < in.cutOffUntil || (s.now < s.params.duration && s.rng.Float64() < s.params.loss)
}

// latency is one network crossing: usually near the typical latency, now
// and then much longer (longer than a request timeout, so a write may land
// after its sender gave up). In the quiet tail it is at most 2.5 times the
// typical latency.
func (s *sim) latency() time.Duration {
	if s.now >= s.params.duration {
		return time.Duration(float64(s.params.latency) * (0.5 + min(s.rng.ExpFloat64(), 2)))
	}
	d := time.Duration(float64(s.params.latency) * (0.5 + s.rng.ExpFloat64()))
	if s.rng.IntN(100) == 0 {
		d += time.Duration(s.rng.Int64N(int64(2 * max(s.params.timing.RetryPeriod, time.Second))))
	}
	return d
}

// openWatch lists and watches: the list's observation, then WatchUp, after
// one round trip, unless the instance is cut off (then it retries).
func (s *sim) openWatch(in *instance) {
	in.watchGen++
	gen := in.watchGen
	in.watchOpen = false
	s.at(s.now+2*s.latency(), func() {
		if !in.alive || in.watchGen != gen {
			return
		}
		if s.now < in.cutOffUntil {
			s.at(max(in.cutOffUntil, s.now+s.params.timing.RetryPeriod), func() {
				if in.watchGen == gen {
					s.openWatch(in)
				}
			})
			return
		}
		l, _ := s.store.get()
		rv := fmt.Sprint(s.store.rev)
		if l != nil {
			rv = l.ResourceVersion
		}
		in.watchOpen, in.lastWatch, in.watchLast = true, s.now, ""
		if l != nil {
			in.watchLast = rv
		}
		s.deliver(in, Observed{Lease: l, ResourceVersion: rv})
		s.deliver(in, WatchUp{})
	})
}

// breakWatch ends the instance's watch stream: WatchDown, then a new list
// and watch after a backoff.
func (s *sim) breakWatch(in *instance, why string) {
	if !in.watchOpen {
		return
	}
	in.watchOpen = false
	in.watchGen++
	gen := in.watchGen
	s.tracef("%s's watch breaks: %s", in.identity, why)
	s.deliver(in, WatchDown{Err: fmt.Errorf("%s", why)})
	s.at(s.now+s.params.timing.RetryPeriod+time.Duration(s.rng.Int64N(int64(s.params.timing.RetryPeriod))), func() {
		if in.watchGen == gen {
			s.openWatch(in)
		}
	})
}

// broadcast sends a committed change to every open watch, in commit order.
func (s *sim) broadcast(ev watchEvent) {
	if p := s.probe; p != nil && p.releasedAt == 0 && releasedBy(ev.lease) == p.releaser.identity {
		p.releasedAt = s.now
	}
	for _, in := range s.instances {
		if !in.alive || !in.watchOpen || s.now < in.cutOffUntil {
			in.watchLast = "" // a cut-off stream misses it; it breaks when the cut heals
			continue
		}
		gen := in.watchGen
		in.lastWatch = max(in.lastWatch, s.now+s.latency()+s.watchLag())
		follows := in.watchLast
		in.watchLast = ""
		if ev.lease != nil {
			in.watchLast = ev.rv
		}
		s.at(in.lastWatch, func() {
			if in.watchGen == gen && in.watchOpen {
				s.deliver(in, Observed{Lease: ev.lease, ResourceVersion: ev.rv, Follows: follows})
			}
		})
	}
}

// fault injects one fault, chosen at random among those this history
// allows.
func (s *sim) fault() {
	p := s.params
	live := s.live()
	switch k := s.rng.IntN(10); {
	case k == 0 && p.handEdits:
		s.handEdit()
	case k == 1 && p.pauses && len(live) > 0:
		in := live[s.rng.IntN(len(live))]
		d := time.Duration(s.rng.Float64() * 2 * float64(p.timing.LeaseDuration))
		in.pausedUntil = max(in.pausedUntil, s.now+d)
		s.tracef("%s pauses for %v", in.identity, d)
		s.check.disturbed(in.pausedUntil)
	case k == 2 && p.splits && len(live) > 0:
		in := live[s.rng.IntN(len(live))]
		d := time.Duration(s.rng.Float64() * 2 * float64(p.timing.LeaseDuration))
		in.cutOffUntil = max(in.cutOffUntil, s.now+d)
		s.tracef("%s is cut off for %v", in.identity, d)
		s.check.disturbed(in.cutOffUntil)
		heal := in.cutOffUntil
		s.at(heal, func() {
			if in.cutOffUntil == heal {
				s.breakWatch(in, "partition healed")
			}
		})
	case k == 3 && p.crashes && len(live) > 0:
		in := live[s.rng.IntN(len(live))]
		in.alive = false
		s.tracef("%s crashes", in.identity)
		s.check.crashed(in)
		s.startInstance(s.now + time.Duration(s.rng.Int64N(int64(p.timing.LeaseDuration))))
	case k == 4 && len(live) > 0:
		in := live[s.rng.IntN(len(live))]
		to := s.successor(in)
		s.stop(in, to, s.witnessFor(to))
	case k == 5 && len(live) > 0:
		in := live[s.rng.IntN(len(live))]
		to := s.successor(in)
		s.release(in, to, s.witnessFor(to))
	case k == 6 && len(live) > 0:
		in := live[s.rng.IntN(len(live))]
		to := s.successor(in)
		s.withdraw(in, to, s.witnessFor(to))
	case k == 7 && len(live) > 0:
		s.breakWatch(live[s.rng.IntN(len(live))], "stream closed by the server")
	case k == 8:
		s.store.bump(1 + s.rng.Int64N(50))
	case k == 9 && len(live) > 1:
		s.rebalance(live)
	}
}

// stop tells in to stop, handing the Lease over to to (with witness, in
// one write), and starts a new instance to replace it.
func (s *sim) stop(in *instance, to, witness string) {
	p := s.params
	in.stopping = true
	s.tracef("%s is told to stop (handing over to %q, witness %q)", in.identity, to, witness)
	s.deliver(in, Stop{To: to, Witness: witness})
	s.startInstance(s.now + time.Duration(s.rng.Int64N(int64(p.timing.LeaseDuration))))
	s.check.disturbed(s.now + p.timing.RenewDeadline + s.handoverWait(to))
}

// release has the app ask in to release, handing the Lease over to to
// (with witness, in one write), and stay out for up to a lease duration.
func (s *sim) release(in *instance, to, witness string) {
	s.releaseFor(in, to, witness, time.Duration(s.rng.Float64()*float64(s.params.timing.LeaseDuration)))
}

// releaseFor has the app ask in to release, handing the Lease over to to
// (with witness, in one write), and stay out for stay (on its clock).
func (s *sim) releaseFor(in *instance, to, witness string, stay time.Duration) {
	in.stayOutUntil = s.now + time.Duration(float64(stay)/in.rate) + time.Millisecond
	s.deliver(in, Release{ID: s.seq, StayOut: stay, To: to, Witness: witness})
	s.check.disturbed(max(in.stayOutUntil, s.now+s.handoverWait(to)))
}

// withdraw has the app take in out of the election, handing the Lease
// over to to (with witness, in one write), and put it back within a lease
// duration. Half the time the withdrawal refuses handovers, as a lease
// group's member whose app is unhealthy does (Elector.Leave).
func (s *sim) withdraw(in *instance, to, witness string) {
	s.withdrawFor(in, to, witness, s.rng.IntN(2) == 0, s.params.timing.LeaseDuration)
}

// withdrawFor has the app take in out of the election, refusing handovers
// or not, handing the Lease over to to (with witness, in one write), and
// put it back within upTo.
func (s *sim) withdrawFor(in *instance, to, witness string, refuse bool, upTo time.Duration) {
	in.candidate = false
	s.deliver(in, SetCandidate{ID: s.seq, Candidate: false, Reason: "app unhealthy", To: to, Witness: witness, RefuseHandovers: refuse})
	back := s.now + time.Duration(s.rng.Float64()*float64(upTo))
	s.check.disturbed(max(back, s.now+s.handoverWait(to)))
	s.at(back, func() {
		in.candidate = true
		s.deliver(in, SetCandidate{ID: s.seq, Candidate: true, Reason: "app healthy"})
	})
}

// rebalance moves the Lease as a lease group's planner does (handOverTo).
// With AcceptHandovers, half the time the heir is withdrawn first (the
// Lease is outside its member's share until it holds it).
func (s *sim) rebalance(live []*instance) {
	var withdraw func(*instance)
	if s.params.timing.AcceptHandovers {
		withdraw = func(heir *instance) { s.withdraw(heir, "", "") }
	}
	s.handOverTo(live, "rebalance", withdraw)
}

// handOverTo has the instance that reports leading hand the Lease over to
// another live one, citing that one's latest member Lease write that has
// committed (now and then an older one), by a release, a withdrawal or a
// stop; half the time, when out is not nil, out takes the heir out of the
// election first.
func (s *sim) handOverTo(live []*instance, why string, out func(heir *instance)) {
	var leader *instance
	for _, in := range live {
		if in.report.Leading {
			leader = in
		}
	}
	if leader == nil {
		return
	}
	heir := live[s.rng.IntN(len(live))]
	if heir == leader || len(heir.members) == 0 {
		return
	}
	witness := heir.members[len(heir.members)-1]
	if s.rng.IntN(4) == 0 {
		witness = heir.members[s.rng.IntN(len(heir.members))]
	}
	s.tracef("%s: %s hands over to %s, witness %s", why, leader.identity, heir.identity, witness)
	if out != nil && s.rng.IntN(2) == 0 {
		out(heir)
	}
	switch s.rng.IntN(3) {
	case 0:
		s.release(leader, heir.identity, witness)
	case 1:
		s.withdraw(leader, heir.identity, witness)
	case 2:
		s.stop(leader, heir.identity, witness)
	}
}

// handEdit changes the Lease as an admin would, without a precondition.
func (s *sim) handEdit() {
	s.adminSeq++
	var what string
	switch s.rng.IntN(5) {
	case 0:
		what = "deletes the Lease"
		s.store.remove()
	case 1:
		what = "empties the holder"
		s.store.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") })
	case 2:
		what = "shortens leaseDurationSeconds to 1"
		s.store.edit(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(1)) })
	case 3:
		what = "sets the holder to a name no instance has"
		holder := fmt.Sprintf("admin-%d", s.adminSeq)
		s.store.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = &holder })
	case 4:
		what = "edits an annotation"
		s.store.edit(func(l *coordinationv1.Lease) {
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			}
			l.Annotations["example.com/note"] = fmt.Sprint(s.adminSeq)
		})
	}
	s.tracef("admin %s (rev %d)", what, s.store.rev)
	s.check.disturbed(s.now)
}

// live lists the running instances that are not stopping.
// successor picks whom in hands a release to: half the time no one; else
// any instance ever started (alive or not: a successor that never takes
// the Lease, which the others then take after their wait), or one never
// started, or in itself.
func (s *sim) successor(in *instance) string {
	switch k := s.rng.IntN(8); {
	case k < 4:
		return ""
	case k == 4:
		return "never-started"
	case k == 5:
		return in.identity
	default:
		return s.instances[s.rng.IntN(len(s.instances))].identity
	}
}

// handoverWait bounds how long a handover to to may keep the others out:
// RenewDeadline on their clocks, which run at least half as fast as the
// simulation's.
func (s *sim) handoverWait(to string) time.Duration {
	if to == "" {
		return 0
	}
	return 2 * s.params.timing.RenewDeadline
}

func (s *sim) live() []*instance {
	var live []*instance
	for _, in := range s.instances {
		if in.alive && !in.stopping {
			live = append(live, in)
		}
	}
	return live
}

func describeInput(in Input) string {
	switch in := in.(type) {
	case Observed:
		s := "watch " + describeLease(in.Lease, in.ResourceVersion)
		if !in.WitnessSentAt.IsZero() {
			s += " witness sent " + in.WitnessSentAt.Format("15:04:05.000")
		}
		return s
	case Result:
		if in.Err != nil {
			return "answer: " + firstLine(in.Err.Error())
		}
		return "answer " + describeLease(in.Lease, "")
	case Release:
		return fmt.Sprintf("Release(stay out %v, to %q, witness %q)", in.StayOut, in.To, in.Witness)
	case SetCandidate:
		return fmt.Sprintf("SetCandidate(%v, to %q, witness %q)", in.Candidate, in.To, in.Witness)
	case Stop:
		return fmt.Sprintf("Stop(to %q, witness %q)", in.To, in.Witness)
	case WatchDown:
		return "WatchDown"
	default:
		return strings.TrimPrefix(fmt.Sprintf("%T", in), "decide.")
	}
}

func describeOutput(out Output) string {
	var b strings.Builder
	if out.Report.Leading {
		fmt.Fprintf(&b, "LEADING token=%d validUntil=%s", out.Report.Token, out.Report.ValidUntil.Format("15:04:05.000"))
	} else {
		fmt.Fprintf(&b, "following %q", out.Report.Holder)
	}
	if out.Request != nil {
		fmt.Fprintf(&b, "; sends %s", out.Request.Purpose)
		if out.Request.Lease != nil && out.Request.Verb == Update {
			fmt.Fprintf(&b, " on %s", out.Request.Lease.ResourceVersion)
		}
	}
	for _, l := range out.Logs {
		fmt.Fprintf(&b, "; %q", l.Msg)
	}
	return b.String()
}

func describeLease(l *coordinationv1.Lease, rv string) string {
	if l == nil {
		return "missing@" + rv
	}
	d := int32(0)
	if l.Spec.LeaseDurationSeconds != nil {
		d = *l.Spec.LeaseDurationSeconds
	}
	sig := ""
	if by := l.Annotations[ReleasedByAnnotation]; by != "" {
		sig = " signed " + by
	}
	if w := l.Annotations[HandedOverAnnotation]; w != "" {
		sig += " handed over, witness " + w
	}
	return fmt.Sprintf("%s{holder %q %ds%s}", l.ResourceVersion, holderOf(l), d, sig)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
