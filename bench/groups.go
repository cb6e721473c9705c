package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/overlap"
)

// The groups section measures lease groups (issue 12): one process
// following many Leases, side by side with the pattern client-go users
// hand-roll, one LeaderElector per Lease (bench/baseline in group mode), on
// the same apiserver, trials alternating between the two. Each trial, in a
// namespace of its own:
//
//  1. scale-up: one member starts and holds every shard; then the other
//     members start at once, and the bench times, from the last one's
//     start, until every member holds exactly its fair share (its own
//     GET /v1/leases answers), counts the Lease moves on a watch of the
//     Leases, and reads max / mean Leases per member at the end of the
//     observation window;
//  2. graceful exit: SIGTERM to one member; each Lease it held is timed
//     until another member holds it;
//  3. a replacement member starts (leasehold: until the shares are fair
//     again);
//  4. crash: SIGKILL to one member, timed likewise.
//
// Throughout, every member's GET /v1/leases is sampled for Leases with two
// valid holders at once (overlaps, per Lease). In the first trial the
// settled group's apiserver requests are counted. Then one process of each
// follows a large group alone, for its memory and CPU (lgBig).

// lgImpl is one implementation's figures.
type lgImpl struct {
	name   string
	trials []lgTrial
	// Per Lease of the stopped member, every trial: signal → another
	// member holds it, and (graceful) release seen on the watch → held.
	graceful, gracefulFromRelease, crash []time.Duration
	gracefulToRelease                    []time.Duration // signal → the release seen on the watch
	gracefulMisses, crashMisses          int             // Leases not held again within the liveness bound
	gracefulHeld, crashHeld              []int
	overlapLeases                        int // Leases (summed over trials) with two valid holders at once, with certainty
	leaseTrials                          int // Leases × trials checked
	samples                              int // GET /v1/leases samples taken, every member, every trial
	requests                             lgRequests
	probe                                []time.Duration // one Lease write by the bench, every 200ms through every trial
}

// lgTrial is one trial's scale-up.
type lgTrial struct {
	settled          time.Duration // last member's start → every member holds its share; 0 when not within observed
	settledOK        bool
	observed         time.Duration // last member's start → end of the observation
	moves            int           // from the first added member's start to the end of the observation
	movesAfterSettle int           // Leases whose holding changed after settling (changedAfter)
	held             []int         // per member at the end of the observation
}

// maxOverMean is the most Leases one member held, over the fair mean.
func (t lgTrial) maxOverMean(leases int) float64 {
	if len(t.held) == 0 {
		return 0
	}
	return float64(slices.Max(t.held)) / (float64(leases) / float64(len(t.held)))
}

// lgFigures are the section's figures.
type lgFigures struct {
	ran                                       bool
	leases, members, trials                   int
	leaseDuration, renewDeadline, retryPeriod time.Duration
	window, sampleInterval                    time.Duration
	impls                                     []lgImpl
	big                                       lgBig
}

// lgTimings are the section's timings (the sidecar's defaults unless set).
func (o options) lgConfig(cluster *kubetest.Cluster, dir string) fleet.Config {
	return fleet.Config{
		Cluster: cluster, Dir: dir, Lease: "orders",
		LeaseDuration: o.groupsLeaseDuration, RenewDeadline: o.groupsRenewDeadline, RetryPeriod: o.groupsRetryPeriod,
	}
}

// benchGroups runs the section.
func benchGroups(ctx context.Context, cluster *kubetest.Cluster, dir, leasehold, baseline string, opts options) (lgFigures, error) {
	f := lgFigures{
		ran: true, leases: opts.groupsShards, members: opts.groupsMembers, trials: opts.groupsTrials,
		leaseDuration: opts.groupsLeaseDuration, renewDeadline: opts.groupsRenewDeadline, retryPeriod: opts.groupsRetryPeriod,
		window: opts.groupsWindow, sampleInterval: opts.groupsSampleInterval,
	}
	impls := []implementation{{"leasehold", leasehold}, {"client-go LeaderElector", baseline}}
	for _, impl := range impls {
		f.impls = append(f.impls, lgImpl{name: impl.name})
	}
	base := opts.lgConfig(cluster, dir)
	fmt.Fprintf(os.Stderr, "bench: groups: %d shards, 1 → %d members, %d trials; leaseDuration %v, renewDeadline %v, retryPeriod %v\n",
		f.leases, f.members, f.trials, f.leaseDuration, f.renewDeadline, f.retryPeriod)
	for i := range opts.groupsTrials {
		for k, impl := range impls {
			t := &lgRun{cfg: base, impl: impl, fig: &f.impls[k], opts: opts, cluster: cluster, trial: i + 1}
			t.cfg.Binary = impl.binary
			if err := t.run(ctx, i == 0); err != nil {
				return f, fmt.Errorf("%s, trial %d: %w", impl.name, i+1, err)
			}
		}
	}
	if opts.groupsBig > 0 {
		var err error
		if f.big, err = benchBigGroup(ctx, cluster, dir, impls, opts); err != nil {
			return f, fmt.Errorf("%d Leases: %w", opts.groupsBig, err)
		}
	}
	return f, nil
}

// lgRun is one trial of one implementation.
type lgRun struct {
	cluster *kubetest.Cluster
	cfg     fleet.Config
	impl    implementation
	fig     *lgImpl
	opts    options
	trial   int

	watch    *leaseWatch
	obs      *lgObserver
	members  []*lgMember // running
	started  int
	shardSet map[string]bool
	begun    time.Time
}

func (t *lgRun) log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: groups: %s, trial %d: %s\n", t.impl.name, t.trial, fmt.Sprintf(format, args...))
}

// bound is how long the trial waits for anything: three lease durations.
func (t *lgRun) bound() time.Duration { return 3 * t.cfg.LeaseDuration }

func (t *lgRun) quota() int { return t.opts.groupsShards / t.opts.groupsMembers }

func (t *lgRun) run(ctx context.Context, countRequests bool) error {
	ns, err := t.cluster.CreateNamespace(ctx, "bench-groups")
	if err != nil {
		return err
	}
	t.cfg.Namespace = ns
	t.begun = time.Now()
	t.cfg.Env = []string{fmt.Sprintf("LEASEHOLD_SHARDS=%d", t.opts.groupsShards)}
	shards := shardNames(t.cfg.Lease, t.opts.groupsShards)
	t.shardSet = map[string]bool{}
	for _, s := range shards {
		t.shardSet[s] = true
	}
	if t.watch, err = startLeaseWatch(ctx, t.cluster.Clientset(), ns); err != nil {
		return err
	}
	defer t.watch.stop()
	probe, err := startWriteProbe(ctx, t.cluster.Clientset(), ns, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer func() { t.fig.probe = append(t.fig.probe, probe.stop()...) }()
	t.obs = newLGObserver(ctx, shards, t.opts.groupsSampleInterval)
	defer func() {
		for _, m := range t.members {
			m.inst.Stop()
		}
		samples := t.obs.stop()
		for _, lease := range shards {
			pairs := overlap.Check(observations(samples[lease]))
			if len(pairs) == 0 {
				continue
			}
			t.fig.overlapLeases++
			p := pairs[0]
			t.log("%s: two valid holders at once (trial time; %d pair(s) of runs in all, the first logged): %s; and %s; certainly both for %v",
				lease, len(pairs), t.describeRun(p.A), t.describeRun(p.B), p.By())
			t.overlapDump(lease, samples[lease], p)
		}
		t.fig.leaseTrials += len(shards)
		t.fig.samples += t.obs.sampleCount()
	}()

	// 1. One member holds every shard; the others join at once.
	first, err := t.start(ctx)
	if err != nil {
		return err
	}
	if err := t.await(ctx, t.bound(), func() bool { return first.latest().held() == len(shards) }); err != nil {
		return fmt.Errorf("the first member does not hold every shard: %w", err)
	}
	scaleFrom := time.Now()
	var joining sync.WaitGroup
	joined := make([]*lgMember, t.opts.groupsMembers-1)
	errs := make([]error, len(joined))
	for i := range joined {
		t.started++
		name := t.name(t.started)
		joining.Go(func() {
			var inst *fleet.Instance
			if inst, errs[i] = t.cfg.Start(ctx, name, false); errs[i] == nil {
				joined[i] = t.obs.add(inst)
			}
		})
	}
	joining.Wait()
	for i, m := range joined {
		if errs[i] != nil {
			return errs[i]
		}
		t.members = append(t.members, m)
	}
	lastStart := slices.MaxFunc(joined, func(a, b *lgMember) int { return a.inst.Started.Compare(b.inst.Started) }).inst.Started

	// Observe until the window has passed and the group settled (or the
	// liveness bound passed).
	var tr lgTrial
	settledAt, settled := time.Time{}, false
	deadline := lastStart.Add(t.bound())
	for {
		settledAt, settled = settledTime(t.answers(), t.quota())
		now := time.Now()
		if (settled && !now.Before(lastStart.Add(t.opts.groupsWindow))) || now.After(deadline) {
			break
		}
		if !settled && now.After(lastStart.Add(t.opts.groupsWindow)) && t.impl.name != "leasehold" {
			break // client-go never balances: the window is all it gets
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	end := time.Now()
	tr.observed = end.Sub(lastStart)
	if settled {
		tr.settled, tr.settledOK = settledAt.Sub(lastStart), true
		tr.movesAfterSettle = changedAfter(t.answers(), settledAt, end)
	}
	tr.moves = countMoves(t.watch.events(), t.shardSet, scaleFrom, end)
	for _, m := range t.members {
		l, err := m.inst.Leases(ctx)
		if err != nil {
			return err
		}
		tr.held = append(tr.held, heldIn(l.Leases))
	}
	t.fig.trials = append(t.fig.trials, tr)
	t.log("scale-up 1 → %d (others started from %v to %v, trial time): settled=%v after %v, %d moves (%d after settling), held %v at +%v",
		len(t.members), scaleFrom.Sub(t.begun).Round(time.Millisecond), lastStart.Sub(t.begun).Round(time.Millisecond),
		settled, tr.settled.Round(time.Millisecond), tr.moves, tr.movesAfterSettle, tr.held, tr.observed.Round(time.Millisecond))

	if countRequests {
		if t.fig.requests, err = t.countRequests(ctx); err != nil {
			return err
		}
	}

	// 2. Graceful exit of one member.
	victim := t.victim()
	took, fromRelease, toRelease, held, misses, err := t.stopOne(ctx, victim, syscall.SIGTERM)
	if err != nil {
		return err
	}
	t.fig.graceful = append(t.fig.graceful, took...)
	t.fig.gracefulFromRelease = append(t.fig.gracefulFromRelease, fromRelease...)
	t.fig.gracefulToRelease = append(t.fig.gracefulToRelease, toRelease...)
	t.fig.gracefulMisses += misses
	t.fig.gracefulHeld = append(t.fig.gracefulHeld, held)

	// 3. A replacement; leasehold settles to the fair share again.
	t.started++
	inst, err := t.cfg.Start(ctx, t.name(t.started), false)
	if err != nil {
		return err
	}
	t.members = append(t.members, t.obs.add(inst))
	if t.impl.name == "leasehold" {
		if err := t.await(ctx, t.bound(), func() bool {
			_, ok := settledTime(t.answers(), t.quota())
			return ok
		}); err != nil {
			t.log("not settled again after the replacement joined: %v", err)
		}
	}

	// 4. Crash of one member.
	victim = t.victim()
	took, _, _, held, misses, err = t.stopOne(ctx, victim, syscall.SIGKILL)
	if err != nil {
		return err
	}
	t.fig.crash = append(t.fig.crash, took...)
	t.fig.crashMisses += misses
	t.fig.crashHeld = append(t.fig.crashHeld, held)
	return nil
}

func (t *lgRun) name(n int) string {
	tag := "lh"
	if t.impl.name != "leasehold" {
		tag = "cg"
	}
	return fmt.Sprintf("%s-t%d-m%d", tag, t.trial, n)
}

// start starts one member and observes it.
func (t *lgRun) start(ctx context.Context) (*lgMember, error) {
	t.started++
	inst, err := t.cfg.Start(ctx, t.name(t.started), false)
	if err != nil {
		return nil, err
	}
	m := t.obs.add(inst)
	t.members = append(t.members, m)
	return m, nil
}

// answers are the running members' answers so far.
func (t *lgRun) answers() [][]lgAnswer {
	var all [][]lgAnswer
	for _, m := range t.members {
		all = append(all, m.snapshot())
	}
	return all
}

// await polls cond every 20ms until it holds, at most bound.
func (t *lgRun) await(ctx context.Context, bound time.Duration, cond func() bool) error {
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", bound)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// victim picks the member a fault strikes: leasehold's at random (each
// holds its share); client-go's the one holding the most Leases (the
// others, with none, would show nothing).
func (t *lgRun) victim() *lgMember {
	if t.impl.name == "leasehold" {
		return t.members[rand.N(len(t.members))]
	}
	return slices.MaxFunc(t.members, func(a, b *lgMember) int { return a.latest().held() - b.latest().held() })
}

// stopOne sends sig to victim at a random phase of the renew cycle and
// times, for each Lease it held, until another member holds it (and, for
// the Leases whose release the watch saw, from the release). It waits for
// the process to exit and stops following it.
func (t *lgRun) stopOne(ctx context.Context, victim *lgMember, sig syscall.Signal) (took, fromRelease, toRelease []time.Duration, held, misses int, err error) {
	if err := sleepRandom(ctx, 2*t.cfg.RetryPeriod); err != nil {
		return nil, nil, nil, 0, 0, err
	}
	l, err := victim.inst.Leases(ctx)
	if err != nil {
		return nil, nil, nil, 0, 0, err
	}
	var leases []int
	for i, st := range l.Leases {
		if st.Leader {
			leases = append(leases, i)
		}
	}
	struck := time.Now()
	if err := victim.inst.Signal(sig); err != nil {
		return nil, nil, nil, 0, 0, err
	}
	t.members = slices.DeleteFunc(t.members, func(m *lgMember) bool { return m == victim })
	allHeld := func() bool {
		answers := t.answers()
		for _, i := range leases {
			if _, ok := reheldAt(answers, i, struck); !ok {
				return false
			}
		}
		return true
	}
	_ = t.await(ctx, t.bound(), allHeld) // a Lease not held within the bound is a miss
	answers := t.answers()
	events := t.watch.events()
	shards := shardNames(t.cfg.Lease, t.opts.groupsShards)
	for _, i := range leases {
		at, ok := reheldAt(answers, i, struck)
		if !ok {
			misses++
			continue
		}
		took = append(took, at.Sub(struck))
		if rel, ok := releaseAt(events, shards[i], l.Leases[i].Holder, struck); ok && !rel.After(at) {
			fromRelease = append(fromRelease, at.Sub(rel))
			toRelease = append(toRelease, rel.Sub(struck))
		}
	}
	select {
	case <-victim.inst.Exited():
	case <-time.After(t.bound()):
		t.log("%s did not exit within %v of %v", victim.inst.Name, t.bound(), sig)
	}
	victim.inst.Stop()
	what := map[syscall.Signal]string{syscall.SIGTERM: "graceful exit (SIGTERM)", syscall.SIGKILL: "crash (SIGKILL)"}[sig]
	t.log("%s of %s holding %d at %v (trial time): held again p50 %v, max %v; %d not within %v",
		what, victim.inst.Name, len(leases), struck.Sub(t.begun).Round(time.Millisecond), quantile(took, 0.5), quantile(took, 1), misses, t.bound())
	return took, fromRelease, toRelease, len(leases), misses, nil
}

// shardNames are the Leases of LEASEHOLD_SHARDS=n on name.
func shardNames(name string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", name, i)
	}
	return names
}

// rel is a trial-relative time, for the log.
func (t *lgRun) rel(at time.Time) string { return at.Sub(t.begun).Round(time.Microsecond).String() }

// describeRun tells, for the log, over which time a run of one member's
// leader:true samples proves it led, and what ended the run.
func (t *lgRun) describeRun(r overlap.Run[*fleet.Instance]) string {
	s := fmt.Sprintf("%s answered leader:true under token %d in %d sample(s), ", r.Member.Name, r.Token, len(r.Obs))
	if lo, hi, ok := r.Certain(); ok {
		s += fmt.Sprintf("so led throughout %s–%s (first received, last sent)", t.rel(lo), t.rel(hi))
	} else {
		s += fmt.Sprintf("so led at some unknown instant of %s–%s (first sent, last received)", t.rel(r.First().Sent), t.rel(r.Last().Recv))
	}
	if e := r.End; e != nil {
		s += fmt.Sprintf(", until a sample sent %s said leader=%v token %d", t.rel(e.Sent), e.Leader, e.Token)
	}
	return s
}

// overlapDump logs, for an overlap found on lease, every sample of the two
// members around it and every version of the Lease the watch saw then, as
// evidence.
func (t *lgRun) overlapDump(lease string, samples []sample, p overlap.Pair[*fleet.Instance]) {
	from := p.A.First().Sent.Add(-time.Second)
	to := later(p.A.Last().Recv, p.B.Last().Recv).Add(time.Second)
	for _, s := range samples {
		if (s.inst == p.A.Member || s.inst == p.B.Member) && s.received.After(from) && s.sent.Before(to) {
			t.log("  %s sample %s: sent %s received %s leader=%v token=%d term=%d", lease, s.inst.Name, t.rel(s.sent), t.rel(s.received), s.leader, s.token, s.term)
		}
	}
	for _, e := range t.watch.events() {
		if e.lease == lease && e.at.After(from) && e.at.Before(to) {
			t.log("  %s version seen %s: holder %q", lease, t.rel(e.at), e.holder)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
