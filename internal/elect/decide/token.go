package decide

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/fence"
)

// acquireSeen is a write that the watch showed begin a term: its holder,
// its acquireTime (which the term's renewals keep), and its
// resourceVersion, which is the term's fencing token.
type acquireSeen struct {
	holder      string
	acquireTime time.Time
	token       fence.Token
}

// seeAcquire records in's Lease as the write that began its holder's term
// when the watch delivered it right after the latest version this instance
// knows (in.Follows), the two differ in holder or acquireTime, and it is an
// acquiring write (acquiring). No write came between the two versions, so
// in's resourceVersion is the term's token: an instance that saw the
// acquire knows the token before the holder publishes it.
func (m *Machine) seeAcquire(in Observed) {
	l, prev := in.Lease, m.lease
	if l == nil || prev == nil || in.Follows == "" || prev.ResourceVersion != in.Follows || holderOf(l) == "" || !acquiring(l) {
		return
	}
	if holderOf(l) == holderOf(prev) && microTimeOf(l.Spec.AcquireTime).Equal(microTimeOf(prev.Spec.AcquireTime)) {
		return // a later write of the same term
	}
	m.acquireSeen = acquireSeen{holder: holderOf(l), acquireTime: microTimeOf(l.Spec.AcquireTime), token: tokenOf(l.ResourceVersion)}
}

// holdersToken is the fencing token of the term of the latest record's
// holder, as far as this instance can tell; 0 when it cannot, or there is
// no holder:
//
//   - the token of the acquire this instance saw begin that term
//     (seeAcquire), when the record has the same holder and acquireTime;
//   - else the token the holder published on a later write
//     (fence.Published), if fence.Credible.
//
// The caller still keeps the tokens it reports from going backwards.
func (m *Machine) holdersToken() fence.Token {
	holder := holderOf(m.lease)
	if holder == "" {
		return 0
	}
	if s := m.acquireSeen; s.holder == holder && s.acquireTime.Equal(microTimeOf(m.lease.Spec.AcquireTime)) {
		return s.token
	}
	if t, ok := fence.Published(m.lease.Annotations); ok && fence.Credible(t, tokenOf(m.lease.ResourceVersion)) {
		return t
	}
	return 0
}

// acquiring reports whether l can be a write that acquired its term: every
// acquiring write (leasehold's, and client-go's) stamps acquireTime and
// renewTime with one time, and a renewal keeps acquireTime.
func acquiring(l *coordinationv1.Lease) bool {
	a, r := l.Spec.AcquireTime, l.Spec.RenewTime
	return a != nil && r != nil && a.Equal(r)
}
