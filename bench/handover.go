package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/pkg/client"
)

// The handover section measures issue 13's features: the leader address,
// the forwarding proxy, and handover to a chosen successor
// (LEASEHOLD_HANDOVER=successor, POST /v1/release?to=), on the same
// apiserver as the rest of the bench, with the bench's leaseDuration,
// renewDeadline and retryPeriod.
//
//  1. Rolling updates of 3 replicas (start a new pod, SIGTERM an old one,
//     three times; the leader is old at the start and is the first old pod
//     terminated), for leasehold with LEASEHOLD_HANDOVER=successor, for
//     leasehold's default (any), and for client-go's LeaderElector
//     (bench/baseline, one Lease), trials alternating between the three.
//     Each implementation keeps one namespace and one Lease: the three new
//     pods of a rollout are the old ones of the next, as in a Deployment
//     rolled again and again. A watch of the Lease (admin client) counts
//     the holder changes of each rollout; the leader's SIGTERM is timed
//     until another member's blocking GET /v1/leader?wait= answers 200, and
//     (leasehold) every other member's blocking GET /v1/watch until it names
//     the successor's leaderAddress.
//  2. A group of 3 sidecars with LEASEHOLD_HANDOVER=successor, each with its
//     forwarding proxy (advertised) in front of an app stand-in of the
//     bench's that records what it serves: the proxy's added latency
//     (direct, via the leader's proxy, via a follower's, interleaved);
//     POST /v1/release?to= to a random member; then graceful handovers
//     (SIGTERM to the leader, replaced after each) under load on every
//     proxy, for the window of 503s. Every request the apps served is
//     judged by its fencing token against the Lease's terms.

// hoImpl names the rollout's implementations, in the report's column order.
var hoImpls = []string{"leasehold, HANDOVER=successor", "leasehold, HANDOVER=any (default)", "client-go LeaderElector"}

// hoRollout is one implementation's rollout figures.
type hoRollout struct {
	name      string
	changes   []int           // holder changes per rollout, on the Lease watch
	handovers []time.Duration // the leader's SIGTERM → another member leads
	toNewest  int             // of those, handovers to the newest member (the chosen successor)
	addrLag   []time.Duration // a follower's watch names the new address − the successor's leading answer
	addrWrong int             // follower answers naming another address than the successor's
	addrNone  int             // followers whose watch named no new address within the bound
	misses    int             // leader SIGTERMs with no successor within the bound
	noLeader  int             // rollouts with no leader at the end within the bound
}

// hoProxyTrial is one graceful handover under load on every proxy.
type hoProxyTrial struct {
	handover   time.Duration // SIGTERM → the successor leads
	window     time.Duration // first refused request sent → last refused answered, via a non-leader's proxy
	refused503 int
	refused502 int
	served     int // 200s through every proxy
	oldRefused int // refused (503/502) through the old leader's own proxy
	errors     int // no HTTP answer, through a proxy other than the old leader's
}

// hoFigures are the section's figures.
type hoFigures struct {
	ran                                       bool
	trials                                    int
	leaseDuration, renewDeadline, retryPeriod time.Duration
	rollouts                                  []hoRollout // in hoImpls order
	releases                                  []time.Duration
	releaseOther                              int // releases after which another member than the named one led
	releaseMisses                             int
	releaseAddrLag                            []time.Duration
	releaseAddrWrong, releaseAddrNone         int
	direct, viaLeader, viaFollower            []time.Duration
	overheadFailed                            int // non-200 answers while measuring the overhead
	inProcess                                 hoOverhead
	proxyTrials                               []hoProxyTrial
	proxyMisses                               int
	fencing                                   fencingVerdict
}

// hoOverhead is the product's BenchmarkProxy's figure, in one process
// (proxyInProcess).
type hoOverhead struct {
	ran                                      bool
	requests                                 int
	direct50, direct99, proxied50, proxied99 time.Duration
	forwarded50, forwarded99                 time.Duration
	err                                      string
}

// benchHandover runs the section.
func benchHandover(ctx context.Context, cluster *kubetest.Cluster, dir, leasehold, baseline string, opts options) (hoFigures, error) {
	f := hoFigures{ran: true, trials: opts.handoverTrials, leaseDuration: opts.leaseDuration, renewDeadline: opts.renewDeadline, retryPeriod: opts.retryPeriod}
	base := fleet.Config{Cluster: cluster, Dir: dir, Lease: "bench",
		LeaseDuration: opts.leaseDuration, RenewDeadline: opts.renewDeadline, RetryPeriod: opts.retryPeriod}
	fmt.Fprintf(os.Stderr, "bench: handover: %d rollouts each, %d releases, %d handovers under load, %d requests each way; leaseDuration %v, renewDeadline %v, retryPeriod %v\n",
		opts.handoverTrials, opts.handoverReleases, opts.handoverProxyTrials, opts.handoverRequests, opts.leaseDuration, opts.renewDeadline, opts.retryPeriod)

	var runs []*hoRolloutRun
	defer func() {
		for _, r := range runs {
			r.stop()
		}
	}()
	for k, name := range hoImpls {
		cfg := base
		cfg.Binary = leasehold
		switch k {
		case 0:
			cfg.Env = []string{"LEASEHOLD_HANDOVER=successor"}
		case 2:
			cfg.Binary = baseline
		}
		r := &hoRolloutRun{cluster: cluster, cfg: cfg, fig: &hoRollout{name: name}, successor: k == 0, advertise: k < 2, tag: []string{"su", "any", "cg"}[k]}
		runs = append(runs, r)
		if err := r.setup(ctx); err != nil {
			return f, fmt.Errorf("%s: %w", name, err)
		}
	}
	for i := range opts.handoverTrials {
		for _, r := range runs {
			if err := r.trial(ctx, i+1); err != nil {
				return f, fmt.Errorf("%s, rollout %d: %w", r.fig.name, i+1, err)
			}
		}
	}
	for _, r := range runs {
		r.finish()
		f.rollouts = append(f.rollouts, *r.fig)
		r.stop()
	}
	runs = nil

	cfg := base
	cfg.Binary = leasehold
	cfg.Env = []string{"LEASEHOLD_HANDOVER=successor"}
	p := &hoProxyRun{cluster: cluster, cfg: cfg, fig: &f, opts: opts}
	defer p.stop()
	if err := p.run(ctx); err != nil {
		return f, fmt.Errorf("proxy group: %w", err)
	}
	return f, nil
}

// hoMember is one running sidecar of the section.
type hoMember struct {
	inst     *fleet.Instance
	identity string
	addr     string // advertised address ("" for client-go)
}

// hoRolloutRun is one implementation's rollouts, in one namespace.
type hoRolloutRun struct {
	cluster   *kubetest.Cluster
	cfg       fleet.Config
	fig       *hoRollout
	successor bool // LEASEHOLD_HANDOVER=successor: wait for membership
	advertise bool // leasehold: advertise an address, follow leaderAddress
	tag       string

	watch   *leaseWatch
	members []*hoMember // running, oldest first
	started int
	begun   []time.Time // each rollout's start
	trialNo int
}

func (r *hoRolloutRun) log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: handover: %s, rollout %d: %s\n", r.fig.name, r.trialNo, fmt.Sprintf(format, args...))
}

func (r *hoRolloutRun) bound() time.Duration { return 3 * r.cfg.LeaseDuration }

func (r *hoRolloutRun) setup(ctx context.Context) error {
	ns, err := r.cluster.CreateNamespace(ctx, "bench-handover")
	if err != nil {
		return err
	}
	r.cfg.Namespace = ns
	if r.watch, err = startLeaseWatch(ctx, r.cluster.Clientset(), ns); err != nil {
		return err
	}
	if _, err := r.start(ctx); err != nil {
		return err
	}
	if _, err := r.leader(ctx); err != nil {
		return err
	}
	for range 2 {
		if _, err := r.start(ctx); err != nil {
			return err
		}
	}
	return r.awaitMembers(ctx, 3)
}

// start starts one member (the newest).
func (r *hoRolloutRun) start(ctx context.Context) (*hoMember, error) {
	r.started++
	cfg := r.cfg
	m := &hoMember{}
	if r.advertise {
		port, err := kubetest.FreePort()
		if err != nil {
			return nil, err
		}
		m.addr = "127.0.0.1:" + strconv.Itoa(port)
		cfg.Env = append(slices.Clone(cfg.Env), "LEASEHOLD_ADVERTISE_ADDRESS="+m.addr)
	}
	inst, err := cfg.Start(ctx, fmt.Sprintf("%s-%d", r.tag, r.started), false)
	if err != nil {
		return nil, err
	}
	m.inst = inst
	if st, err := inst.Status(ctx); err == nil {
		m.identity = st.Identity
	}
	r.members = append(r.members, m)
	return m, nil
}

func (r *hoRolloutRun) instances() []*fleet.Instance {
	var out []*fleet.Instance
	for _, m := range r.members {
		out = append(out, m.inst)
	}
	return out
}

func (r *hoRolloutRun) member(inst *fleet.Instance) *hoMember {
	for _, m := range r.members {
		if m.inst == inst {
			return m
		}
	}
	return nil
}

// leader waits, at most bound, for one of the running members to lead.
func (r *hoRolloutRun) leader(ctx context.Context) (fleet.Leadership, error) {
	wctx, cancel := context.WithTimeout(ctx, r.bound())
	defer cancel()
	return fleet.AwaitLeadership(wctx, r.instances())
}

// awaitMembers waits until every running member counts n members
// (leasehold_members), with LEASEHOLD_HANDOVER=successor only: a leaver
// can hand over only to a member it knows.
func (r *hoRolloutRun) awaitMembers(ctx context.Context, n int) error {
	if !r.successor {
		return nil
	}
	return awaitMemberCount(ctx, r.instances(), n, r.bound())
}

func awaitMemberCount(ctx context.Context, insts []*fleet.Instance, n int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		all := true
		for _, inst := range insts {
			mctx, cancel := context.WithTimeout(ctx, time.Second)
			ms, err := inst.Metrics(mctx)
			cancel()
			all = all && err == nil && ms.Sum("leasehold_members", nil) == float64(n)
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("members do not all count %d members within %v", n, bound)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// trial is one rollout: three times, start a new member, then SIGTERM an
// old one, the leader first.
func (r *hoRolloutRun) trial(ctx context.Context, n int) error {
	r.trialNo = n
	l, err := r.leader(ctx)
	if err != nil {
		return fmt.Errorf("no leader before the rollout: %w", err)
	}
	olds := slices.Clone(r.members)
	for i, o := range olds {
		if o.inst == l.Instance {
			olds[0], olds[i] = olds[i], olds[0]
		}
	}
	r.begun = append(r.begun, time.Now())
	for i, old := range olds {
		newest, err := r.start(ctx)
		if err != nil {
			return err
		}
		if err := r.awaitMembers(ctx, 4); err != nil {
			r.log("%v", err)
		}
		if i == 0 {
			if err := r.handover(ctx, old, newest); err != nil {
				return err
			}
		} else if err := old.inst.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		r.awaitExit(old)
		r.members = slices.DeleteFunc(r.members, func(m *hoMember) bool { return m == old })
		if err := r.awaitMembers(ctx, 3); err != nil {
			r.log("%v", err)
		}
	}
	if _, err := r.leader(ctx); err != nil {
		r.fig.noLeader++
		r.log("no leader at the end of the rollout within %v", r.bound())
	}
	return nil
}

// handover SIGTERMs the leader old and times until another member leads,
// and until each other member's watch names the successor's address.
func (r *hoRolloutRun) handover(ctx context.Context, old, newest *hoMember) error {
	if err := sleepRandom(ctx, 2*r.cfg.RetryPeriod); err != nil {
		return err
	}
	others := slices.DeleteFunc(slices.Clone(r.members), func(m *hoMember) bool { return m == old })
	var watches map[*hoMember]*addrWatch
	if r.advertise {
		var err error
		if watches, err = startAddrWatches(ctx, others, old.addr); err != nil {
			return err
		}
		defer func() {
			for _, w := range watches {
				w.cancel()
			}
		}()
	}
	var insts []*fleet.Instance
	for _, m := range others {
		insts = append(insts, m.inst)
	}
	next, took, err := awaitFirst(ctx, insts, r.bound(), func() error { return old.inst.Signal(syscall.SIGTERM) })
	if errors.Is(err, fleet.ErrNoLeader) && ctx.Err() == nil {
		r.fig.misses++
		r.log("no successor within %v of the leader's SIGTERM", r.bound())
		return nil
	}
	if err != nil {
		return err
	}
	r.fig.handovers = append(r.fig.handovers, took)
	succ := r.member(next.Instance)
	if succ == newest {
		r.fig.toNewest++
	}
	detail := ""
	if r.advertise {
		lags, wrong, none := collectAddr(watches, succ, next.At, r.bound())
		r.fig.addrLag = append(r.fig.addrLag, lags...)
		r.fig.addrWrong += wrong
		r.fig.addrNone += none
		detail = fmt.Sprintf("; followers' leaderAddress %v after (%d wrong, %d none)", roundAll(lags), wrong, none)
	}
	r.log("the leader %s's SIGTERM → %s leads in %v (newest: %v)%s", old.inst.Name, next.Instance.Name, took.Round(time.Microsecond), succ == newest, detail)
	return nil
}

func (r *hoRolloutRun) awaitExit(m *hoMember) {
	select {
	case <-m.inst.Exited():
	case <-time.After(r.bound()):
		r.log("%s did not exit within %v of SIGTERM", m.inst.Name, r.bound())
	}
	m.inst.Stop()
}

// finish counts each rollout's holder changes on the Lease watch: from its
// start to the next rollout's (the last: until now).
func (r *hoRolloutRun) finish() {
	events := r.watch.events()
	lease := map[string]bool{r.cfg.Lease: true}
	for i, from := range r.begun {
		to := time.Now()
		if i+1 < len(r.begun) {
			to = r.begun[i+1].Add(-time.Nanosecond)
		}
		r.fig.changes = append(r.fig.changes, countMoves(events, lease, from, to))
	}
	fmt.Fprintf(os.Stderr, "bench: handover: %s: holder changes per rollout %v\n", r.fig.name, r.fig.changes)
}

func (r *hoRolloutRun) stop() {
	for _, m := range r.members {
		m.inst.Stop()
	}
	r.members = nil
	if r.watch != nil {
		r.watch.stop()
		r.watch = nil
	}
}

// addrWatch follows one member's blocking GET /v1/watch until it names a
// leaderAddress other than the one it started from.
type addrWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	at     time.Time // arrival of the first answer naming a new address
	addr   string
}

// startAddrWatches starts one addrWatch per member, and returns once each
// has its first answer (its index).
func startAddrWatches(ctx context.Context, members []*hoMember, old string) (map[*hoMember]*addrWatch, error) {
	out := map[*hoMember]*addrWatch{}
	for _, m := range members {
		st, err := m.inst.Status(ctx)
		if err != nil {
			for _, w := range out {
				w.cancel()
			}
			return nil, err
		}
		sc, err := client.New(m.inst.APIURL)
		if err != nil {
			for _, w := range out {
				w.cancel()
			}
			return nil, err
		}
		wctx, cancel := context.WithCancel(ctx)
		w := &addrWatch{cancel: cancel, done: make(chan struct{})}
		out[m] = w
		go func() {
			defer close(w.done)
			defer sc.CloseIdleConnections()
			index := st.Index
			for wctx.Err() == nil {
				st, next, err := sc.Poll(wctx, index, time.Minute)
				if err != nil {
					_ = sleep(wctx, 10*time.Millisecond)
					continue
				}
				if a := st.LeaderAddress.Address; a != "" && a != old {
					w.at, w.addr = time.Now(), a
					return
				}
				index = next
			}
		}()
	}
	return out, nil
}

// collectAddr waits (at most bound after led) for the watches of every
// member but the successor, and returns each one's lag behind led (the
// successor's leading answer), and how many named a wrong address or none.
func collectAddr(watches map[*hoMember]*addrWatch, succ *hoMember, led time.Time, bound time.Duration) (lags []time.Duration, wrong, none int) {
	deadline := time.After(time.Until(led.Add(bound)))
	for m, w := range watches {
		if m == succ {
			w.cancel()
			continue
		}
		select {
		case <-w.done:
		case <-deadline:
			w.cancel()
			<-w.done
		}
		switch {
		case w.addr == "":
			none++
		case w.addr != succ.addr:
			wrong++
		default:
			lags = append(lags, w.at.Sub(led))
		}
	}
	return lags, wrong, none
}

// roundAll rounds each of d to 100µs, for the log.
func roundAll(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(100 * time.Microsecond)
	}
	return out
}

// pickOther is a random member of ms other than not.
func pickOther(ms []*hoMember, not *hoMember) *hoMember {
	others := slices.DeleteFunc(slices.Clone(ms), func(m *hoMember) bool { return m == not })
	return others[rand.N(len(others))]
}
