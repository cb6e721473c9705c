package member

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"reflect"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Label marks a member Lease with the name of its group.
const Label = "leasehold.io/member-of"

// LeaseName is the name of identity's member Lease in group: the group's
// name, "-member-", and 16 hex digits of a SHA-256 of the identity
// (identities need not be valid object names).
func LeaseName(group, identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return group + "-member-" + hex.EncodeToString(sum[:8])
}

// Members is the group's membership as one instance sees it at a moment.
// Immutable.
type Members struct {
	// Identities are the live members, sorted.
	Identities []string
	// JoinedAt is the local time a member last joined (appeared among
	// Identities), zero when none has.
	JoinedAt time.Time
	// Listed is true once the member Leases have been listed: before that,
	// Identities says nothing.
	Listed bool
	// Declined are, per live member, the Leases it stays out of now
	// (DeclinedAnnotation); nil when none.
	Declined map[string][]string
	// Info is what each live member publishes about itself, by identity.
	Info map[string]Info
	// Versions are the resourceVersions of the live members' member Leases
	// as observed, by identity: the witness of a handover in one write
	// (Heir.Witness).
	Versions map[string]string
	// Serves are, per live member that publishes them (ServesAnnotation),
	// the Leases it serves. A member that publishes none (a version of
	// leasehold before the annotation) is given no Lease.
	Serves map[string]Served
}

// Served is the set of Leases one member serves. Immutable.
type Served map[string]bool

// IDs are the live members; none before the first view.
func (m *Members) IDs() []string {
	if m == nil {
		return nil
	}
	return m.Identities
}

// Serving are the live members that serve lease, sorted.
func (m *Members) Serving(lease string) []string {
	var ids []string
	for _, id := range m.IDs() {
		if m.ServedBy(id, lease) {
			ids = append(ids, id)
		}
	}
	return ids
}

// ServedBy reports whether the live member id serves lease.
func (m *Members) ServedBy(id, lease string) bool {
	if m == nil {
		return false
	}
	return m.Serves[id][lease]
}

// record is one member Lease as observed.
type record struct {
	identity        string
	uid             types.UID
	resourceVersion string
	seenAt          time.Time // local time this version was first observed
	ttl             time.Duration
	declined        map[string]time.Time // ends of its stay-outs, on this instance's clock (localDeclines)
	info            Info
	serves          Served // nil: not published, or malformed
	servesValue     string // ServesAnnotation as observed
}

// liveAt reports whether the record's member is live at now, in this
// instance's view: from the observation of the version until it has been
// observed for its TTL.
func (r record) liveAt(now time.Time) bool {
	return r.identity != "" && now.Before(r.seenAt.Add(r.ttl))
}

// recordOf is member Lease l as observed at now by a member whose own TTL
// is ttl, after prev (its last record, if any: an unchanged
// ServesAnnotation is not decoded again). The record's TTL is the smaller
// of its leaseDurationSeconds and ttl: every member of a group runs with the same timings, so a longer
// duration is a hand edit or a leftover of another configuration, and a
// member Lease that nobody renews stops counting one TTL after this
// instance last saw it change, whatever it says.
func recordOf(now time.Time, l *coordinationv1.Lease, ttl time.Duration, prev record) record {
	r := record{uid: l.UID, resourceVersion: l.ResourceVersion, seenAt: now, ttl: time.Second, declined: localDeclines(now, l), info: infoOf(l)}
	if l.Spec.HolderIdentity != nil {
		r.identity = *l.Spec.HolderIdentity
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		r.ttl = time.Duration(*d) * time.Second
	}
	r.ttl = min(r.ttl, ttl)
	r.servesValue = l.Annotations[ServesAnnotation]
	if r.servesValue == prev.servesValue {
		r.serves = prev.serves
		return r
	}
	if names, ok := DecodeServes(r.servesValue); ok {
		r.serves = make(Served, len(names))
		for _, n := range names {
			r.serves[n] = true
		}
	}
	return r
}

// newerRV reports whether resourceVersion a is newer than b (a malformed
// one counts as newer: it cannot be ordered).
func newerRV(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err != nil || c > 0
}

// view is the membership at now as the records have it. What of it equals
// the published view's is that view's (Members is immutable): most record
// changes are a member's renewal, which changes its version only.
func (m *Machine) view(now time.Time) *Members {
	live, ids := m.live[:0], m.ids[:0]
	for _, r := range m.records {
		if r.liveAt(now) {
			live, ids = append(live, r), append(ids, r.identity)
		}
	}
	defer func() { m.live, m.ids = live[:0], ids[:0]; clear(live) }() // no record kept past the view
	slices.Sort(ids)
	ids = slices.Compact(ids)
	prev := m.members
	v := &Members{Listed: m.listed}
	// With one record per live member, and the same members as prev, a map
	// of prev's equals the one the records give where each entry equals
	// its record's.
	same := prev != nil && len(ids) == len(live) && slices.Equal(prev.Identities, ids)
	if same {
		v.Identities = prev.Identities
	} else if len(ids) > 0 { // nil while none is live
		v.Identities = slices.Clone(ids)
	}
	sameInfo, sameServes, versions := same, same, 0
	for _, r := range live {
		for lease, until := range r.declined {
			if now.Before(until) {
				if v.Declined == nil {
					v.Declined = map[string][]string{}
				}
				v.Declined[r.identity] = append(v.Declined[r.identity], lease)
			}
		}
		if !same {
			continue
		}
		sameInfo = sameInfo && prev.Info[r.identity] == r.info
		set, ok := prev.Serves[r.identity]
		sameServes = sameServes && ok == (r.serves != nil) && (!ok || sameSet(set, r.serves))
		if prev.Versions[r.identity] != r.resourceVersion {
			versions++
		}
	}
	for _, leases := range v.Declined {
		slices.Sort(leases)
	}
	if sameInfo {
		v.Info = prev.Info
	} else {
		v.Info = make(map[string]Info, len(live))
		for _, r := range live {
			v.Info[r.identity] = r.info
		}
	}
	switch {
	case same && versions == 0:
		v.Versions = prev.Versions
	case same:
		v.Versions = maps.Clone(prev.Versions)
		for _, r := range live {
			v.Versions[r.identity] = r.resourceVersion
		}
	default:
		v.Versions = make(map[string]string, len(live))
		for _, r := range live {
			v.Versions[r.identity] = r.resourceVersion
		}
	}
	if sameServes {
		v.Serves = prev.Serves
	} else {
		v.Serves = make(map[string]Served, len(live))
		for _, r := range live {
			if r.serves != nil {
				v.Serves[r.identity] = r.serves
			}
		}
	}
	return v
}

// publish makes the membership at now the published view (Output.Members)
// when it differs from the last, and times a member's joining. The view
// is computed again only when a record changed (viewDirty) or a record's
// expiry or a stay-out's end has come (viewUntil).
func (m *Machine) publish(now time.Time) {
	if !m.viewDirty && now.Before(m.viewUntil) && m.members != nil {
		return
	}
	m.viewDirty, m.viewUntil = false, m.viewChangesAt(now)
	v, prev := m.view(now), m.members
	if prev != nil && prev.Listed == v.Listed && slices.Equal(prev.Identities, v.Identities) && reflect.DeepEqual(prev.Declined, v.Declined) &&
		(sameMap(prev.Info, v.Info) || maps.Equal(prev.Info, v.Info)) && (sameMap(prev.Versions, v.Versions) || maps.Equal(prev.Versions, v.Versions)) &&
		sameServes(prev.Serves, v.Serves) {
		return
	}
	if prev != nil {
		for _, id := range v.Identities {
			if !slices.Contains(prev.Identities, id) {
				m.joinedAt = now
				break
			}
		}
	}
	v.JoinedAt = m.joinedAt
	if prev == nil || !slices.Equal(prev.Identities, v.Identities) || !sameServes(prev.Serves, v.Serves) {
		m.classes = classesOf(v, m.cfg.Leases, m.natural)
	}
	m.members = v
	m.out.Members = v
}

// viewChangesAt is the first time after now at which the view changes with
// no record changing: a record expires, or a stay-out on it ends.
func (m *Machine) viewChangesAt(now time.Time) time.Time {
	at := now.Add(24 * time.Hour)
	for _, r := range m.records {
		if end := r.seenAt.Add(r.ttl); end.After(now) && end.Before(at) {
			at = end
		}
		for _, until := range r.declined {
			if until.After(now) && until.Before(at) {
				at = until
			}
		}
	}
	return at
}

// sameServes reports whether a and b give every member the same set
// (sets are shared between records while a member's annotation stays the
// same, and views share their Serves while no set changes, so equal ones
// are most often the same map).
func sameServes(a, b map[string]Served) bool {
	return sameMap(a, b) || maps.EqualFunc(a, b, sameSet)
}

// sameSet reports whether x and y hold the same Leases.
func sameSet(x, y Served) bool {
	return len(x) == len(y) && (len(x) == 0 || sameMap(x, y) || maps.Equal(x, y))
}

// sameMap reports whether a and b are the same map, not merely equal ones.
func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
