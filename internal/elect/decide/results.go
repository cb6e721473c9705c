package decide

import (
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leasehold/leasehold/internal/fence"
)

// result applies the answer to the outstanding request.
func (m *Machine) result(now time.Time, r Result) {
	p := m.pending
	if p == nil {
		m.logf(slog.LevelError, "an answer arrived with no request outstanding; ignored")
		return
	}
	m.pending = nil
	switch p.purpose {
	case Read:
		m.readResult(now, p, r)
	case Placeholder:
		m.placeholderResult(now, p, r)
	case Acquire:
		m.acquireResult(now, p, r)
	case Renew:
		m.renewResult(now, p, r)
	case ReleaseRead:
		m.releaseReadResult(now, p, r)
	case ReleaseSend:
		m.releaseSendResult(now, p, r)
	}
}

func (m *Machine) readResult(now time.Time, p *pending, r Result) {
	switch {
	case r.Err == nil && r.Lease != nil:
		m.observe(now, r.Lease, "", p)
	case apierrors.IsNotFound(r.Err):
		if !m.observe(now, nil, "", p) {
			m.succeeded(Read)
			return // an absence it cannot date: read again
		}
	default:
		m.failed(now, Read, "read the Lease", errOrEmpty(r.Err))
		return
	}
	m.succeeded(Read)
	m.needRead, m.uncertain = false, false
}

func (m *Machine) placeholderResult(now time.Time, p *pending, r Result) {
	switch {
	case r.Err == nil && r.Lease != nil:
		m.succeeded(Placeholder)
		m.observe(now, r.Lease, "", p)
	case apierrors.IsAlreadyExists(r.Err):
		m.succeeded(Placeholder)
		m.needRead = true // someone else created it first: learn what they wrote
	case apierrors.IsNotFound(r.Err):
		m.failed(now, Placeholder, fmt.Sprintf("create the Lease in namespace %q (does it exist?)", m.cfg.Namespace), r.Err)
	default:
		m.failed(now, Placeholder, "create the Lease", errOrEmpty(r.Err))
		m.needRead = true // it may have been created all the same
	}
}

func (m *Machine) acquireResult(now time.Time, p *pending, r Result) {
	switch {
	case r.Err == nil && r.Lease != nil:
	case apierrors.IsConflict(r.Err), apierrors.IsNotFound(r.Err):
		m.succeeded(Acquire)
		m.needRead = true // someone else wrote first: learn what they wrote
		return
	default:
		m.uncertain = true // a lost answer: the write may have landed
		m.failed(now, Acquire, "acquire the Lease", errOrEmpty(r.Err))
		m.needRead = true
		return
	}
	written := r.Lease
	token, err := fence.FromResourceVersion(written.ResourceVersion)
	if err != nil {
		m.out.Fatal = err // no fencing possible: refuse to lead at all
		return
	}
	m.lastOwnRV = written.ResourceVersion
	m.observe(now, written, "", p)
	if token <= p.floor {
		m.refuse(now, token, p.floor)
		return
	}
	m.succeeded(Acquire)
	switch {
	case !m.campaigning(now) || m.release != nil:
		// Withdrawn, staying out or stopping meanwhile: no term. The record
		// names this instance, so it is released (plan sees to it).
	case !m.namesMe() || !microTimeOf(m.lease.Spec.AcquireTime).Equal(microTimeOf(written.Spec.AcquireTime)):
		// The latest record is another holder's, or starts another term
		// (a handover to this instance in a timeline an etcd restore
		// brought back): this write's resourceVersion is not that term's
		// token. A record naming this instance is taken back (plan).
		m.logf(slog.LevelInfo, "acquired the Lease, but it changed again before the answer came: no term", "token", token)
	case !now.Before(fence.ValidUntil(p.sent, m.cfg.RenewDeadline)):
		m.logf(slog.LevelWarn, "acquired the Lease, but the answer came after the term's validity would have ended: no term", "token", token)
	default:
		m.refusals = 0
		m.startTerm(now, p, written.Spec.LeaseTransitions, token)
	}
}

// refuse turns down a term whose token is not above a resourceVersion
// already seen (etcd's revisions went backwards: restored without
// --bump-revision?), since it would not fence older terms. The record is
// released, and the next attempt waits retryPeriod, doubling with each
// refusal in a row up to the backoff cap.
func (m *Machine) refuse(now time.Time, token, floor fence.Token) {
	m.refusals++
	wait := min(m.cfg.RetryPeriod<<min(m.refusals-1, 16), m.cfg.maxBackoff())
	msg := fmt.Sprintf("acquire the Lease: refused a term whose token %d is not above resourceVersion %d, already seen (etcd restored without --bump-revision?)", token, floor)
	level := slog.LevelError
	if msg == m.lastError {
		level = slog.LevelDebug
	}
	m.logf(level, "no term: the token would not fence older terms", "token", token, "seen", floor, "retryIn", wait)
	m.out.Counts.Errors++
	m.lastError, m.errorAt, m.errorPurpose, m.errorAnswered = msg, now, Acquire, true
	m.retryAt = now.Add(wait)
	m.startRelease(0, time.Time{}, false, "", "")
}

// startTerm begins a term after an acquire sent at p.sent succeeded.
func (m *Machine) startTerm(now time.Time, p *pending, transitions *int32, token fence.Token) {
	m.term = &term{
		token:       token,
		transitions: transitionsOfPtr(transitions),
		acquireTime: p.sent,
		validUntil:  fence.ValidUntil(p.sent, m.cfg.RenewDeadline),
		// The first renewal, a retryPeriod on as every renewal, publishes
		// the token. Instances that saw this acquire know it already
		// (holdersToken), and a burst of takeovers is not slowed by as many
		// writes again.
		nextRenew: p.sent.Add(m.cfg.RetryPeriod),
	}
	m.shield = m.term.validUntil
	m.uncertain = false
	m.logf(slog.LevelInfo, "acquired the Lease", "token", token, "term", m.term.transitions, "validUntil", m.term.validUntil)
	m.followTerm(now) // a newer record of its own, edited by someone else: renew on it
}

func (m *Machine) renewResult(now time.Time, p *pending, r Result) {
	switch {
	case r.Err == nil && r.Lease != nil:
		m.succeeded(Renew)
		m.lastOwnRV = r.Lease.ResourceVersion
		m.observe(now, r.Lease, "", p)
		if m.term == nil || m.term.token != p.token {
			return // the term ended meanwhile; a term never resumes
		}
		m.term.validUntil = latest(m.term.validUntil, fence.ValidUntil(p.sent, m.cfg.RenewDeadline))
		m.term.nextRenew = p.sent.Add(m.cfg.RetryPeriod)
		m.shield = m.term.validUntil
	case apierrors.IsConflict(r.Err), apierrors.IsNotFound(r.Err):
		m.out.Counts.RenewFailures++
		m.succeeded(Renew)
		m.needRead = true // read at once: another holder ends the term there
	default:
		m.out.Counts.RenewFailures++
		m.failed(now, Renew, "renew the Lease", errOrEmpty(r.Err))
		if m.term != nil {
			m.logf(slog.LevelWarn, "renew failed; still leader until validUntil", "validUntil", m.term.validUntil)
			m.term.nextRenew = p.sent.Add(m.cfg.RetryPeriod)
		}
	}
}

func transitionsOfPtr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// errOrEmpty turns an answer with neither object nor error (never sent by
// client-go) into an error.
func errOrEmpty(err error) error {
	if err == nil {
		return fmt.Errorf("empty answer")
	}
	return err
}
