package decide

import (
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/leasehold/leasehold/internal/fence"
)

// ReleasedByAnnotation names, on a released Lease, the holder that released
// it: its signature. Candidates take a Lease released by its holder at once;
// an empty record without it only after waiting a full lease duration.
const ReleasedByAnnotation = "leasehold.io/released-by"

// HandedOverAnnotation marks a handover in one write: the holder that
// stepped down wrote its successor as the new holder, starting the
// successor's term (acquireTime = renewTime, leaseTransitions + 1, no
// token annotation), instead of a signed release the successor would then
// acquire. Its value is the resourceVersion of a write by the successor
// (its member Lease) that the previous holder had observed before it
// wrote the record: so the record was written after the successor sent
// that write, and the successor, which knows when it sent it, can bound
// the term's validity by that send time (fence.ValidUntil) without
// writing first. Every other instance judges the record held, as any
// other, until it has observed it for a lease duration. A successor that
// cannot use it (it does not know that write, the bound leaves less than
// a retryPeriod, or it is not in the election) takes the record back with
// a write of its own, or releases it, as any record naming it.
const HandedOverAnnotation = "leasehold.io/handed-over"

// LeaderAddressAnnotation is where a holder with an advertised address
// (Config.AdvertiseAddress) writes it, on every acquire and renewal;
// LeaderAddressOfAnnotation names the holder that wrote it. The address is
// the holder's only while the two agree, so a holder that does not write
// them (client-go, during a migration) is never given its predecessor's.
const (
	LeaderAddressAnnotation   = "leasehold.io/leader-address"
	LeaderAddressOfAnnotation = "leasehold.io/leader-address-of"
)

// GenerationAnnotation is where a holder with Config.PublishGeneration
// writes its app's generation, on every acquire and renewal. A release
// and a handover leave it: it stays the last leader's until the next
// holder writes its own, which is what candidates compare their own
// generations with when the holder is gone.
const GenerationAnnotation = "leasehold.io/generation"

// generationOf is the generation last published on l, "" when none.
func generationOf(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return l.Annotations[GenerationAnnotation]
}

// addressOf is the advertised address of l's holder, "" when it has none,
// the record is empty, or the address was written by another holder.
func addressOf(l *coordinationv1.Lease) string {
	holder := holderOf(l)
	if holder == "" || l.Annotations[LeaderAddressOfAnnotation] != holder {
		return ""
	}
	address := l.Annotations[LeaderAddressAnnotation]
	if ValidateAddress(address) != nil {
		return "" // written by hand, and not an address
	}
	return address
}

// ReleasedForAnnotation names, on a signed release, the successor its holder
// handed the Lease to. That successor takes it at once, like any signed
// release; every other candidate leaves it alone for RenewDeadline after it
// first observes that version (its own clock, so no clock offset between
// nodes shortens the window), then takes it as a signed release. It decides
// only who goes first, never whether a holder may still lead: the holder
// stepped down before signing.
const ReleasedForAnnotation = "leasehold.io/released-for"

// releasedFor is the successor a signed release is handed to, "" when the
// record is not a signed release or is handed to no one in particular.
func releasedFor(l *coordinationv1.Lease) string {
	if releasedBy(l) == "" {
		return ""
	}
	return l.Annotations[ReleasedForAnnotation]
}

// handedWitness is the write a handover names (HandedOverAnnotation), ""
// when l is not a handover.
func handedWitness(l *coordinationv1.Lease) string {
	if l == nil || holderOf(l) == "" {
		return ""
	}
	return l.Annotations[HandedOverAnnotation]
}

// The helpers below read a Lease defensively: any field may be missing or
// hostile (written by hand), and none of them may panic.

func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// releasedBy returns the signature of a released (empty) record, "" when
// the record is held, unsigned or missing.
func releasedBy(l *coordinationv1.Lease) string {
	if l == nil || holderOf(l) != "" {
		return ""
	}
	return l.Annotations[ReleasedByAnnotation]
}

func transitionsOf(l *coordinationv1.Lease) int32 {
	if l == nil || l.Spec.LeaseTransitions == nil {
		return 0
	}
	return *l.Spec.LeaseTransitions
}

// nextTransitions is the leaseTransitions a new term writes: one more than
// the last known, saturating (the term number is for people, the token
// carries safety).
func nextTransitions(last int32) int32 {
	if last == math.MaxInt32 {
		return last
	}
	return max(last, -1) + 1
}

// durationOf is the holder's lease duration, truncated to whole seconds as
// the Lease stores it. A missing or non-positive value (only written by
// hand) is read as fallback, so a broken record never looks expired sooner
// than a well-formed one.
func durationOf(l *coordinationv1.Lease, fallback time.Duration) time.Duration {
	if l == nil || l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds <= 0 {
		return fallback
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
}

func microTimeOf(t *metav1.MicroTime) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// newer reports whether resourceVersion a is later than b. Malformed
// versions (never served by an apiserver ≥ 1.35) count as newer, so that a
// fresh read is never discarded.
func newer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err != nil || c > 0
}

// tokenOf returns the resourceVersion of l as a token, 0 if malformed.
func tokenOf(rv string) fence.Token {
	t, err := fence.FromResourceVersion(rv)
	if err != nil {
		return 0
	}
	return t
}
