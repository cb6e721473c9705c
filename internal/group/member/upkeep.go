package member

import (
	"log/slog"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// keep sends the member Lease request due at now, if none is outstanding:
// while a member, create it, or renew it every third of its TTL and as
// soon as this member's declines, or its rank's rankKey, differ from those
// written; while not a
// member (unfit, or stopping), delete it; otherwise collect a departed
// member's (collect). Once stopping with nothing left to delete, the
// Machine has stopped.
func (m *Machine) keep(now time.Time) {
	if m.pending != nil {
		return
	}
	if m.stopping || !m.fit {
		switch {
		case m.own != nil:
			m.send(&pending{purpose: PurposeLeave, sentAt: now}, &Request{Verb: Delete, Name: m.name,
				Preconditions: &metav1.Preconditions{UID: ptr.To(m.own.UID)}})
		case m.stopping:
			m.stopped = true
		}
		return
	}
	declined := encodeDeclines(m.currentDeclines(now))
	due := m.own == nil || !now.Before(m.renewAt) || declined != m.written || rankKey(m.rank) != m.writtenRank
	if due && !now.Before(m.retryAt) {
		p := &pending{purpose: PurposeJoin, sentAt: now, declined: declined, rank: m.rank}
		if m.own == nil {
			m.send(p, &Request{Verb: Create, Name: m.name, Lease: m.record(now, nil, declined)})
		} else {
			p.purpose = PurposeRenew
			m.send(p, &Request{Verb: Update, Name: m.name, Lease: m.record(now, m.own, declined)})
		}
		return
	}
	m.collect(now)
}

// rankKey is what of r a change of is written at once: whether it is
// known, and its generation (a position that grows rides on the renewals).
func rankKey(r Rank) Rank { return Rank{Known: r.Known, Generation: r.Generation} }

// send makes req the outstanding request.
func (m *Machine) send(p *pending, req *Request) {
	req.Purpose = p.purpose
	m.pending, m.out.Request = p, req
}

// result applies the answer to the outstanding request.
func (m *Machine) result(now time.Time, r Result) {
	p := m.pending
	if p == nil {
		m.logf(slog.LevelError, "a member Lease answer arrived with no request outstanding; ignored")
		return
	}
	m.pending = nil
	switch p.purpose {
	case PurposeJoin:
		if apierrors.IsAlreadyExists(r.Err) {
			// Left by an earlier write of this identity whose answer was
			// lost: read it, and write on it.
			m.send(&pending{purpose: PurposeRejoin, sentAt: p.sentAt, declined: p.declined, rank: p.rank}, &Request{Verb: Get, Name: m.name})
			return
		}
		m.wrote(now, p, r)
	case PurposeRejoin:
		if r.Err != nil || r.Lease == nil {
			m.writeFailed(p, r.Err)
			return
		}
		m.send(&pending{purpose: PurposeRenew, sentAt: p.sentAt, declined: p.declined, rank: p.rank},
			&Request{Verb: Update, Name: m.name, Lease: m.record(p.sentAt, r.Lease, p.declined)})
	case PurposeRenew:
		m.wrote(now, p, r)
	case PurposeLeave:
		if r.Err != nil && !apierrors.IsNotFound(r.Err) {
			m.logf(slog.LevelWarn, "member Lease delete failed; the others see this member go when it expires", "err", r.Err)
		}
		m.own = nil
		delete(m.records, m.name)
	case PurposeCollect:
		m.collected(now, p, r)
	}
}

// wrote applies the answer to a create or update of the member Lease.
func (m *Machine) wrote(now time.Time, p *pending, r Result) {
	if r.Err != nil || r.Lease == nil {
		if m.own != nil && (apierrors.IsConflict(r.Err) || apierrors.IsNotFound(r.Err)) {
			m.own = nil // edited or deleted by someone else: write afresh
		}
		m.writeFailed(p, r.Err)
		return
	}
	m.own, m.written, m.writtenRank, m.retryAt = r.Lease, p.declined, rankKey(p.rank), time.Time{}
	m.writes = append(slices.Clone(m.writes[max(len(m.writes)-keptWrites+1, 0):]), Write{Version: r.Lease.ResourceVersion, SentAt: p.sentAt})
	m.out.Writes = m.writes
	m.renewAt = p.sentAt.Add(m.cfg.TTL / 3)
	m.observe(now, r.Lease)
}

// writeFailed backs a failed write off for a request timeout.
func (m *Machine) writeFailed(p *pending, err error) {
	if err == nil {
		err = errEmpty
	}
	m.logf(slog.LevelWarn, "member Lease write failed", "err", err)
	m.retryAt = p.sentAt.Add(m.cfg.RequestTimeout)
}

// record is the member Lease to write at now, on base (nil for a Create),
// with declined as its DeclinedAnnotation.
func (m *Machine) record(now time.Time, base *coordinationv1.Lease, declined string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if base != nil {
		l = base.DeepCopy()
	}
	l.Name = m.name
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[Label] = m.cfg.Group
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[PriorityAnnotation] = strconv.FormatInt(m.cfg.Info.Priority, 10)
	if !m.cfg.Info.StartedAt.IsZero() {
		l.Annotations[StartedAtAnnotation] = m.cfg.Info.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	l.Annotations[ServesAnnotation] = m.serves
	if v := encodeRank(m.rank, m.rankAt, m.cfg.RankPeriod); m.cfg.Ranked && v != "" {
		l.Annotations[RankAnnotation] = v
	} else {
		delete(l.Annotations, RankAnnotation)
	}
	if declined != "" {
		l.Annotations[DeclinedAnnotation] = declined
	} else {
		delete(l.Annotations, DeclinedAnnotation)
	}
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = ptr.To(m.cfg.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(m.cfg.TTL / time.Second))
	l.Spec.RenewTime = &t
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
	return l
}
