package decide

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/fence"
)

// send asks the driver for one request and records it as outstanding.
func (m *Machine) send(now time.Time, purpose Purpose) {
	req := &Request{Purpose: purpose}
	p := &pending{purpose: purpose, sent: now, rvAtSend: m.latestRV, floor: m.tokenFloor}
	if m.lease != nil && m.lease.ResourceVersion == m.latestRV {
		p.uid = m.lease.UID
	}
	switch purpose {
	case Read, ReleaseRead:
		req.Verb = Get
	case Placeholder:
		req.Verb, req.Lease = Create, m.placeholder()
	case Acquire:
		req.Verb, req.Lease = Update, m.acquisition(now)
	case Renew:
		req.Verb, req.Lease = Update, m.renewal(now)
		p.token = m.term.token
	case ReleaseSend:
		req.Verb = Update
		m.handed.spent = true // the heir lets the handover go (adoptable)
		if m.release.witness != "" {
			req.Lease = m.handoverOf(now, m.release.target)
		} else {
			req.Lease = m.releaseOf(now, m.release.target)
		}
	}
	m.pending = p
	m.out.Request = req
}

// placeholder is the empty record a candidate creates for a missing Lease.
// It claims nothing: candidates acquire it, by a conditional Update, once
// they have observed it for a lease duration.
func (m *Machine) placeholder() *coordinationv1.Lease {
	transitions := m.lastTerm // the term count survives a deletion (0 if never seen)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: m.cfg.Name, Namespace: m.cfg.Namespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(""),
			LeaseDurationSeconds: ptr.To(m.leaseSeconds()),
			LeaseTransitions:     &transitions,
		},
	}
}

// acquisition is the write that starts a term on the latest known record,
// conditioned on its resourceVersion.
func (m *Machine) acquisition(now time.Time) *coordinationv1.Lease {
	desired := m.lease.DeepCopy()
	// A new term: the previous term's token must not be read as ours.
	delete(desired.Annotations, fence.Annotation)
	delete(desired.Annotations, ReleasedByAnnotation)
	delete(desired.Annotations, ReleasedForAnnotation)
	delete(desired.Annotations, HandedOverAnnotation)
	transitions := m.lastTerm // a placeholder no one has held: the first term
	if m.heldSeen || m.lease.Spec.AcquireTime != nil {
		transitions = nextTransitions(m.lastTerm) // also across a deletion
	}
	stamp := metav1.NewMicroTime(now)
	desired.Spec.HolderIdentity = ptr.To(m.cfg.Identity)
	desired.Spec.LeaseDurationSeconds = ptr.To(m.leaseSeconds())
	desired.Spec.AcquireTime = &stamp
	desired.Spec.RenewTime = &stamp
	desired.Spec.LeaseTransitions = &transitions
	m.advertise(desired)
	m.publishFloor(desired, m.lease.ResourceVersion)
	m.publishGeneration(desired)
	return desired
}

// renewal extends the term on the latest known record (its own), and
// publishes the term's token. It removes a release signature someone may
// have added: a held record is never signed.
func (m *Machine) renewal(now time.Time) *coordinationv1.Lease {
	desired := m.lease.DeepCopy()
	stamp := metav1.NewMicroTime(now)
	desired.Spec.HolderIdentity = ptr.To(m.cfg.Identity)
	desired.Spec.LeaseDurationSeconds = ptr.To(m.leaseSeconds())
	desired.Spec.AcquireTime = &metav1.MicroTime{Time: m.term.acquireTime}
	desired.Spec.RenewTime = &stamp
	desired.Spec.LeaseTransitions = ptr.To(m.term.transitions)
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	desired.Annotations[fence.Annotation] = m.term.token.String()
	delete(desired.Annotations, ReleasedByAnnotation)
	delete(desired.Annotations, ReleasedForAnnotation)
	delete(desired.Annotations, HandedOverAnnotation)
	m.advertise(desired)
	m.publishGeneration(desired)
	return desired
}

// publishGeneration writes this instance's generation on a record it is
// about to hold (Config.PublishGeneration), when it knows one.
func (m *Machine) publishGeneration(desired *coordinationv1.Lease) {
	if !m.cfg.PublishGeneration || m.generation == "" {
		return
	}
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	desired.Annotations[GenerationAnnotation] = m.generation
}

// advertise writes this instance's address on a record it is about to
// hold, or takes a previous holder's off when it has none.
func (m *Machine) advertise(desired *coordinationv1.Lease) {
	if m.cfg.AdvertiseAddress == "" {
		delete(desired.Annotations, LeaderAddressAnnotation)
		delete(desired.Annotations, LeaderAddressOfAnnotation)
		return
	}
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	desired.Annotations[LeaderAddressAnnotation] = m.cfg.AdvertiseAddress
	desired.Annotations[LeaderAddressOfAnnotation] = m.cfg.Identity
}

// releaseOf is the signed release of current, a record that names this
// instance (the latest known, or a fresh read), conditioned on its
// resourceVersion, handed to the release's successor if it has one. It
// keeps leaseTransitions and the token annotation, and takes the
// advertised address off; leaseDurationSeconds 1 makes clients that ignore
// an empty holder see it expire at once.
func (m *Machine) releaseOf(now time.Time, current *coordinationv1.Lease) *coordinationv1.Lease {
	released := current.DeepCopy()
	stamp := metav1.NewMicroTime(now)
	released.Spec.HolderIdentity = ptr.To("")
	released.Spec.LeaseDurationSeconds = ptr.To[int32](1)
	released.Spec.RenewTime = &stamp
	if released.Annotations == nil {
		released.Annotations = map[string]string{}
	}
	released.Annotations[ReleasedByAnnotation] = m.cfg.Identity
	if to := m.release.to; to != "" && to != m.cfg.Identity {
		released.Annotations[ReleasedForAnnotation] = to
	} else {
		delete(released.Annotations, ReleasedForAnnotation)
	}
	delete(released.Annotations, LeaderAddressAnnotation)
	delete(released.Annotations, LeaderAddressOfAnnotation)
	delete(released.Annotations, HandedOverAnnotation)
	return released
}

// handoverOf is the handover in one write of current, a record that names
// this instance, conditioned on its resourceVersion: the release's
// successor becomes the holder, with a term of its own (acquireTime =
// renewTime = now, leaseTransitions + 1, this instance's token annotation
// and address taken off), and HandedOverAnnotation names the successor's
// write that this instance observed (see HandedOverAnnotation). Its
// resourceVersion is the successor's token.
func (m *Machine) handoverOf(now time.Time, current *coordinationv1.Lease) *coordinationv1.Lease {
	handed := current.DeepCopy()
	stamp := metav1.NewMicroTime(now)
	transitions := nextTransitions(transitionsOf(current))
	handed.Spec.HolderIdentity = ptr.To(m.release.to)
	handed.Spec.LeaseDurationSeconds = ptr.To(m.leaseSeconds())
	handed.Spec.AcquireTime = &stamp
	handed.Spec.RenewTime = &stamp
	handed.Spec.LeaseTransitions = &transitions
	if handed.Annotations == nil {
		handed.Annotations = map[string]string{}
	}
	handed.Annotations[HandedOverAnnotation] = m.release.witness
	for _, a := range []string{fence.Annotation, ReleasedByAnnotation, ReleasedForAnnotation, LeaderAddressAnnotation, LeaderAddressOfAnnotation} {
		delete(handed.Annotations, a)
	}
	m.publishFloor(handed, current.ResourceVersion)
	return handed
}

// publishFloor sets, on a write that starts a term and replaces the record
// with resourceVersion replaced, the new term's token floor
// (fence.FloorAnnotation) when Config.FencingFloor is on, and takes any
// floor off otherwise.
func (m *Machine) publishFloor(desired *coordinationv1.Lease, replaced string) {
	floor, ok := fence.FloorAbove(replaced)
	if !m.cfg.FencingFloor || !ok {
		delete(desired.Annotations, fence.FloorAnnotation)
		return
	}
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	desired.Annotations[fence.FloorAnnotation] = floor.String()
}

func (m *Machine) leaseSeconds() int32 {
	return int32(m.cfg.LeaseDuration / time.Second)
}
