package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/pkg/api"
)

// lgAnswer is one answer of a member's blocking GET /v1/leases: which
// Leases it held (leader:true, that is validly) when it answered.
type lgAnswer struct {
	at      time.Time // arrival
	leading []bool    // per Lease, in configured order
}

func (a *lgAnswer) held() int {
	if a == nil {
		return 0
	}
	n := 0
	for _, l := range a.leading {
		if l {
			n++
		}
	}
	return n
}

// heldIn counts the Leases a GET /v1/leases body says are held.
func heldIn(statuses []api.Status) int {
	n := 0
	for _, st := range statuses {
		if st.Leader {
			n++
		}
	}
	return n
}

// lgMember is one running member as the bench follows it: every answer of
// a blocking query on its GET /v1/leases (answered whenever its group
// index moves, that is whenever one of its Leases changes holder or its
// leadership, so the arrival of each answer times the change).
type lgMember struct {
	inst *fleet.Instance

	mu      sync.Mutex
	answers []lgAnswer
}

func (m *lgMember) record(a lgAnswer) {
	m.mu.Lock()
	m.answers = append(m.answers, a)
	m.mu.Unlock()
}

// latest is the last answer, nil before the first.
func (m *lgMember) latest() *lgAnswer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.answers) == 0 {
		return nil
	}
	a := m.answers[len(m.answers)-1]
	return &a
}

func (m *lgMember) snapshot() []lgAnswer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.answers)
}

// lgObserver follows every member of one trial: a blocking query per
// member (lgMember), and a sampler that asks each member's GET /v1/leases
// every interval for the overlap check, keeping one sample per Lease per
// answer (every Lease of an answer is judged at one instant).
type lgObserver struct {
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	leases   []string
	interval time.Duration

	mu      sync.Mutex
	samples map[string][]sample // by Lease
	count   int                 // answers sampled
}

func newLGObserver(ctx context.Context, leases []string, interval time.Duration) *lgObserver {
	ctx, cancel := context.WithCancel(ctx)
	return &lgObserver{ctx: ctx, cancel: cancel, leases: leases, interval: interval, samples: map[string][]sample{}}
}

// add starts following inst.
func (o *lgObserver) add(inst *fleet.Instance) *lgMember {
	m := &lgMember{inst: inst}
	o.wg.Go(func() { o.follow(m) })
	o.wg.Go(func() { o.sample(inst) })
	return m
}

// pause waits d after a failed request, and reports whether to go on.
func (o *lgObserver) pause(inst *fleet.Instance, d time.Duration) bool {
	select {
	case <-inst.Exited():
		return false
	case <-o.ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func (o *lgObserver) follow(m *lgMember) {
	var index uint64
	for o.ctx.Err() == nil {
		l, err := m.inst.LeasesAfter(o.ctx, index, 30*time.Second)
		at := time.Now()
		if err != nil {
			if !o.pause(m.inst, 10*time.Millisecond) {
				return
			}
			continue
		}
		if len(l.Leases) != len(o.leases) {
			fmt.Fprintf(os.Stderr, "bench: groups: %s answered %d Leases, not %d\n", m.inst.Name, len(l.Leases), len(o.leases))
			return
		}
		a := lgAnswer{at: at, leading: make([]bool, len(l.Leases))}
		for i, st := range l.Leases {
			a.leading[i] = st.Leader
		}
		m.record(a)
		index = l.Index
	}
}

func (o *lgObserver) sample(inst *fleet.Instance) {
	for o.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(o.ctx, 250*time.Millisecond)
		sent := time.Now()
		l, err := inst.Leases(ctx)
		received := time.Now()
		cancel()
		if err == nil {
			o.mu.Lock()
			o.count++
			for _, st := range l.Leases {
				o.samples[st.Lease] = append(o.samples[st.Lease], sample{
					inst: inst, sent: sent, received: received, leader: st.Leader, token: st.FencingToken, term: st.Term,
				})
			}
			o.mu.Unlock()
		}
		if !o.pause(inst, o.interval) {
			return
		}
	}
}

// stop ends the observation and returns the samples, by Lease.
func (o *lgObserver) stop() map[string][]sample {
	o.cancel()
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.samples
}

func (o *lgObserver) sampleCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.count
}

// settledTime is the arrival of the first answer after which every
// member's latest answer says it holds exactly quota Leases; false when
// that never happened (or some member has not answered yet).
func settledTime(members [][]lgAnswer, quota int) (time.Time, bool) {
	type arrival struct {
		member int
		a      lgAnswer
	}
	var all []arrival
	for i, as := range members {
		for _, a := range as {
			all = append(all, arrival{i, a})
		}
	}
	slices.SortStableFunc(all, func(x, y arrival) int { return x.a.at.Compare(y.a.at) })
	latest := make([]int, len(members))
	answered := make([]bool, len(members))
	for _, x := range all {
		latest[x.member], answered[x.member] = x.a.held(), true
		ok := true
		for i := range members {
			ok = ok && answered[i] && latest[i] == quota
		}
		if ok {
			return x.a.at, true
		}
	}
	return time.Time{}, false
}

// reheldAt is the arrival of the first answer at or after from, of any of
// members, that holds the Lease at index lease.
func reheldAt(members [][]lgAnswer, lease int, from time.Time) (time.Time, bool) {
	var first time.Time
	for _, as := range members {
		for _, a := range as {
			if !a.at.Before(from) && lease < len(a.leading) && a.leading[lease] {
				if first.IsZero() || a.at.Before(first) {
					first = a.at
				}
				break
			}
		}
	}
	return first, !first.IsZero()
}

// leaseEvent is one version of a Lease, as the bench's watch saw it.
type leaseEvent struct {
	at      time.Time // arrival
	lease   string
	holder  string // "" when none (released, or deleted)
	deleted bool
	rv      string           // the version's resourceVersion
	token   api.FencingToken // the fencing token published on it (0: none)
}

// leaseWatch lists and watches every Lease of a namespace with the
// cluster's admin client, recording each version's holder and arrival.
type leaseWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	evs []leaseEvent
}

func startLeaseWatch(ctx context.Context, cs kubernetes.Interface, ns string) (*leaseWatch, error) {
	leases := cs.CoordinationV1().Leases(ns)
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &leaseWatch{cancel: cancel, done: make(chan struct{})}
	now := time.Now()
	for i := range list.Items {
		w.add(now, &list.Items[i], false)
	}
	rv := list.ResourceVersion
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			if err := w.watchOnce(ctx, leases, &rv); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "bench: groups: Lease watch: %v; watching again\n", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return w, nil
}

type leaseWatcher interface {
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

func (w *leaseWatch) watchOnce(ctx context.Context, leases leaseWatcher, rv *string) error {
	wi, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: *rv})
	if err != nil {
		return err
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return errors.New("closed by the server")
			}
			l, isLease := ev.Object.(*coordinationv1.Lease)
			switch {
			case ev.Type == watch.Error:
				return fmt.Errorf("%v", ev.Object)
			case !isLease:
				continue
			}
			w.add(time.Now(), l, ev.Type == watch.Deleted)
			*rv = l.ResourceVersion
		}
	}
}

func (w *leaseWatch) add(at time.Time, l *coordinationv1.Lease, deleted bool) {
	e := leaseEvent{at: at, lease: l.Name, holder: ptr.Deref(l.Spec.HolderIdentity, ""), deleted: deleted, rv: l.ResourceVersion}
	e.token = publishedToken(l.Annotations)
	if deleted {
		e.holder = ""
	}
	w.mu.Lock()
	w.evs = append(w.evs, e)
	w.mu.Unlock()
}

func (w *leaseWatch) events() []leaseEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.evs)
}

func (w *leaseWatch) stop() {
	w.cancel()
	<-w.done
}

// countMoves counts the moves of the given Leases that arrived in [from,
// to]: a version naming a holder other than the last holder named before
// it (a release in between, which names none, does not end the move).
// Every event before from sets the starting holders.
func countMoves(events []leaseEvent, leases map[string]bool, from, to time.Time) int {
	last := map[string]string{}
	moves := 0
	for _, e := range events {
		if !leases[e.lease] || e.holder == "" || e.at.After(to) {
			continue
		}
		if prev := last[e.lease]; !e.at.Before(from) && prev != "" && prev != e.holder {
			moves++
		}
		last[e.lease] = e.holder
	}
	return moves
}

// releaseAt is the arrival of the first version of lease at or after from
// that no longer names leaver: the write by which it let the Lease go (a
// release naming no holder, or a handover naming the successor).
func releaseAt(events []leaseEvent, lease, leaver string, from time.Time) (time.Time, bool) {
	for _, e := range events {
		if e.lease == lease && e.holder != leaver && !e.deleted && !e.at.Before(from) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// lgRequests are the apiserver requests of a settled group over a window,
// from every member's leasehold_kube_requests_total (both implementations
// count with internal/kubeclient), and the writes seen on the Lease watch.
type lgRequests struct {
	window       time.Duration
	members      int
	held         int                // Leases held when the window began
	byVerb       map[string]float64 // every member's, summed
	total        float64
	renewals     float64 // leasehold: renew writes (leasehold_renew_duration_seconds, every Lease)
	shardWrites  int     // versions of the shard Leases seen on the watch
	memberWrites int     // versions of other Leases (leasehold's member Leases), the write probe's aside
}

func (r lgRequests) perMinute(n float64) float64 {
	if r.window <= 0 {
		return 0
	}
	return n / r.window.Minutes()
}

// countRequests scrapes every member, lets the window pass, and scrapes
// again.
func (t *lgRun) countRequests(ctx context.Context) (lgRequests, error) {
	r := lgRequests{members: len(t.members), byVerb: map[string]float64{}}
	scrape := func() ([]fleet.Metrics, error) {
		var all []fleet.Metrics
		for _, m := range t.members {
			got, err := m.inst.Metrics(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.inst.Name, err)
			}
			all = append(all, got)
		}
		return all, nil
	}
	for _, m := range t.members {
		r.held += m.latest().held()
	}
	before, err := scrape()
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := sleep(ctx, t.opts.requestWindow); err != nil {
		return r, err
	}
	after, err := scrape()
	if err != nil {
		return r, err
	}
	end := time.Now()
	r.window = end.Sub(start)
	for i := range after {
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			d := after[i].Sum("leasehold_kube_requests_total", map[string]string{"verb": verb}) -
				before[i].Sum("leasehold_kube_requests_total", map[string]string{"verb": verb})
			if d != 0 {
				r.byVerb[verb] += d
			}
		}
		r.total += after[i].Sum("leasehold_kube_requests_total", nil) - before[i].Sum("leasehold_kube_requests_total", nil)
		r.renewals += after[i].Sum("leasehold_renew_duration_seconds", nil) - before[i].Sum("leasehold_renew_duration_seconds", nil)
	}
	for _, e := range t.watch.events() {
		if e.at.Before(start) || e.at.After(end) || e.deleted || e.lease == writeProbeLease {
			continue
		}
		if t.shardSet[e.lease] {
			r.shardWrites++
		} else {
			r.memberWrites++
		}
	}
	t.log("requests over %v: %.0f (%v), renewals %.0f; writes seen: %d shard, %d member", r.window.Round(time.Millisecond), r.total, r.byVerb, r.renewals, r.shardWrites, r.memberWrites)
	return r, nil
}

// changedAfter counts the Leases whose holding changed, in any member's
// answers, after at and up to end: each member's state at at is its
// latest answer by then, and every later answer is compared with it. The
// members' own answers are used, not the Lease watch, whose events race
// with them: the watch may deliver the last move of a settling group just
// after the answer that completed it.
func changedAfter(members [][]lgAnswer, at, end time.Time) int {
	changed := map[int]bool{}
	for _, as := range members {
		var state []bool
		for _, a := range as {
			switch {
			case !a.at.After(at):
				state = a.leading
			case a.at.After(end):
			default:
				for i, l := range a.leading {
					if i >= len(state) && l || i < len(state) && state[i] != l {
						changed[i] = true
					}
				}
			}
		}
	}
	return len(changed)
}

// writeProbe times a write of one Lease of its own (its renewTime) every
// interval, with the cluster's admin client, for the apiserver's and
// etcd's write latency on this machine at this moment: the floor of any
// handover.
type writeProbe struct {
	cancel context.CancelFunc
	done   chan struct{}
	took   []time.Duration
}

// writeProbeLease is the write probe's Lease.
const writeProbeLease = "bench-write-probe"

func startWriteProbe(ctx context.Context, cs kubernetes.Interface, ns string, interval time.Duration) (*writeProbe, error) {
	leases := cs.CoordinationV1().Leases(ns)
	lease, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: writeProbeLease}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &writeProbe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			now := metav1.NowMicro()
			lease.Spec.RenewTime = &now
			start := time.Now()
			updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
			if err == nil {
				p.took = append(p.took, time.Since(start))
				lease = updated
			}
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	return p, nil
}

// stop ends the probe and returns its round trips.
func (p *writeProbe) stop() []time.Duration {
	p.cancel()
	<-p.done
	return p.took
}
