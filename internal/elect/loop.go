package elect

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/fence"
)

// pollJitter spreads polling candidates over [1, 1.2) × RetryPeriod.
const pollJitter = 0.2

// loop is the election state, owned by Run's goroutine alone.
type loop struct {
	*Elector
	leases coordinationv1client.LeaseInterface

	// What this instance knows of the Lease.
	known      bool                  // lease has been read (or found missing) at least once
	lease      *coordinationv1.Lease // latest known object; nil when it does not exist
	observedAt time.Time             // when the Lease last changed, as seen here
	latestRV   string                // largest resourceVersion seen, including deletions
	lastOwnRV  string                // resourceVersion of this instance's last successful write
	lastTerm   *int32                // leaseTransitions last seen, kept across a deletion
	claim      *claim                // the last holder seen and when its record expires; nil when free

	term *term // the current term, nil when not leading

	watchUp      bool
	nextPoll     time.Time // candidates without a watch poll at this time
	retryAt      time.Time // no acquire attempt before this (after an error)
	stayOutUntil time.Time // no campaigning before this (after Release)
	withdrawn    bool      // out of the election until SetCandidate(true)

	reportedFloor fence.Token // largest token ever reported: reports never go backwards
}

// term is one term of leadership held by this instance.
type term struct {
	token       fence.Token
	transitions int32
	acquireTime metav1.MicroTime
	validUntil  time.Time // fence.ValidUntil of the last successful write
	nextRenew   time.Time
}

func newLoop(e *Elector) *loop {
	return &loop{Elector: e, leases: e.cfg.Leases.Leases(e.cfg.Namespace), withdrawn: e.cfg.StartWithdrawn}
}

func (l *loop) run(ctx context.Context, events <-chan watchEvent) error {
	l.metrics.watchUp.Set(0)
	for {
		l.publish()
		wake, stopTimer := l.wakeChannel()
		var err error
		select {
		case <-ctx.Done():
			stopTimer()
			l.shutdown()
			return nil
		case ev := <-events:
			l.handleWatch(ev)
		case req := <-l.requests:
			req.reply <- req.do(ctx, l)
		case <-wake:
			err = l.act(ctx)
		}
		stopTimer()
		if err != nil {
			l.stepDown("fatal: " + err.Error())
			l.publish()
			return err
		}
	}
}

// wakeChannel returns a channel that fires at nextWake (at once if that has
// passed) and a func that releases its timer.
func (l *loop) wakeChannel() (<-chan time.Time, func()) {
	d := l.nextWake().Sub(l.clock.Now())
	if d <= 0 {
		now := make(chan time.Time, 1)
		now <- l.clock.Now()
		return now, func() {}
	}
	timer := l.clock.NewTimer(d)
	return timer.C(), func() { timer.Stop() }
}

// nextWake is when the loop must act next, whatever else happens.
func (l *loop) nextWake() time.Time {
	now := l.clock.Now()
	heartbeat := now.Add(l.cfg.LeaseDuration) // keeps Snapshot.Heartbeat moving
	if l.term != nil {
		return earliest(l.term.nextRenew, l.term.validUntil, heartbeat)
	}
	if l.withdrawn {
		return heartbeat
	}
	if now.Before(l.stayOutUntil) {
		return earliest(l.stayOutUntil, heartbeat)
	}
	wake := heartbeat
	switch {
	case l.eligible(now):
		wake = now
	case l.known:
		wake = l.freeAt()
	}
	if !l.known || !l.watchUp {
		wake = earliest(wake, l.nextPoll)
	}
	return earliest(latest(wake, l.retryAt), heartbeat)
}

// act does what the moment calls for: renew, poll, or try to acquire.
func (l *loop) act(ctx context.Context) error {
	now := l.clock.Now()
	if l.term != nil {
		if !now.Before(l.term.validUntil) {
			l.stepDown("renew deadline passed without a successful renewal")
			return nil
		}
		if !now.Before(l.term.nextRenew) {
			l.renew(ctx)
		}
		return nil
	}
	if !l.campaigning(now) || now.Before(l.retryAt) {
		return nil
	}
	if !l.known || (!l.watchUp && !now.Before(l.nextPoll)) {
		l.nextPoll = now.Add(wait.Jitter(l.cfg.RetryPeriod, pollJitter))
		if err := l.refresh(ctx); err != nil {
			l.log.Warn("cannot read the Lease", "err", err)
			return nil
		}
	}
	if l.eligible(l.clock.Now()) {
		return l.acquire(ctx)
	}
	return nil
}

// eligible reports whether a candidate may try to acquire at now.
func (l *loop) eligible(now time.Time) bool {
	switch {
	case !l.known || !l.campaigning(now):
		return false
	case l.lease != nil && l.lease.ResourceVersion == l.lastOwnRV:
		return true // our own last write: nobody acquired since
	default:
		return !now.Before(l.freeAt())
	}
}

// campaigning reports whether this instance is a candidate at now: not
// withdrawn and not staying out after a Release.
func (l *loop) campaigning(now time.Time) bool {
	return !l.withdrawn && !now.Before(l.stayOutUntil)
}

// freeAt is when the Lease may be taken, as judged here. A held Lease
// expires at the local time its record was observed plus the holder's
// duration (never its renewTime). A Lease that was released by its holder,
// or that was never seen held, is free at once. But a Lease that was
// deleted, or emptied by someone other than its holder, while held is free
// only when the last holder's record expires: that holder may not have seen
// the change yet and may still, rightly, be claiming leadership until its
// validity ends. Taking it at once would let two instances claim at the
// same time (the fencing token would still tell their writes apart).
func (l *loop) freeAt() time.Time {
	if l.claim == nil {
		return time.Time{}
	}
	return l.claim.expiry
}

// claim is the last holder this instance saw, and when its record expires.
type claim struct {
	holder string
	expiry time.Time
}

// updateClaim follows the Lease's holder after an observation at now.
func (l *loop) updateClaim(lease *coordinationv1.Lease, now time.Time) {
	holder := holderOf(lease)
	switch {
	case holder != "":
		l.claim = &claim{holder: holder, expiry: now.Add(durationOf(lease, l.cfg.LeaseDuration))}
	case l.claim == nil:
	case l.claim.holder == l.cfg.Identity:
		l.claim = nil // our own claim: we stepped down on seeing this
	case lease != nil && lease.Annotations[ReleasedByAnnotation] == l.claim.holder:
		l.claim = nil // released by its holder, who stepped down first
	}
}

// handleWatch applies one report of the watcher.
func (l *loop) handleWatch(ev watchEvent) {
	switch ev.kind {
	case observed:
		l.observe(ev.lease, ev.rv)
	case up:
		if !l.watchUp {
			l.log.Info("watching the Lease; candidates take a released Lease without polling")
		}
		l.watchUp = true
		l.metrics.watchUp.Set(1)
	case down:
		if l.watchUp {
			l.log.Warn("lease watch unavailable; falling back to polling every retryPeriod", "err", ev.err, "retryPeriod", l.cfg.RetryPeriod)
		} else {
			l.log.Debug("lease watch still unavailable", "err", ev.err)
		}
		l.watchUp = false
		l.metrics.watchUp.Set(0)
		l.nextPoll = l.clock.Now().Add(wait.Jitter(l.cfg.RetryPeriod, pollJitter))
	}
}

// observe records what the Lease looks like at resourceVersion rv (lease nil
// when it does not exist), ignoring anything older than what is known, and
// ends the term the moment the Lease shows that this instance lost it.
func (l *loop) observe(lease *coordinationv1.Lease, rv string) {
	if l.latestRV != "" && rv != "" && !newer(rv, l.latestRV) {
		return // stale or already seen
	}
	if rv != "" {
		l.latestRV = rv
	}
	if l.known && lease == nil && l.lease == nil {
		return
	}
	prevHolder := holderOf(l.lease)
	l.known, l.lease, l.observedAt = true, lease, l.clock.Now()
	if lease != nil {
		l.lastTerm = ptr.To(transitionsOf(lease))
	}
	l.updateClaim(lease, l.observedAt)
	if holder := holderOf(lease); holder != prevHolder {
		l.metrics.transitions.Inc()
		l.log.Info("lease holder changed", "from", prevHolder, "to", holder)
	}
	if l.term == nil {
		return
	}
	switch holder := holderOf(lease); {
	case lease == nil:
		l.stepDown("the Lease was deleted")
	case holder != l.cfg.Identity:
		l.stepDown("the Lease is now held by " + quoteOrNone(holder))
	}
}

// ownWrite records an object this instance has just written.
func (l *loop) ownWrite(lease *coordinationv1.Lease) {
	l.observe(lease, lease.ResourceVersion)
	l.lastOwnRV = lease.ResourceVersion
}

// refresh reads the Lease afresh with a Get.
func (l *loop) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.requestTimeout())
	defer cancel()
	lease, err := l.leases.Get(ctx, l.cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l.observe(nil, "")
		return nil
	case err != nil:
		return err
	}
	l.observe(lease, lease.ResourceVersion)
	return nil
}

// acquire tries to start a term with one write conditioned on the version
// of the Lease judged free: a Create when it is missing, else an Update with
// its resourceVersion. The token is the resourceVersion of that write.
func (l *loop) acquire(ctx context.Context) error {
	sent := l.clock.Now()
	now := metav1.NewMicroTime(sent)
	desired := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.cfg.Name, Namespace: l.cfg.Namespace}}
	if l.lease != nil {
		desired = l.lease.DeepCopy()
	}
	// A new term: the previous term's token must not be read as ours.
	delete(desired.Annotations, fence.Annotation)
	delete(desired.Annotations, ReleasedByAnnotation)
	transitions := int32(0) // a Lease never seen: the first term
	if l.lastTerm != nil {
		transitions = nextTransitions(*l.lastTerm) // also across a deletion
	}
	desired.Spec = coordinationv1.LeaseSpec{
		HolderIdentity:       &l.cfg.Identity,
		LeaseDurationSeconds: ptr.To(int32(l.cfg.LeaseDuration / time.Second)),
		AcquireTime:          &now,
		RenewTime:            &now,
		LeaseTransitions:     &transitions,
	}

	reqCtx, cancel := context.WithTimeout(ctx, l.cfg.requestTimeout())
	var written *coordinationv1.Lease
	var err error
	if l.lease == nil {
		written, err = l.leases.Create(reqCtx, desired, metav1.CreateOptions{})
	} else {
		written, err = l.leases.Update(reqCtx, desired, metav1.UpdateOptions{})
	}
	cancel()
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err):
		// Someone else wrote first: learn what they wrote.
		if err := l.refresh(ctx); err != nil {
			l.retryAt = l.clock.Now().Add(l.cfg.RetryPeriod)
		}
		return nil
	case err != nil:
		l.log.Warn("acquire failed", "err", err)
		l.retryAt = l.clock.Now().Add(l.cfg.RetryPeriod)
		return nil
	}

	token, err := fence.FromResourceVersion(written.ResourceVersion)
	if err != nil {
		return err // no fencing possible: refuse to lead at all
	}
	if floor := tokenOf(l.latestRV); token <= floor {
		// etcd's revisions went backwards (restored without
		// --bump-revision?): this token would not fence older terms.
		l.ownWrite(written)
		l.log.Error("refusing a term whose token is not larger than a resourceVersion already seen", "token", token, "seen", floor)
		l.releaseLease(ctx)
		l.retryAt = l.clock.Now().Add(l.cfg.RetryPeriod)
		return nil
	}
	l.term = &term{
		token:       token,
		transitions: transitions,
		acquireTime: now,
		validUntil:  fence.ValidUntil(sent, l.cfg.RenewDeadline),
		nextRenew:   sent, // publish the token right away
	}
	l.ownWrite(written)
	l.log.Info("acquired the Lease", "token", token, "term", transitions, "validUntil", l.term.validUntil)
	l.publish()
	l.renew(ctx)
	return nil
}

// renew extends the term with one optimistic Update of the cached object,
// which also (re)publishes the term's token. On a conflict it reads the
// Lease afresh: if another holder shows, the term ends there.
func (l *loop) renew(ctx context.Context) {
	sent := l.clock.Now()
	desired := l.lease.DeepCopy()
	now := metav1.NewMicroTime(sent)
	desired.Spec.HolderIdentity = &l.cfg.Identity
	desired.Spec.LeaseDurationSeconds = ptr.To(int32(l.cfg.LeaseDuration / time.Second))
	desired.Spec.AcquireTime = &l.term.acquireTime
	desired.Spec.RenewTime = &now
	desired.Spec.LeaseTransitions = &l.term.transitions
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	desired.Annotations[fence.Annotation] = l.term.token.String()

	reqCtx, cancel := context.WithTimeout(ctx, l.cfg.requestTimeout())
	written, err := l.leases.Update(reqCtx, desired, metav1.UpdateOptions{})
	cancel()
	l.metrics.renewDuration.Observe(l.clock.Since(sent).Seconds())
	if err == nil {
		l.ownWrite(written)
		if !l.clock.Now().Before(l.term.validUntil) {
			// Readers have already been told this term is over; a term is
			// one unbroken span of validity, so start a new one (with a new
			// token) rather than resume this one.
			l.stepDown("renewal completed after validity ran out")
			return
		}
		l.term.validUntil = fence.ValidUntil(sent, l.cfg.RenewDeadline)
		l.term.nextRenew = sent.Add(l.cfg.RetryPeriod)
		return
	}
	l.metrics.renewFailures.Inc()
	l.term.nextRenew = sent.Add(l.cfg.RetryPeriod)
	if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		l.log.Warn("renew failed; still leader until validUntil", "err", err, "validUntil", l.term.validUntil)
		return
	}
	if err := l.refresh(ctx); err != nil {
		l.log.Warn("renew conflicted and the Lease cannot be read", "err", err)
		return
	}
	if l.term != nil {
		// Still ours: someone else edited it (say, an annotation). Renew
		// again now, on the fresh version.
		l.term.nextRenew = l.clock.Now()
	}
}

// stepDown ends the current term, if any. Snapshots published from now on
// say "not leader".
func (l *loop) stepDown(reason string) {
	if l.term == nil {
		return
	}
	l.log.Info("stepped down", "reason", reason, "token", l.term.token)
	l.term = nil
}

// leave ends the term, if any, publishes that before anything else, and
// then releases the Lease if a fresh read shows this instance holds it (also
// when no term was known: an acquire whose answer was lost).
func (l *loop) leave(ctx context.Context, reason string) releaseResult {
	l.stepDown(reason)
	l.publish() // no one may read "leader" while the release is written
	released, err := l.releaseLease(ctx)
	return releaseResult{released: released, err: err}
}

// shutdown ends the term and, if configured, releases the Lease.
func (l *loop) shutdown() {
	l.stepDown("shutting down")
	l.publish()
	if !l.cfg.ReleaseOnStop || holderOf(l.lease) != l.cfg.Identity {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.RenewDeadline)
	defer cancel()
	if released, err := l.releaseLease(ctx); err != nil {
		l.log.Warn("release on shutdown failed; others take over when the Lease expires", "err", err)
	} else if released {
		l.log.Info("released the Lease")
	}
}

// publish makes the loop's state the current Snapshot.
func (l *loop) publish() {
	now := l.clock.Now()
	s := Snapshot{
		Identity:   l.cfg.Identity,
		Namespace:  l.cfg.Namespace,
		Lease:      l.cfg.Name,
		Holder:     holderOf(l.lease),
		Term:       transitionsOf(l.lease),
		ObservedAt: l.observedAt,
		Observed:   l.known,
		WatchUp:    l.watchUp,
		Candidate:  l.campaigning(now),
		Heartbeat:  now,
	}
	if l.lease != nil {
		s.AcquiredAt = microTimeOf(l.lease.Spec.AcquireTime)
		s.RenewedAt = microTimeOf(l.lease.Spec.RenewTime)
	}
	if l.term != nil {
		s.Leading, s.ValidUntil = true, l.term.validUntil
		s.Holder, s.Term, s.Token = l.cfg.Identity, l.term.transitions, l.term.token
		s.AcquiredAt = l.term.acquireTime.Time
	} else if s.Holder != "" {
		if t, ok := fence.Published(l.lease.Annotations); ok && fence.Credible(t, tokenOf(l.lease.ResourceVersion), l.reportedFloor) {
			s.Token = t
		}
	}
	l.reportedFloor = max(l.reportedFloor, s.Token)
	l.snapshots.Publish(s)
}

func quoteOrNone(s string) string {
	if s == "" {
		return "nobody (released)"
	}
	return `"` + s + `"`
}

func earliest(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.Before(m) {
			m = t
		}
	}
	return m
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
