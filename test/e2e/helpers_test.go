package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

const leaseName = "app"

// member is one sidecar process of a trial, with what the test did to it.
type member struct {
	*fleet.Instance
	identity string
	app      *fakeApp // the app it probes (health-gated candidacy); nil if not gated

	mu         sync.Mutex
	expectExit bool      // the test killed or terminated it
	terminated time.Time // when the test sent SIGTERM or asked for a release; zero if never
	paused     bool      // SIGSTOPped: it cannot answer
}

func (m *member) exitExpected() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.expectExit
}

func (m *member) terminatedAt() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.terminated
}

func (m *member) isPaused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused
}

func (m *member) running() bool {
	select {
	case <-m.Exited():
		return false
	default:
		return true
	}
}

// env is one trial of one scenario: its own namespace and Lease, its
// sidecars, and the observer that samples them.
type env struct {
	t        *testing.T
	ctx      context.Context
	scenario string
	cfg      fleet.Config
	obs      *observer
	members  []*member
	tally    *tally
	waits    []waitRule // checked by finish
}

// runScenario runs fn as -soak trials (one by default), each a fresh env.
func runScenario(t *testing.T, scenario string, fn func(e *env)) {
	kubetest.Require(t, cluster)
	if *soak == 1 {
		runTrial(t, scenario, fn)
		return
	}
	for i := range *soak {
		t.Run(fmt.Sprintf("trial-%02d", i+1), func(t *testing.T) { runTrial(t, scenario, fn) })
	}
}

func runTrial(t *testing.T, scenario string, fn func(e *env)) {
	ns, err := cluster.CreateNamespace(t.Context(), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		t: t, ctx: t.Context(), scenario: scenario,
		cfg: fleet.Config{
			Binary: sidecarBinary(), Cluster: cluster, Namespace: ns, Lease: leaseName,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Dir: t.TempDir(),
		},
		obs:   newObserver(),
		tally: tallyFor(scenario),
	}
	defer e.finish()
	fn(e)
}

// finish stops the observer and checks the trial's invariants. It runs
// before the members are stopped (t.Cleanup), so their exits then are not
// the observer's concern.
func (e *env) finish() {
	e.obs.Stop()
	samples := e.obs.Samples()
	terms, vs := check(samples)
	vs = append(vs, checkAcrossRun(e.scenario, terms)...)
	vs = append(vs, checkWaits(samples, e.waits)...)
	for _, p := range e.obs.Problems() {
		vs = append(vs, violation{other, p})
	}
	for _, m := range e.members {
		if line := panicIn(m.LogPath); line != "" {
			vs = append(vs, violation{other, fmt.Sprintf("%s logged a panic: %s", m.Name, line)})
		}
	}
	for _, v := range vs {
		e.t.Error(v.msg)
	}
	var desc []string
	for _, t := range terms {
		desc = append(desc, fmt.Sprintf("%s:%d", t.m.Name, t.token))
	}
	e.t.Logf("%s: %d samples; terms in order: %s", e.scenario, len(samples), strings.Join(desc, " → "))
	e.tally.addTrial(vs, e.t.Failed())
	if e.t.Failed() {
		for _, m := range e.members {
			e.t.Logf("--- last lines of %s (%s):\n%s", m.Name, m.identity, kubetest.LogTail(m.LogPath, 25))
		}
	}
}

// start launches one sidecar, through its own proxy, and has it observed.
func (e *env) start(name string) *member {
	e.t.Helper()
	return e.startWith(name, nil)
}

// startWith is start for a sidecar whose candidacy is gated on app's
// health (LEASEHOLD_APP_HEALTH_* for this member only); nil app is start.
func (e *env) startWith(name string, app *fakeApp) *member {
	e.t.Helper()
	var extra []string
	if app != nil {
		extra = app.env()
	}
	return e.startEnv(name, app, extra...)
}

// startEnv is startWith with extra LEASEHOLD_* settings for this member
// only.
func (e *env) startEnv(name string, app *fakeApp, extra ...string) *member {
	e.t.Helper()
	cfg := e.cfg
	cfg.Env = append(slices.Clone(e.cfg.Env), extra...)
	inst, err := cfg.Start(e.ctx, name, true)
	if err != nil {
		e.t.Fatalf("%v; log tail:\n%s", err, kubetest.LogTail(filepath.Join(cfg.Dir, name+".log"), 20))
	}
	m := &member{Instance: inst, app: app}
	e.t.Cleanup(inst.Stop)
	st, err := inst.Status(e.ctx)
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	m.identity = st.Identity
	e.members = append(e.members, m)
	e.obs.Watch(m)
	return m
}

// startFleet starts the scenario's sidecars a, b, c, ...
func (e *env) startFleet() []*member {
	e.t.Helper()
	var ms []*member
	for i := range instances {
		ms = append(ms, e.start(string(rune('a'+i))))
	}
	return ms
}

// others returns the running members other than m.
func (e *env) others(m *member) []*member {
	var out []*member
	for _, o := range e.members {
		if o != m && o.running() {
			out = append(out, o)
		}
	}
	return out
}

func (e *env) signal(m *member, sig syscall.Signal) time.Time {
	e.t.Helper()
	at := time.Now()
	if err := m.Signal(sig); err != nil {
		e.t.Fatalf("%s: signal %v: %v", m.Name, sig, err)
	}
	return at
}

// kill SIGKILLs m (a crash) and returns when the signal was sent.
func (e *env) kill(m *member) time.Time {
	m.mu.Lock()
	m.expectExit = true
	m.mu.Unlock()
	return e.signal(m, syscall.SIGKILL)
}

// terminate SIGTERMs m (a graceful stop) and returns when the signal was
// sent; from then on m's term may end early (it releases the Lease).
func (e *env) terminate(m *member) time.Time {
	m.mu.Lock()
	m.expectExit, m.terminated = true, time.Now()
	m.mu.Unlock()
	return e.signal(m, syscall.SIGTERM)
}

// pauseProcess SIGSTOPs m.
func (e *env) pauseProcess(m *member) time.Time {
	m.mu.Lock()
	m.paused = true
	m.mu.Unlock()
	return e.signal(m, syscall.SIGSTOP)
}

// resumeProcess SIGCONTs m.
func (e *env) resumeProcess(m *member) time.Time {
	at := e.signal(m, syscall.SIGCONT)
	m.mu.Lock()
	m.paused = false
	m.mu.Unlock()
	return at
}

// awaitExit waits for a terminated m to exit with status 0 within exitBound
// (failsAfter).
func (e *env) awaitExit(m *member, since time.Time) {
	e.t.Helper()
	select {
	case <-m.Exited():
	case <-time.After(failsAfter(exitBound) + generousWait):
		e.t.Fatalf("%s still running %v after SIGTERM", m.Name, time.Since(since))
	}
	e.withinBound(m.Name+": exit after SIGTERM", time.Since(since), exitBound)
	if code := m.ExitCode(); code != 0 {
		e.t.Errorf("%s exit status %d after SIGTERM, want 0; log tail:\n%s", m.Name, code, kubetest.LogTail(m.LogPath, 20))
	}
}

// awaitTerm waits for an answer, received after after, in which one of from
// (every member when from is empty) reports leader:true with a token above
// above, and returns the earliest. It gives up failsAfter(bound) +
// generousWait after after.
func (e *env) awaitTerm(after time.Time, above fence.Token, bound time.Duration, from ...*member) sample {
	e.t.Helper()
	ctx, cancel := context.WithDeadline(e.ctx, after.Add(failsAfter(bound)+generousWait))
	defer cancel()
	s, err := e.obs.await(ctx, after, func(s sample) bool {
		return s.st.Leader && s.st.FencingToken > above && (len(from) == 0 || memberIn(s.m, from))
	})
	if err != nil {
		e.tally.addLivenessFailure()
		e.t.Fatalf("no new leader (token > %d) %v after the fault: %v", above, time.Since(after), err)
	}
	return s
}

// awaitSample waits for an answer of m, received after after, for which
// match holds, within the bound within (failsAfter), and returns it.
func (e *env) awaitSample(m *member, after time.Time, within time.Duration, what string, match func(sample) bool) sample {
	e.t.Helper()
	ctx, cancel := context.WithDeadline(e.ctx, after.Add(failsAfter(within)+generousWait))
	defer cancel()
	s, err := e.obs.await(ctx, after, func(s sample) bool { return s.m == m && match(s) })
	if err != nil {
		e.t.Fatalf("%s: %s: nothing %v after the fault: %v", m.Name, what, time.Since(after), err)
	}
	e.withinBound(m.Name+": "+what, s.recv.Sub(after), within)
	return s
}

// recovered records one recovery time against its bound (failsAfter).
func (e *env) recovered(what string, took, bound time.Duration) {
	e.t.Helper()
	e.tally.addRecovery(took)
	if !e.withinBound(what+": recovery", took, bound) {
		e.tally.addLivenessFailure()
	}
}

// withinBound judges took, measured on this process's clock from the fault,
// against bound: an error beyond failsAfter(bound), and false; over bound
// but within that, logged and counted ("over bound"); else logged.
func (e *env) withinBound(what string, took, bound time.Duration) bool {
	e.t.Helper()
	switch {
	case took > failsAfter(bound):
		e.t.Errorf("%s took %v: over twice its bound %v", what, took.Round(time.Millisecond), bound)
		return false
	case took > bound:
		e.tally.addOverBound()
		e.t.Logf("%s took %v: over its bound %v (within twice it: a loaded machine)", what, took.Round(time.Millisecond), bound)
	default:
		e.t.Logf("%s took %v (bound %v)", what, took.Round(time.Millisecond), bound)
	}
	return true
}

// awaitOneLeader polls every running, unpaused member until exactly one
// reports leader:true in one round, and returns it with its answer; it
// fails after failsAfter(within).
func (e *env) awaitOneLeader(within time.Duration) (*member, httpapi.Status) {
	e.t.Helper()
	started := time.Now()
	deadline := started.Add(failsAfter(within))
	var last string
	for {
		var leader *member
		var status httpapi.Status
		var leaders []string
		answered := 0
		for _, m := range e.members {
			if !m.running() || m.isPaused() {
				continue
			}
			ctx, cancel := context.WithTimeout(e.ctx, time.Second)
			st, err := m.Status(ctx)
			cancel()
			if err != nil {
				continue
			}
			answered++
			if st.Leader {
				leader, status = m, st
				leaders = append(leaders, m.Name)
			}
		}
		if len(leaders) == 1 {
			if took := time.Since(started); took > within {
				e.tally.addOverBound()
				e.t.Logf("exactly one leader (%s) after %v: over the bound %v (within twice it: a loaded machine)", leader.Name, took.Round(time.Millisecond), within)
			}
			return leader, status
		}
		last = fmt.Sprintf("%d answered, leaders %v", answered, leaders)
		if time.Now().After(deadline) {
			e.tally.addLivenessFailure()
			e.t.Fatalf("not exactly one leader within %v (twice the bound %v): %s", failsAfter(within), within, last)
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatal(e.ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// statusNow asks m for /v1/status with a generous timeout (a process just
// resumed from SIGSTOP may need a moment).
func (e *env) statusNow(m *member) (httpapi.Status, time.Time, time.Time, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	sent := time.Now()
	st, err := m.Status(ctx)
	return st, sent, time.Now(), err
}

// leases is the admin's client for the trial's Leases.
func (e *env) leases() coordinationv1client.LeaseInterface {
	return cluster.Clientset().CoordinationV1().Leases(e.cfg.Namespace)
}

func (e *env) getLease() *coordinationv1.Lease {
	e.t.Helper()
	l, err := e.leases().Get(e.ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// deleteLease deletes the trial's Lease as an admin.
func (e *env) deleteLease() {
	e.t.Helper()
	if err := e.leases().Delete(e.ctx, leaseName, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// awaitPromisesOver waits until the latest validUntil that m (every member
// when nil) has reported is past, so none of its terms can be valid; it
// fails the trial if that is later than deadline.
func (e *env) awaitPromisesOver(m *member, deadline time.Time) {
	e.t.Helper()
	var latest time.Time
	poll.UntilReport(e.t, time.Until(deadline), 10*time.Millisecond, "every term's validity over by "+clock(deadline), func() bool {
		latest = time.Time{}
		for _, s := range e.obs.Samples() {
			if m == nil || s.m == m {
				latest = later(latest, s.validUntil)
			}
		}
		return time.Now().After(latest)
	}, func() string { return "a term is still valid until " + clock(latest) })
}

// watchServing reads the trial's Lease as an admin until a read succeeds,
// and then sends the time of that success.
func (e *env) watchServing() <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		for e.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(e.ctx, 200*time.Millisecond)
			_, err := e.leases().Get(ctx, leaseName, metav1.GetOptions{})
			cancel()
			if err == nil {
				out <- time.Now()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		out <- time.Now()
	}()
	return out
}

// editLease writes the Lease as an admin would by hand: read, change,
// update on the read version, again on a conflict (the leader renews
// concurrently). It returns when the successful update was sent and what it
// wrote.
func (e *env) editLease(mutate func(*coordinationv1.Lease)) (time.Time, *coordinationv1.Lease) {
	e.t.Helper()
	for range 50 {
		l := e.getLease()
		mutate(l)
		sent := time.Now()
		written, err := e.leases().Update(e.ctx, l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			e.t.Fatalf("edit the Lease: %v", err)
		}
		return sent, written
	}
	e.t.Fatal("edit the Lease: conflicts on every attempt")
	return time.Time{}, nil
}

func memberIn(m *member, ms []*member) bool {
	for _, o := range ms {
		if o == m {
			return true
		}
	}
	return false
}

var panicLine = regexp.MustCompile(`(?m)^(panic: |fatal error: ).*$|http: panic serving.*$`)

// panicIn returns the first line of path that shows a panic, "" if none.
func panicIn(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return panicLine.FindString(string(data))
}

// leaseEvent is one write to the trial's Lease, as an admin's watch saw it.
type leaseEvent struct {
	at         time.Time // when the test received it
	deleted    bool
	holder     string
	releasedBy string // the elect.ReleasedByAnnotation of a released Lease
	rv         string
}

func (ev leaseEvent) String() string {
	if ev.deleted {
		return fmt.Sprintf("%s rv %s deleted", clock(ev.at), ev.rv)
	}
	return fmt.Sprintf("%s rv %s holder %q released-by %q", clock(ev.at), ev.rv, ev.holder, ev.releasedBy)
}

// leaseLog records every write to the trial's Lease from watchLease on.
type leaseLog struct {
	mu     sync.Mutex
	events []leaseEvent
}

// watchLease watches the trial's Lease as an admin until the trial ends
// (a watch delivers every write, also one overwritten a moment later).
func (e *env) watchLease() *leaseLog {
	l := &leaseLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.follow(e.ctx, e.leases())
	}()
	e.t.Cleanup(func() { <-done }) // e.ctx ends before the cleanups run
	return l
}

func (l *leaseLog) follow(ctx context.Context, leases coordinationv1client.LeaseInterface) {
	selector := fields.OneTermEqualSelector("metadata.name", leaseName).String()
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := leases.List(ctx, metav1.ListOptions{FieldSelector: selector})
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for i := range list.Items {
				l.add(&list.Items[i], false)
			}
			rv = list.ResourceVersion
		}
		w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: rv})
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			lease, ok := ev.Object.(*coordinationv1.Lease)
			switch {
			case ev.Type == watch.Error:
				rv = "" // e.g. 410 Gone: list again
			case ok:
				l.add(lease, ev.Type == watch.Deleted)
				rv = lease.ResourceVersion
			}
		}
		w.Stop()
	}
}

func (l *leaseLog) add(lease *coordinationv1.Lease, deleted bool) {
	ev := leaseEvent{
		at: time.Now(), deleted: deleted, rv: lease.ResourceVersion,
		holder: ptr.Deref(lease.Spec.HolderIdentity, ""), releasedBy: lease.Annotations[elect.ReleasedByAnnotation],
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

// since returns the writes received after t, in order.
func (l *leaseLog) since(t time.Time) []leaseEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []leaseEvent
	for _, ev := range l.events {
		if ev.at.After(t) {
			out = append(out, ev)
		}
	}
	return out
}

// lastBefore returns the last write received before t for which match
// holds, and whether there is one.
func (l *leaseLog) lastBefore(t time.Time, match func(leaseEvent) bool) (leaseEvent, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.events) - 1; i >= 0; i-- {
		if ev := l.events[i]; ev.at.Before(t) && match(ev) {
			return ev, true
		}
	}
	return leaseEvent{}, false
}

// await waits for a write received after after for which match holds,
// within the bound within (failsAfter; plus generousWait before giving
// up), and returns the first.
func (l *leaseLog) await(e *env, after time.Time, within time.Duration, match func(leaseEvent) bool) leaseEvent {
	e.t.Helper()
	var found leaseEvent
	poll.UntilReport(e.t, time.Until(after.Add(failsAfter(within)+generousWait)), 5*time.Millisecond, "such a Lease write", func() bool {
		if err := e.ctx.Err(); err != nil {
			e.t.Fatalf("no such Lease write %v after the fault: %v", time.Since(after), err)
		}
		for _, ev := range l.since(after) {
			if match(ev) {
				found = ev
				return true
			}
		}
		return false
	}, func() string {
		return fmt.Sprintf("%v after the fault; writes since: %v", time.Since(after), l.since(after))
	})
	e.withinBound(fmt.Sprintf("Lease write %s after the fault", found), found.at.Sub(after), within)
	return found
}
