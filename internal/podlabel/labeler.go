package podlabel

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/fence"
)

// Labeler keeps the leader label on the sidecar's own Pod. Create it with
// New and start it with Run (once).
type Labeler struct {
	cfg Config
	key string // the leader label's key: Key, or GroupLeaderKey in a group
	// electionKey and election are the election label and its value:
	// LeaseKey naming the Lease, or in a group GroupKey naming the group.
	electionKey, election string
	pods                  PodClient
	clock                 clock.WithTicker
	log                   *slog.Logger
	metrics               *Metrics
	started               atomic.Bool

	// idle, when set (by tests), is called each time Run is about to block,
	// with the time its timer fires (armed false: no timer, only a change of
	// the Source or the end of the context wakes it).
	idle func(wake time.Time, armed bool)
}

// New checks cfg and returns a Labeler that has not started.
func New(cfg Config) (*Labeler, error) {
	switch {
	case cfg.Pods == nil:
		return nil, errors.New("podlabel: Pods client is required")
	case cfg.Source == nil:
		return nil, errors.New("podlabel: Source is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Labeler{
		cfg:         cfg,
		key:         cfg.Key,
		electionKey: LeaseKey,
		election:    electionValue(cfg.LeaseNamespace, cfg.LeaseName, cfg.Namespace),
		pods:        cfg.Pods,
		clock:       cfg.Clock,
		log:         cfg.Logger,
		metrics:     cfg.Metrics,
	}
	if cfg.Group != "" {
		l.key = GroupLeaderKey(cfg.Key, cfg.LeaseName)
		l.electionKey, l.election = GroupKey, electionValue(cfg.LeaseNamespace, cfg.Group, cfg.Namespace)
	}
	if l.clock == nil {
		l.clock = clock.RealClock{}
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.metrics == nil {
		l.metrics = NewMetrics(nil)
	}
	l.log = l.log.With("pod", cfg.Namespace+"/"+cfg.PodName, "label", l.key)
	l.metrics.leader.Set(0)
	return l, nil
}

// state is the Labeler's knowledge, owned by Run's goroutine alone.
type state struct {
	desired bool        // Snapshot.Leading, as last observed
	token   fence.Token // the token of the term last observed leading; 0 when not leading

	known   bool      // written is what the own Pod carries, as far as this instance knows
	written bool      // the value of the last successful write on the own Pod
	retryAt time.Time // no write of the own Pod before this (after a failure)

	cleanupAt time.Time // while leading: when to clear others' stale labels next
}

// observe takes the desired value from snap. A new term (leading after not
// leading, or a new token) makes the cleanup due at once.
func (s *state) observe(snap *elect.Snapshot, now time.Time) {
	if snap.Leading && (!s.desired || snap.Token != s.token) {
		s.cleanupAt = now
	}
	s.desired = snap.Leading
	s.token = 0
	if snap.Leading {
		s.token = snap.Token
	}
}

// mustWrite: the own Pod may not carry the desired value.
func (s *state) mustWrite() bool { return !s.known || s.written != s.desired }

// mayBeTrue: the own Pod may carry true.
func (s *state) mayBeTrue() bool { return !s.known || s.written }

// nextWake is when the loop must act without being told of a change; armed
// is false when only a change (or the end of the context) calls for action.
func (s *state) nextWake() (wake time.Time, armed bool) {
	switch {
	case s.mustWrite():
		return s.retryAt, true
	case s.desired:
		return s.cleanupAt, true
	}
	return time.Time{}, false
}

// Run keeps the label until ctx ends, then writes false if the own Pod may
// carry true (bounded by 2s) and returns nil. It returns an error only if
// called twice.
func (l *Labeler) Run(ctx context.Context) error {
	if !l.started.CompareAndSwap(false, true) {
		return errors.New("podlabel: Run called twice")
	}
	var s state
	for {
		snap := l.cfg.Source.Snapshot()
		s.observe(snap, l.clock.Now())
		if ctx.Err() != nil {
			l.shutdown(ctx, &s)
			return nil
		}
		l.step(ctx, &s)

		wake, armed := s.nextWake()
		now := l.clock.Now()
		if armed && !wake.After(now) {
			continue // due now: observe afresh, then act
		}
		var (
			timer clock.Timer
			fire  <-chan time.Time
		)
		if armed {
			timer = l.clock.NewTimer(wake.Sub(now))
			fire = timer.C()
		}
		if l.idle != nil {
			l.idle(wake, armed)
		}
		select {
		case <-ctx.Done():
		case <-snap.Changed():
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// step does what is due: first the own Pod's value, then (while leading,
// with the own true written) the cleanup of others' stale labels.
func (l *Labeler) step(ctx context.Context, s *state) {
	now := l.clock.Now()
	if s.mustWrite() {
		if !now.Before(s.retryAt) {
			l.writeOwn(ctx, s, s.desired)
		}
		return // observe afresh before anything else: the write took time
	}
	if s.desired && !now.Before(s.cleanupAt) {
		l.cleanup(ctx, s)
	}
}

// writeOwn writes value on the own Pod. After a failure the value on the
// Pod is unknown (the write may have landed) and the next write waits
// RetryPeriod; whatever is desired then is written.
func (l *Labeler) writeOwn(ctx context.Context, s *state, value bool) {
	reqCtx, cancel := context.WithTimeout(ctx, l.cfg.requestTimeout())
	err := l.patchOwn(reqCtx, value)
	cancel()
	if err != nil {
		s.known = false
		if ctx.Err() != nil {
			return // shutting down: shutdown decides what to write
		}
		s.retryAt = l.clock.Now().Add(l.cfg.RetryPeriod)
		l.failed("cannot label the own Pod", "patch", l.cfg.PodName, err, "value", value)
		return
	}
	s.known, s.written, s.retryAt = true, value, time.Time{}
	l.metrics.leader.Set(gauge(value))
	l.log.Info("labelled the own Pod", "value", strconv.FormatBool(value))
}

// cleanup lists the Pods of this election that carry true and sets every
// other one to false, each conditional on the resourceVersion listed and
// sent only while this instance is leader. It also checks that the own Pod
// is among them (with both labels), and marks the own value unknown (to be
// written again) if not.
func (l *Labeler) cleanup(ctx context.Context, s *state) {
	if !l.leads() {
		// Validity ran out; the Elector publishes the step-down. Check again
		// then, or after RetryPeriod at the latest.
		s.cleanupAt = l.clock.Now().Add(l.cfg.RetryPeriod)
		return
	}
	pods, err := l.listLabeled(ctx)
	if err != nil {
		if ctx.Err() == nil {
			l.failed("cannot list Pods to clear stale leader labels", "list", "", err)
		}
		s.cleanupAt = l.clock.Now().Add(l.cfg.RetryPeriod)
		return
	}
	again, ownTrue := false, false
	for _, p := range pods {
		if p.Name == l.cfg.PodName {
			ownTrue = true
			continue
		}
		if !l.leads() {
			again = true
			break
		}
		err := l.clearStale(ctx, p.Name, p.ResourceVersion)
		switch {
		case err == nil:
			l.metrics.cleared.Inc()
			l.log.Info("cleared a stale leader label", "other", p.Name)
		case apierrors.IsNotFound(err):
			// Gone: nothing to route to.
		case apierrors.IsConflict(err):
			again = true
			l.log.Info("a Pod with a stale leader label changed since it was listed; checking again", "other", p.Name, "retryPeriod", l.cfg.RetryPeriod)
		case ctx.Err() != nil:
			return
		default:
			again = true
			l.failed("cannot clear a stale leader label", "patch", p.Name, err)
		}
	}
	if !ownTrue {
		s.known = false
		l.log.Warn("the own Pod does not carry the leader label with this election's label; writing it again", "election", l.election)
	}
	next := l.cfg.Resync
	if again {
		next = l.cfg.RetryPeriod
	}
	s.cleanupAt = l.clock.Now().Add(next)
}

// leads reports whether the Source says this instance may act as leader now.
func (l *Labeler) leads() bool {
	return l.cfg.Source.Snapshot().IsLeader(l.clock.Now())
}

// shutdown writes false once more if the own Pod may carry true, with a
// fresh context bounded by finalTimeout.
func (l *Labeler) shutdown(ctx context.Context, s *state) {
	if !s.mayBeTrue() {
		return
	}
	finalCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalTimeout)
	defer cancel()
	if err := l.patchOwn(finalCtx, false); err != nil {
		l.failed("cannot remove the leader label on shutdown; the next leader's cleanup or this Pod's restart clears it", "patch", l.cfg.PodName, err)
		return
	}
	l.metrics.leader.Set(0)
	l.log.Info("labelled the own Pod on shutdown", "value", "false")
}

// failed counts and logs a failed request on target (a Pod name, "" for a
// list), naming the RBAC verb when it was forbidden.
func (l *Labeler) failed(msg, verb, target string, err error, attrs ...any) {
	l.metrics.failures.Inc()
	attrs = append(attrs, "err", err, "retryPeriod", l.cfg.RetryPeriod)
	if target != "" && target != l.cfg.PodName {
		attrs = append(attrs, "other", target)
	}
	switch {
	case apierrors.IsForbidden(err):
		l.log.Error(msg+`: forbidden; the ServiceAccount needs the RBAC verb "`+verb+`" on pods`, append(attrs, "verb", verb)...)
	case apierrors.IsNotFound(err) && target == l.cfg.PodName:
		l.log.Error(msg+": Pod "+l.cfg.Namespace+"/"+l.cfg.PodName+" not found; check POD_NAME and POD_NAMESPACE", attrs...)
	default:
		l.log.Warn(msg, attrs...)
	}
}

func gauge(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
