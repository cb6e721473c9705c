package e2e

import (
	"math"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/fence"
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
// expires. (This suite found that candidates used to take it at once.)
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
			deadline := time.Now().Add(failoverBound)
			for e.getLease().Annotations[fence.Annotation] != want {
				if time.Now().After(deadline) {
					t.Fatalf("%s: the leader did not republish its token %s within %v", step.name, want, failoverBound)
				}
				time.Sleep(20 * time.Millisecond)
			}
			e.t.Logf("%s: leader %s republished token %s after %v", step.name, leader.Name, want, time.Since(sent).Round(time.Millisecond))
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
