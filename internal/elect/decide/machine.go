package decide

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/fence"
)

// pollJitter spreads polling candidates over [1, 1.2) × RetryPeriod.
const pollJitter = 0.2

// Machine is the election state of one candidate for one Lease. It is not
// safe for concurrent use: one goroutine (the driver's) owns it.
type Machine struct {
	cfg  Config
	rand *rand.Rand

	// What this instance knows of the Lease.
	known        bool
	lease        *coordinationv1.Lease // latest known record; nil when missing
	seenAt       time.Time             // local time the current version (or the absence) was first observed
	latestRV     string                // largest resourceVersion accepted: older watch events are stale
	tokenFloor   fence.Token           // largest resourceVersion ever seen: a new term's token must exceed it
	lastOwnRV    string                // resourceVersion of this instance's last successful write
	lastTerm     int32                 // leaseTransitions last seen, kept across a deletion
	heldSeen     bool                  // a held record has been seen
	heldDuration time.Duration         // leaseDurationSeconds of the last held record seen
	acquireSeen  acquireSeen           // the last acquiring write the watch showed begin a term
	// handed is the handover to this instance last observed with the send
	// time of the write it names (HandedOverAnnotation); see adoptable.
	handed handed

	// notBefore is when the current record becomes free for this instance
	// (see claim). It never moves earlier, except when a holder's signed
	// release or this instance's own record is observed.
	notBefore time.Time
	// shield is the end of this instance's last term's validity, kept when
	// the term ended because the Lease was deleted or emptied by hand: until
	// then nobody else can have acquired, so an empty record observed before
	// it is free for this instance at once. Zero after any other end.
	shield time.Time

	term *term // nil when not leading

	generation string // this instance's app's, as SetGeneration last gave it (PublishGeneration)

	watchUp       bool
	nextPoll      time.Time // candidates without a watch read at this time
	needRead      bool      // what is known may be out of date: read before acting
	uncertain     bool      // an own acquire's or release's outcome is unknown: read before a release or an adoption
	retryAt       time.Time // no read, create or acquire before this (after an error)
	backoff       time.Duration
	refusals      int // terms refused in a row because etcd's revisions went backwards
	lastError     string
	errorAt       time.Time
	errorPurpose  Purpose // the request that failed
	errorAnswered bool    // the apiserver answered it with the error (not a timeout)

	withdrawn    bool
	refusing     bool // withdrawn and refusing handovers (SetCandidate.RefuseHandovers)
	stayOutUntil time.Time

	pending  *pending   // the request outstanding, nil when none
	release  *releasing // a release under way, nil when none
	stopping bool
	stopped  bool

	reportedFloor fence.Token // largest token ever reported: reports never go backwards

	out Output // being built by the current Step
}

// term is one term of leadership held by this instance.
type term struct {
	token       fence.Token
	transitions int32
	acquireTime time.Time
	validUntil  time.Time // fence.ValidUntil of the last successful write
	nextRenew   time.Time
}

// pending is the request outstanding.
type pending struct {
	purpose  Purpose
	sent     time.Time
	rvAtSend string      // latestRV when it was sent: an answer older than it means etcd went back
	floor    fence.Token // tokenFloor when it was sent
	token    fence.Token // Renew: the term it renews
	// uid is the UID of the record known at rvAtSend when it was sent, ""
	// when the Lease was known missing (or nothing was known): an answer
	// at rvAtSend of another object means etcd went back as well (see
	// observe).
	uid types.UID
}

// New returns a Machine for cfg, which must Validate. seed seeds the jitter
// of its polls, the only randomness it draws. Feed it Start first.
func New(cfg Config, seed uint64) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Machine{
		cfg:       cfg,
		rand:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		withdrawn: cfg.StartWithdrawn,
		backoff:   cfg.RetryPeriod,
	}, nil
}

// Step applies one input at the local time now and returns what to do.
// now must not go backwards between steps.
func (m *Machine) Step(now time.Time, in Input) Output {
	m.out = Output{}
	if m.stopped {
		m.out.Stopped = true
		return m.out
	}
	m.expire(now)
	m.handle(now, in)
	m.expire(now)
	if m.out.Fatal == nil {
		m.plan(now)
	}
	m.out.Wake = m.nextWake(now)
	m.out.Report = m.report(now)
	m.out.Stopped = m.stopped
	return m.out
}

// handle applies one input.
func (m *Machine) handle(now time.Time, in Input) {
	switch in := in.(type) {
	case Start, Tick:
	case Observed:
		m.seeAcquire(in)
		m.seeHandover(in)
		m.observe(now, in.Lease, in.ResourceVersion, nil)
	case WatchUp:
		if !m.watchUp {
			m.logf(slog.LevelInfo, "watching the Lease; candidates take a released Lease without polling")
		}
		m.watchUp = true
	case WatchDown:
		if m.watchUp {
			m.logf(slog.LevelWarn, "lease watch unavailable; falling back to polling every retryPeriod", "err", in.Err, "retryPeriod", m.cfg.RetryPeriod)
		} else {
			m.logf(slog.LevelDebug, "lease watch still unavailable", "err", in.Err)
		}
		m.watchUp = false
		m.nextPoll = now.Add(m.jitter(m.cfg.RetryPeriod))
	case Result:
		m.result(now, in)
	case Release:
		m.stayOutUntil = now.Add(in.StayOut)
		m.leave(now, "release requested", in.ID, in.To, in.Witness)
	case SetGeneration:
		if m.cfg.PublishGeneration && in.Generation != "" {
			m.generation = in.Generation
		}
	case SetCandidate:
		if in.Candidate {
			if m.withdrawn {
				m.logf(slog.LevelInfo, "back in the election", "reason", in.Reason)
			}
			m.withdrawn, m.refusing = false, false
			m.reply(in.ID, false, nil)
			return
		}
		if !m.withdrawn {
			m.logf(slog.LevelWarn, "withdrawn from the election", "reason", in.Reason)
		}
		m.withdrawn, m.refusing = true, in.RefuseHandovers
		m.leave(now, "withdrawn from the election: "+in.Reason, in.ID, in.To, in.Witness)
	case Stop:
		if m.stopping {
			return
		}
		m.stopping = true
		token, validUntil := m.lastToken(), m.validUntil()
		m.stepDown(now, "shutting down", clearShield)
		if m.cfg.ReleaseOnStop && m.release == nil {
			m.startRelease(token, validUntil, true, in.To, in.Witness)
		}
	case HoldsCleared:
		if m.release != nil {
			m.release.holdUntil = time.Time{}
		}
	default:
		panic(fmt.Sprintf("decide: unknown input %T", in))
	}
}

// campaigning reports whether this instance is a candidate at now.
func (m *Machine) campaigning(now time.Time) bool {
	return !m.withdrawn && !m.stopping && !now.Before(m.stayOutUntil)
}

// namesMe reports whether the latest known record names this instance.
func (m *Machine) namesMe() bool {
	return m.lease != nil && holderOf(m.lease) == m.cfg.Identity
}

// plan sends the next request, if the moment calls for one and none is
// outstanding.
func (m *Machine) plan(now time.Time) {
	if m.pending != nil || m.stopped {
		return
	}
	if m.release != nil {
		if m.planRelease(now); m.release != nil || m.pending != nil {
			return
		}
	}
	switch {
	case m.stopping:
		m.stopped = true
	case m.term != nil:
		switch {
		case m.needRead && !now.Before(m.retryAt):
			m.send(now, Read)
		case !m.needRead && !now.Before(m.term.nextRenew):
			m.send(now, Renew)
		}
	case m.adoptable(now):
		m.adopt(now)
		m.plan(now) // a renewal due at once goes out now
	case !m.campaigning(now):
		if m.namesMe() && !now.Before(m.retryAt) {
			// Out of the election yet named holder (an acquire whose answer
			// was lost, a release that failed, a handover it does not
			// take): release it.
			m.startRelease(0, time.Time{}, true, "", "")
			m.planRelease(now)
		}
	case now.Before(m.retryAt):
	case !m.known || m.needRead || (!m.watchUp && !now.Before(m.nextPoll)):
		m.nextPoll = now.Add(m.jitter(m.cfg.RetryPeriod))
		m.send(now, Read)
	case m.lease == nil:
		m.send(now, Placeholder)
	case m.namesMe() || !now.Before(m.notBefore):
		m.send(now, Acquire)
	}
}

// nextWake is when the Machine must step next, whatever else happens. It
// is never a time at which plan would do nothing.
func (m *Machine) nextWake(now time.Time) time.Time {
	wake := now.Add(m.cfg.LeaseDuration) // keeps Report.Heartbeat moving
	at := func(t time.Time) {
		if t.Before(wake) {
			wake = t
		}
	}
	if m.stopped {
		return wake
	}
	if m.term != nil {
		at(m.term.validUntil)
	}
	if m.release != nil && m.release.holdUntil.After(now) {
		at(m.release.holdUntil) // once past, planRelease goes on when nothing is outstanding
	}
	if m.pending != nil || m.release != nil {
		return wake // the answer, or the holds, wake the Machine
	}
	switch {
	case m.term != nil && m.needRead:
		at(m.retryAt)
	case m.term != nil:
		at(m.term.nextRenew)
	case !m.campaigning(now):
		if m.stayOutUntil.After(now) && !m.withdrawn && !m.stopping {
			at(m.stayOutUntil)
		}
		if m.namesMe() {
			at(m.retryAt)
		}
	case !m.known || m.needRead || m.lease == nil:
		at(m.retryAt)
	default:
		next := m.notBefore
		if m.namesMe() {
			next = now
		}
		if !m.watchUp {
			next = earliest(next, m.nextPoll)
		}
		at(latest(next, m.retryAt))
	}
	return wake
}

// expire ends a term whose validity has run out.
func (m *Machine) expire(now time.Time) {
	if m.term != nil && !now.Before(m.term.validUntil) {
		m.stepDown(now, "renew deadline passed without a successful renewal", keepShield)
	}
}

// shieldRule says what a step-down does to the shield.
type shieldRule bool

const (
	keepShield  shieldRule = true  // the term ended on a hand edit or on expiry: nobody else acquired meanwhile
	clearShield shieldRule = false // another holder, or a voluntary end: the shield no longer holds
)

// stepDown ends the current term, if any. Reports from now on say "not
// leader".
func (m *Machine) stepDown(now time.Time, reason string, rule shieldRule) {
	if rule == clearShield {
		m.shield = time.Time{}
	}
	if m.term == nil {
		return
	}
	m.logf(slog.LevelInfo, "stepped down", "reason", reason, "token", m.term.token)
	m.term = nil
}

// lastToken is the current term's token, 0 when not leading.
func (m *Machine) lastToken() fence.Token {
	if m.term == nil {
		return 0
	}
	return m.term.token
}

// report describes the state at now.
func (m *Machine) report(now time.Time) Report {
	r := Report{
		Holder:        holderOf(m.lease),
		Term:          transitionsOf(m.lease),
		LeaderAddress: addressOf(m.lease),
		Generation:    generationOf(m.lease),
		ObservedAt:    m.seenAt,
		Observed:      m.known,
		WatchUp:       m.watchUp,
		Candidate:     m.campaigning(now) || m.term != nil, // a withdrawn instance leads a Lease handed to it (AcceptHandovers) until told
		Heartbeat:     now,
		LastError:     m.lastError,
		LastErrorAt:   m.errorAt,
	}
	if m.lease != nil && !m.namesMe() && now.Before(m.notBefore) {
		r.FreeAt = m.notBefore
	}
	if to := releasedFor(m.lease); to != "" && (to == m.cfg.Identity || now.Before(m.notBefore)) {
		r.ReservedFor = to
	}
	r.HandedOver = m.namesMe() && handedWitness(m.lease) != ""
	if m.lease != nil {
		r.AcquiredAt = microTimeOf(m.lease.Spec.AcquireTime)
		r.RenewedAt = microTimeOf(m.lease.Spec.RenewTime)
	}
	if m.term != nil {
		r.Leading, r.ValidUntil = true, m.term.validUntil
		r.Holder, r.Term, r.Token = m.cfg.Identity, m.term.transitions, m.term.token
		r.LeaderAddress = m.cfg.AdvertiseAddress
		if m.generation != "" {
			r.Generation = m.generation
		}
		r.AcquiredAt = m.term.acquireTime
	} else if t := m.holdersToken(); t >= m.reportedFloor {
		r.Token = t
	}
	m.reportedFloor = max(m.reportedFloor, r.Token)
	return r
}

// failed records a request that failed with err: the error is reported and
// logged (once while it repeats), and the next attempt waits. An error the
// apiserver answered (a missing namespace, a 403, a 500) backs off,
// doubling from retryPeriod up to the cap: it will likely answer the same
// again. A request without an answer (a timeout: lost on the way, or its
// answer lost) is retried after retryPeriod, and a leader keeps its
// renewal cadence.
func (m *Machine) failed(now time.Time, purpose Purpose, what string, err error) {
	msg := what + ": " + err.Error()
	wait := m.cfg.RetryPeriod
	var answered apierrors.APIStatus
	if errors.As(err, &answered) && m.term == nil {
		wait = m.backoff
		m.backoff = min(2*m.backoff, m.cfg.maxBackoff())
	}
	level := slog.LevelWarn
	if msg == m.lastError || m.stopping {
		level = slog.LevelDebug // once while it repeats; on shutdown, the release's outcome says it
	}
	m.logf(level, "lease request failed", "err", msg, "retryIn", wait)
	m.out.Counts.Errors++
	m.lastError, m.errorAt, m.errorPurpose, m.errorAnswered = msg, now, purpose, answered != nil
	m.retryAt = now.Add(wait)
}

// succeeded records a request that got an answer other than an error (a
// conflict included). It clears the last error, and restarts the backoff,
// when that error can no longer be current: a write got through, the same
// kind of request did, or a read did and the error was a request without
// an answer (the apiserver is reachable again). A read does not clear an
// error the apiserver answered to another request: reads that work say
// nothing of a Create refused for want of a namespace, or of an update a
// Role does not allow.
func (m *Machine) succeeded(purpose Purpose) {
	switch {
	case m.lastError == "":
	case purpose == m.errorPurpose, purpose == Placeholder, purpose == Acquire, purpose == Renew:
	case purpose == Read && !m.errorAnswered:
	default:
		return
	}
	m.clearError()
}

// clearError forgets the last error and restarts the backoff.
func (m *Machine) clearError() {
	m.lastError, m.errorAt, m.errorPurpose, m.errorAnswered = "", time.Time{}, "", false
	m.backoff = m.cfg.RetryPeriod
}

func (m *Machine) reply(id uint64, released bool, err error) {
	m.out.Replies = append(m.out.Replies, Reply{ID: id, Released: released, Err: err})
}

func (m *Machine) logf(level slog.Level, msg string, args ...any) {
	m.out.Logs = append(m.out.Logs, Log{Level: level, Msg: msg, Args: args})
}

// jitter is d stretched by a random factor in [1, 1+pollJitter).
func (m *Machine) jitter(d time.Duration) time.Duration {
	return d + time.Duration(m.rand.Float64()*pollJitter*float64(d))
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
