package decide

import (
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
)

// handed is a handover to this instance (HandedOverAnnotation) as the
// watch delivered it: the record's resourceVersion, and the local time
// before this instance sent the write the record names.
type handed struct {
	rv     string
	sentAt time.Time
	floor  fence.Token // tokenFloor before the handover was observed: its token must exceed it
	// spent: a term was started on it, or this instance sent a release of
	// it. A handover starts at most one term, and none once its heir has
	// let it go: that release may have landed unseen, and another
	// instance may lead since.
	spent bool
}

// seeHandover keeps the send time the driver found for a handover to this
// instance, when the watch delivered the handover write itself: right
// after the latest version this instance knows (in.Follows), which named
// another holder, as an acquiring write (as seeAcquire). A later version
// that still names this instance with the annotation (a hand edit of the
// record) is not the term's first write: its resourceVersion is not the
// token the instances that watched the handover report, so such a record
// is taken back by a write instead.
func (m *Machine) seeHandover(in Observed) {
	l, prev := in.Lease, m.lease
	if l == nil || prev == nil || in.Follows == "" || prev.ResourceVersion != in.Follows || holderOf(prev) == m.cfg.Identity ||
		holderOf(l) != m.cfg.Identity || handedWitness(l) == "" || !acquiring(l) || in.WitnessSentAt.IsZero() {
		return
	}
	if l.ResourceVersion != m.handed.rv {
		m.handed = handed{rv: l.ResourceVersion, sentAt: in.WitnessSentAt, floor: m.tokenFloor}
	}
}

// adoptable reports whether this instance starts a term on the latest
// record without writing: a handover to it (HandedOverAnnotation) whose
// named write this instance sent at handed.sentAt.
//
// Safety: the previous holder observed that write before it wrote the
// record, so the record was written after handed.sentAt; every other
// instance judges the record held for a lease duration from when it
// observes it, so later still. A term valid until
// fence.ValidUntil(handed.sentAt) therefore ends, like any term, before
// anyone else may take the record, and it ends earlier than a term
// acquired by a write of this instance's would. Its token, the record's
// resourceVersion, is that of the term's first write, and must be the
// largest resourceVersion this instance has seen, and larger than every
// one it saw before the handover (after etcd was restored without
// --bump-revision it may have seen that very one before, on another
// version: no term starts with a token already seen). Nothing is adopted
// while what is known may be stale (a read is owed, or the outcome of a
// write of this instance's is unknown), nor once the handover is spent. A
// handover that leaves less than a retryPeriod of validity, or that this
// instance cannot date, is taken back by a write (plan), as any record
// naming it.
func (m *Machine) adoptable(now time.Time) bool {
	l := m.lease
	if m.term != nil || !m.namesMe() || handedWitness(l) == "" || l.Spec.AcquireTime == nil ||
		m.handed.rv != l.ResourceVersion || m.handed.spent || m.needRead || m.uncertain ||
		m.stopping || now.Before(m.stayOutUntil) || (m.withdrawn && (!m.cfg.AcceptHandovers || m.refusing)) {
		return false
	}
	token, err := fence.FromResourceVersion(l.ResourceVersion)
	if err != nil || token < m.tokenFloor || token <= m.handed.floor {
		return false
	}
	return fence.ValidUntil(m.handed.sentAt, m.cfg.RenewDeadline).Sub(now) >= m.cfg.RetryPeriod
}

// adopt starts the term handed to this instance (adoptable). It is renewed
// as a term acquired by a write sent at handed.sentAt would be: first a
// retryPeriod after that send time (at once if that has passed), so that
// its first renewal has the margin of an ordinary term's; at once when the
// record does not carry this instance's advertised address, so followers
// learn where the leader is within a round trip. The renewals publish the
// token and keep the record's acquireTime, written by the previous holder.
func (m *Machine) adopt(now time.Time) {
	l := m.lease
	token, _ := fence.FromResourceVersion(l.ResourceVersion)
	m.handed.spent = true
	m.term = &term{
		token:       token,
		transitions: transitionsOf(l),
		acquireTime: l.Spec.AcquireTime.Time,
		validUntil:  fence.ValidUntil(m.handed.sentAt, m.cfg.RenewDeadline),
		nextRenew:   latest(now, m.handed.sentAt.Add(m.cfg.RetryPeriod)),
	}
	if m.cfg.AdvertiseAddress != "" && addressOf(l) != m.cfg.AdvertiseAddress {
		m.term.nextRenew = now
	}
	m.lastOwnRV = l.ResourceVersion // renewals write on it
	m.shield = m.term.validUntil
	m.uncertain = false
	m.refusals = 0
	m.logf(slog.LevelInfo, "took over the Lease handed to this instance", "token", token, "term", m.term.transitions, "validUntil", m.term.validUntil)
}
