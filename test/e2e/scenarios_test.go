package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// steady is how long to wait for the first leader of a fresh fleet.
const steady = 30 * time.Second

// 1. Crash: SIGKILL the leader. Another takes over once the Lease expires.
func TestCrash(t *testing.T) {
	runScenario(t, "1 crash (SIGKILL)", func(e *env) {
		e.startFleet()
		leader, st := e.awaitOneLeader(steady)
		at := e.kill(leader)
		s := e.awaitTerm(at, st.FencingToken, failoverBound, e.others(leader)...)
		e.recovered("SIGKILL → "+s.m.Name+" leads", s.recv.Sub(at), failoverBound)
		e.awaitOneLeader(handoverBound)
	})
}

// 2. Graceful handover: SIGTERM the leader. It releases and exits 0; a
// watching candidate takes over within a round trip.
func TestGracefulHandover(t *testing.T) {
	runScenario(t, "2 graceful (SIGTERM)", func(e *env) {
		e.startFleet()
		leader, st := e.awaitOneLeader(steady)
		at := e.terminate(leader)
		s := e.awaitTerm(at, st.FencingToken, handoverBound, e.others(leader)...)
		e.recovered("SIGTERM → "+s.m.Name+" leads", s.recv.Sub(at), handoverBound)
		e.awaitExit(leader, at)
		next, _ := e.awaitOneLeader(handoverBound)
		if h := ptr.Deref(e.getLease().Spec.HolderIdentity, ""); h != next.identity {
			t.Errorf("Lease holder %q, want the successor %q", h, next.identity)
		}
	})
}

// partition black-holes the leader's link to the apiserver until another
// instance leads, then heals it. It returns the old leader, the first
// answer of the successor's term and when the link was healed.
func partition(e *env) (*member, sample, time.Time) {
	e.startFleet()
	leader, st := e.awaitOneLeader(steady)
	at := time.Now()
	leader.Proxy.Cut()
	s := e.awaitTerm(at, st.FencingToken, failoverBound, e.others(leader)...)
	e.recovered("partition → "+s.m.Name+" leads", s.recv.Sub(at), failoverBound)
	healed := time.Now()
	leader.Proxy.Heal()
	return leader, s, healed
}

// 3. Partition: cut the leader off until another leads, then heal. The old
// leader learns of its successor and does not disturb it.
func TestPartition(t *testing.T) {
	runScenario(t, "3 partition", func(e *env) {
		old, succ, healed := partition(e)
		e.awaitSample(old, healed, failoverBound, "healed old leader sees the successor", func(s sample) bool {
			return !s.st.Leader && s.st.Holder == succ.m.identity
		})
		leader, st := e.awaitOneLeader(handoverBound)
		if leader != succ.m || st.FencingToken != succ.st.FencingToken {
			t.Errorf("after the heal %s leads with token %d; want the successor %s, token %d, undisturbed",
				leader.Name, st.FencingToken, succ.m.Name, succ.st.FencingToken)
		}
	})
}

// 4. Partition, heal, then SIGTERM the old leader at once, before it may
// have seen its successor: its release must not erase the successor's
// Lease (client-go's tryRelease trap).
func TestPartitionHealThenStop(t *testing.T) {
	runScenario(t, "4 partition+heal+SIGTERM", func(e *env) {
		old, succ, _ := partition(e)
		at := e.terminate(old)
		e.awaitExit(old, at)
		lease := e.getLease()
		if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != succ.m.identity {
			t.Errorf("after the old leader's shutdown the Lease's holder is %q, want the successor %q", h, succ.m.identity)
		}
		leader, st := e.awaitOneLeader(handoverBound)
		if leader != succ.m || st.FencingToken != succ.st.FencingToken {
			t.Errorf("after the old leader's shutdown %s leads with token %d; want the successor %s, token %d, undisturbed",
				leader.Name, st.FencingToken, succ.m.Name, succ.st.FencingToken)
		}
		for _, s := range e.obs.Samples() {
			if s.m == succ.m && s.recv.After(succ.recv) && (!s.st.Leader || s.st.FencingToken != succ.st.FencingToken) {
				t.Errorf("the successor's term was disturbed: %s", s)
				break
			}
		}
	})
}

// 5. Process pause: SIGSTOP the leader for longer than leaseDuration, then
// SIGCONT. The first answer it gives after resuming says leader:false.
func TestPause(t *testing.T) {
	runScenario(t, "5 pause (SIGSTOP)", func(e *env) {
		e.startFleet()
		leader, st := e.awaitOneLeader(steady)
		stopped := e.pauseProcess(leader)
		s := e.awaitTerm(stopped, st.FencingToken, failoverBound, e.others(leader)...)
		e.recovered("SIGSTOP → "+s.m.Name+" leads", s.recv.Sub(stopped), failoverBound)
		time.Sleep(time.Until(stopped.Add(pause))) // the fault's duration
		resumed := e.resumeProcess(leader)
		first, sent, recv, err := e.statusNow(leader)
		if err != nil {
			t.Fatalf("%s after SIGCONT: %v", leader.Name, err)
		}
		if first.Leader {
			t.Errorf("first answer after SIGCONT (paused %v, sent %v after SIGCONT) says leader:true, validUntil %s",
				resumed.Sub(stopped), sent.Sub(resumed), first.ValidUntil)
		} else {
			t.Logf("%s paused %v; first answer after SIGCONT (in %v): leader:false, holder %q",
				leader.Name, resumed.Sub(stopped).Round(time.Millisecond), recv.Sub(resumed).Round(time.Millisecond), first.Holder)
		}
		// The observer's answers from after the resume say the same.
		for _, o := range e.obs.Samples() {
			if o.m == leader && o.recv.After(resumed) {
				if o.st.Leader && o.st.FencingToken == st.FencingToken {
					t.Errorf("an answer after SIGCONT resumes the paused term: %s", o)
				}
				break
			}
		}
		next, _ := e.awaitOneLeader(handoverBound)
		if next != s.m {
			t.Errorf("%s leads after the resume, want the successor %s", next.Name, s.m.Name)
		}
	})
}

// 6. API server outage: stop the apiserver for `outage`, restart it on the
// same port. Nobody reports leadership beyond its validUntil (observer), no
// process exits (observer), and exactly one leads again within
// failoverBound of the restart. The restart is the moment the apiserver
// first serves a Lease read again (it serves before StartAPIServer has
// confirmed readiness, and its own boot time is not the sidecar's).
func TestAPIServerOutage(t *testing.T) {
	runScenario(t, "6 apiserver outage", func(e *env) {
		e.startFleet()
		_, st := e.awaitOneLeader(steady)
		down := true
		t.Cleanup(func() { // never leave the shared cluster down
			if down {
				if err := cluster.StartAPIServer(t.Context()); err != nil {
					t.Errorf("restart the apiserver: %v", err)
				}
			}
		})
		if err := cluster.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		time.Sleep(outage) // the fault's duration
		restarting := time.Now()
		serving := e.watchServing()
		if err := cluster.StartAPIServer(e.ctx); err != nil {
			t.Fatal(err)
		}
		down = false
		ready := time.Now()
		back := <-serving
		s := e.awaitTerm(stopped, st.FencingToken, failoverBound+ready.Sub(stopped))
		t.Logf("apiserver down %v; after the restart began it served Leases in %v and was ready in %v; first new term answered in %v",
			restarting.Sub(stopped).Round(time.Millisecond), back.Sub(restarting).Round(time.Millisecond),
			ready.Sub(restarting).Round(time.Millisecond), s.recv.Sub(restarting).Round(time.Millisecond))
		e.recovered("apiserver serves again → "+s.m.Name+" leads", max(0, s.recv.Sub(back)), failoverBound)
		e.awaitOneLeader(handoverBound)
		for _, m := range e.members {
			if !m.running() {
				t.Errorf("%s exited during the outage", m.Name)
			}
		}
	})
}

// 7. Lease deleted while held: (a) as an admin does it, with everyone
// connected; then the Lease taken from under a holder that cannot hear it
// (its link is cut for the moment): (b) deleted, (c) its holder blanked.
// The holder steps down as soon as it learns; nobody else may lead while
// the holder's term can still be valid (the no-overlap invariants), so a
// Lease deleted or blanked by hand is free only when its holder's record
// expires, not at once.
func TestLeaseDeleted(t *testing.T) {
	runScenario(t, "7 lease deleted", func(e *env) {
		e.startFleet()
		leader, st := e.awaitOneLeader(steady)
		at := time.Now()
		e.deleteLease()
		e.awaitSample(leader, at, handoverBound, "leader steps down after the deletion", func(s sample) bool {
			return !s.st.Leader || s.st.FencingToken != st.FencingToken
		})
		s := e.awaitTerm(at, st.FencingToken, failoverBound)
		e.recovered("deletion → "+s.m.Name+" leads", s.recv.Sub(at), failoverBound)

		takenWhileDeaf(e, "deleted", e.deleteLease)
		takenWhileDeaf(e, "holder blanked", func() {
			e.editLease(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("") })
		})
		e.awaitOneLeader(handoverBound)
	})
}

// takenWhileDeaf cuts the leader's link, has take take the Lease from it,
// waits for another instance to lead and for the deaf leader's term to run
// out, and heals the link.
func takenWhileDeaf(e *env, what string, take func()) {
	e.t.Helper()
	leader, st := e.awaitOneLeader(handoverBound)
	leader.Proxy.Cut()
	at := time.Now()
	take()
	s := e.awaitTerm(at, st.FencingToken, failoverBound, e.others(leader)...)
	e.recovered(what+" while the holder cannot hear → "+s.m.Name+" leads", s.recv.Sub(at), failoverBound)
	// Keep it deaf until its own term has run out, as a partition would.
	e.awaitPromisesOver(leader, at.Add(renewDeadline+schedulingSlack))
	healed := time.Now()
	leader.Proxy.Heal()
	e.awaitSample(leader, healed, failoverBound, "healed old leader sees the successor", func(o sample) bool {
		return !o.st.Leader && o.st.Holder == s.m.identity
	})
}

// intruder is a holder no sidecar knows: it never renews.
func intruder(l *coordinationv1.Lease, name string) {
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity = ptr.To(name)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(leaseDuration / time.Second))
	l.Spec.AcquireTime = &now
	l.Spec.RenewTime = &now
	if n := ptr.Deref(l.Spec.LeaseTransitions, 0); n < math.MaxInt32 {
		l.Spec.LeaseTransitions = ptr.To(n + 1)
	}
}

// 8. Lease edited by hand to another holder with a fresh renewTime. The
// leader steps down at once; the others respect the new holder's Lease
// until it expires, then one takes over.
func TestLeaseEditedByHand(t *testing.T) {
	runScenario(t, "8 lease edited by hand", func(e *env) {
		e.startFleet()
		leader, st := e.awaitOneLeader(steady)
		sent, _ := e.editLease(func(l *coordinationv1.Lease) { intruder(l, "intruder") })
		e.awaitSample(leader, sent, handoverBound, "leader steps down after the edit", func(s sample) bool {
			return !s.st.Leader
		})
		s := e.awaitTerm(sent, st.FencingToken, failoverBound)
		e.recovered("edit → "+s.m.Name+" leads", s.recv.Sub(sent), failoverBound)
		if earliest := sent.Add(leaseDuration); s.acquiredAt.Before(earliest) {
			t.Errorf("%s acquired at %s, before the hand-written holder's Lease expired (%s at the earliest)",
				s.m.Name, clock(s.acquiredAt), clock(earliest))
		}
		e.awaitOneLeader(handoverBound)
	})
}

// 9. Hostile Lease content written by an admin, one write at a time on the
// live Lease. No sidecar panics or exits (observer), none reports a token
// smaller than one it reported before (observer), and a sidecar leads
// again after each write.
func TestHostileLease(t *testing.T) {
	annotate := func(l *coordinationv1.Lease, v string) {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[fence.Annotation] = v
	}
	steps := []struct {
		name string
		// deposes: the write takes the Lease from the leader, so a new term
		// must follow; otherwise the leader keeps its term and republishes
		// its token over the hostile annotation.
		deposes bool
		write   func(*coordinationv1.Lease)
	}{
		{"empty holder without times, duration or transitions", true, func(l *coordinationv1.Lease) {
			l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("")}
		}},
		{"holder with missing times, duration and transitions", true, func(l *coordinationv1.Lease) {
			l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("ghost-without-times")}
		}},
		{"huge leaseTransitions (MaxInt32)", true, func(l *coordinationv1.Lease) {
			intruder(l, "ghost-maxint")
			l.Spec.LeaseTransitions = ptr.To(int32(math.MaxInt32))
		}},
		{"unknown holder that never renews", true, func(l *coordinationv1.Lease) { intruder(l, "ghost-never-renews") }},
		{"non-numeric token annotation", false, func(l *coordinationv1.Lease) { annotate(l, "not-a-token") }},
		{"huge token annotation (MaxUint64)", false, func(l *coordinationv1.Lease) { annotate(l, "18446744073709551615") }},
		{"overflowing token annotation", false, func(l *coordinationv1.Lease) { annotate(l, "99999999999999999999999") }},
		{"unknown holder with a huge token annotation", true, func(l *coordinationv1.Lease) {
			intruder(l, "ghost-huge-token")
			annotate(l, "18446744073709551615")
		}},
		{"unknown holder with a small forged token annotation", true, func(l *coordinationv1.Lease) {
			intruder(l, "ghost-small-token")
			annotate(l, "1")
		}},
	}
	runScenario(t, "9 hostile lease", func(e *env) {
		e.startFleet()
		leader, st := e.awaitOneLeader(steady)

		for _, step := range steps {
			sent, written := e.editLease(step.write)
			if step.deposes {
				s := e.awaitTerm(sent, st.FencingToken, failoverBound)
				e.recovered(step.name+" → "+s.m.Name+" leads", s.recv.Sub(sent), failoverBound)
				leader, st = e.awaitOneLeader(handoverBound)
				if ptr.Deref(written.Spec.LeaseTransitions, 0) == math.MaxInt32 && st.Term != math.MaxInt32 {
					t.Errorf("%s: the term after MaxInt32 is %d, want it to saturate at MaxInt32", step.name, st.Term)
				}
				continue
			}
			// The leader keeps its term and republishes its own token.
			want := st.FencingToken.String()
			poll.Until(t, time.Until(sent.Add(failsAfter(failoverBound))), 20*time.Millisecond,
				fmt.Sprintf("%s: the leader republished its token %s (twice the bound %v after the write)", step.name, want, failoverBound),
				func() bool { return e.getLease().Annotations[fence.Annotation] == want })
			e.withinBound(step.name+": leader "+leader.Name+" republished token "+want, time.Since(sent), failoverBound)
			now, nst := e.awaitOneLeader(handoverBound)
			if now != leader || nst.FencingToken != st.FencingToken {
				t.Errorf("%s: %s leads with token %d; want %s to keep its term (token %d)", step.name, now.Name, nst.FencingToken, leader.Name, st.FencingToken)
			}
		}
	})
}

// 10. Rolling restart of all instances, one by one, as a Deployment rollout
// does it: SIGTERM one, start its replacement, wait until it is ready, next.
func TestRollingRestart(t *testing.T) {
	runScenario(t, "10 rolling restart", func(e *env) {
		for _, old := range e.startFleet() {
			leader, st := e.awaitOneLeader(steady)
			at := e.terminate(old)
			if old == leader {
				s := e.awaitTerm(at, st.FencingToken, handoverBound, e.others(old)...)
				e.recovered("rollout of leader "+old.Name+" → "+s.m.Name+" leads", s.recv.Sub(at), handoverBound)
			}
			e.awaitExit(old, at)
			e.start(old.Name + "2")
		}
		e.awaitOneLeader(handoverBound)
	})
}

// 11. Health-gated candidacy under a flapping, crashing app. Every member
// probes its own fake app (app_test.go): a's and b's answer 200, c's has
// never answered 2xx. (a) c never leads and says it is no candidate. (b) The
// leader's app crashes (connection refused): the leader steps down, writes
// a release, and the other member with a healthy app leads within
// healthFailoverBound, well before the Lease could have expired; the app
// comes back on the same URL without disturbing the successor. (c) Every
// app flaps for seconds (seeded random schedule, logged) between 200, 503,
// hanging and crashed, with stretches in which no app is healthy: nobody
// leads in those once withdrawn, and the observer's invariants hold
// throughout. (d) All apps healthy again: one leader within calmBound, and
// it reports a healthy app.
func TestAppHealthGatedCandidacy(t *testing.T) {
	runScenario(t, "11 app health (flapping, crashing)", func(e *env) {
		leases := e.watchLease()
		var ms []*member
		for _, app := range []*fakeApp{
			newFakeApp(e.t, "a", appHealthy), newFakeApp(e.t, "b", appHealthy), newFakeApp(e.t, "c", appFailing),
		} {
			ms = append(ms, e.startWith(app.name, app))
		}
		c := ms[2]

		// (a) c's app has never been healthy: c does not campaign.
		leader, st := e.awaitOneLeader(steady)
		if leader == c {
			e.t.Fatalf("%s leads, but its app never answered 2xx", c.Name)
		}
		if h := st.AppHealth; !st.Candidate || h == nil || !h.Healthy {
			e.t.Errorf("leader %s reports candidate %v, appHealth %+v; want a candidate with a healthy app", leader.Name, st.Candidate, h)
		}
		cs := e.awaitSample(c, time.Now(), healthWithdrawBound+schedulingSlack, "never-healthy app probed threshold times",
			func(s sample) bool {
				return s.st.AppHealth != nil && s.st.AppHealth.ConsecutiveFailures >= appThreshold
			})
		if h := cs.st.AppHealth; cs.st.Candidate || cs.st.Leader || h.Healthy || h.LastSuccessAt != "" || !strings.Contains(h.LastError, "503") {
			e.t.Errorf("%s, whose app only ever answered 503: candidate %v, leader %v, appHealth %+v; want no candidate, unhealthy, no success, lastError status 503",
				c.Name, cs.st.Candidate, cs.st.Leader, *h)
		}

		// (b) The leader's app crashes.
		succ := ms[0]
		if leader == succ {
			succ = ms[1]
		}
		crashed, err := leader.app.set(e.t, appCrashed)
		if err != nil {
			e.t.Fatal(err)
		}
		down := e.awaitSample(leader, crashed, healthWithdrawBound+schedulingSlack, "leader withdraws after its app crashed",
			func(s sample) bool { return !s.st.Leader })
		if h := down.st.AppHealth; down.st.Candidate || h == nil || h.Healthy || !strings.Contains(h.LastError, "connection refused") {
			e.t.Errorf("%s's first answer without leadership after its app crashed: candidate %v, appHealth %+v; want no candidate, unhealthy, connection refused",
				leader.Name, down.st.Candidate, h)
		}
		s := e.awaitTerm(crashed, st.FencingToken, healthFailoverBound, e.others(leader)...)
		e.recovered("app of leader "+leader.Name+" crashed → "+s.m.Name+" leads", s.recv.Sub(crashed), healthFailoverBound)
		if s.m != succ {
			e.t.Errorf("%s took over; want %s, the only other member with a healthy app", s.m.Name, succ.Name)
		}
		// The withdrawn leader wrote its release: the first write after
		// its last renewal empties the holder, signed by it, quickly.
		rel := leases.await(e, crashed, healthWithdrawBound+schedulingSlack, func(ev leaseEvent) bool { return ev.holder != leader.identity || ev.deleted })
		renewed, ok := leases.lastBefore(rel.at, func(ev leaseEvent) bool { return ev.holder == leader.identity })
		switch {
		case rel.deleted || rel.holder != "" || rel.releasedBy != leader.identity:
			e.t.Errorf("the first Lease write after %s's app crashed is not its release: %s", leader.Name, rel)
		case !ok:
			e.t.Errorf("no renewal by %s seen before its release %s", leader.Name, rel)
		case !s.acquiredAt.Before(renewed.at.Add(leaseDuration - retryPeriod)):
			e.t.Errorf("%s acquired at %s, not before %s's last record (seen %s) could expire: an expiry, not a release",
				s.m.Name, clock(s.acquiredAt), leader.Name, clock(renewed.at))
		default:
			e.t.Logf("%s released the Lease %v after its app crashed; %s acquired %v after that, %v before its record could have expired",
				leader.Name, rel.at.Sub(crashed).Round(time.Millisecond), s.m.Name, s.acquiredAt.Sub(rel.at).Round(time.Millisecond),
				renewed.at.Add(leaseDuration).Sub(s.acquiredAt).Round(time.Millisecond))
		}
		// The app restarts on the same URL: its member campaigns again but
		// cannot disturb the successor's term.
		back, err := leader.app.set(e.t, appHealthy)
		if err != nil {
			e.t.Fatal(err)
		}
		e.awaitSample(leader, back, healthReturnBound, "app back on the same URL: candidate again", func(o sample) bool {
			return o.st.Candidate && o.st.AppHealth != nil && o.st.AppHealth.Healthy
		})
		if now, nst := e.awaitOneLeader(handoverBound); now != s.m || nst.FencingToken != s.st.FencingToken {
			e.t.Errorf("after %s's app came back %s leads with token %d; want %s undisturbed (token %d)",
				leader.Name, now.Name, nst.FencingToken, s.m.Name, s.st.FencingToken)
		}

		// (c) Every app flaps, with stretches in which none is healthy,
		// long enough for everyone to withdraw.
		f := newFlapper(e, ms)
		flapping := time.Now()
		f.flap(2500 * time.Millisecond)
		f.allDown(withdrawWindow)
		f.flap(2500 * time.Millisecond)
		f.allDown(withdrawWindow)

		// (d) All apps healthy again.
		var above fence.Token
		for _, o := range e.obs.Samples() {
			above = max(above, o.st.FencingToken)
		}
		calm := time.Now()
		for _, m := range ms {
			f.set(m, appHealthy)
		}
		calmBound := appInterval + appTimeout + handoverBound // one probe passes, then a released Lease is taken
		s = e.awaitTerm(calm, above, calmBound)
		e.recovered("all apps healthy again → "+s.m.Name+" leads", s.recv.Sub(calm), calmBound)
		last, lst := e.awaitOneLeader(handoverBound)
		if h := lst.AppHealth; !lst.Candidate || h == nil || !h.Healthy {
			e.t.Errorf("leader %s reports candidate %v, appHealth %+v; want a candidate with a healthy app", last.Name, lst.Candidate, h)
		}
		for _, m := range ms {
			e.awaitSample(m, calm, healthReturnBound, "candidate with a healthy app", func(o sample) bool {
				return o.st.Candidate && o.st.AppHealth != nil && o.st.AppHealth.Healthy
			})
		}

		// What the samples show over the whole trial.
		samples := e.obs.Samples()
		f.checkAllDown(samples)
		terms := map[*member]map[fence.Token]bool{}
		started, withdrawals := 0, 0
		prev := map[*member]sample{}
		for _, o := range samples {
			first, _ := o.m.app.oks()
			if (o.st.Leader || o.st.Candidate) && (first.IsZero() || o.recv.Before(first)) {
				e.t.Errorf("%s campaigned before its app ever answered 2xx (first 200 at %s): candidate %v, %s", o.m.Name, clock(first), o.st.Candidate, o)
			}
			if o.st.Leader && o.recv.After(flapping) && o.recv.Before(calm) {
				if terms[o.m] == nil {
					terms[o.m] = map[fence.Token]bool{}
				}
				if !terms[o.m][o.st.FencingToken] && o.acquiredAt.After(flapping) {
					started++
				}
				terms[o.m][o.st.FencingToken] = true
			}
			if p, ok := prev[o.m]; ok && p.st.Leader && !o.st.Leader && !o.st.Candidate && o.recv.After(flapping) {
				withdrawals++
			}
			prev[o.m] = o
		}
		if started < 2 {
			e.t.Errorf("only %d terms started while the apps flapped: the schedule did not exercise handovers", started)
		}
		e.t.Logf("while the apps flapped (%d modes set in %v): %d terms started, %d leaders seen withdrawing; apps: %s; %s; %s",
			f.changes, calm.Sub(flapping).Round(time.Millisecond), started, withdrawals, ms[0].app.answers(), ms[1].app.answers(), ms[2].app.answers())
	})
}
