package member

import (
	"errors"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// collectAfter is how many TTLs a member Lease stays unchanged, as this
// instance observes it, before it is collected: its member has been gone
// for at least that long (a crash, an OOM kill, a lost node: only a
// graceful exit deletes its own).
const collectAfter = 3

var errEmpty = errors.New("empty answer")

// collect deletes one member Lease of a departed member: one that has not
// changed for collectAfter TTLs, whose name is its holder's member Lease
// name in this group (so it is a member Lease as leasehold writes them),
// with its UID and resourceVersion as preconditions, so that a member
// renewing meanwhile, or a Lease re-created under the name, is never
// deleted. Only the live member with the smallest identity collects, so
// that members do not all delete the same Lease; a deletion that fails
// for another reason than a conflict waits a TTL before it is tried again.
func (m *Machine) collect(now time.Time) {
	var collector string
	for _, r := range m.records {
		if r.liveAt(now) && (collector == "" || r.identity < collector) {
			collector = r.identity
		}
	}
	if collector != m.cfg.Identity {
		return
	}
	// The due member Lease with the smallest name: the first due in name
	// order. The cheap tests come first; most records are fresh.
	due := ""
	for name, r := range m.records {
		if now.Before(r.seenAt.Add(collectAfter*m.cfg.TTL)) || now.Before(m.collectAt[name]) || (due != "" && name > due) ||
			name == m.name || r.identity == "" || name != LeaseName(m.cfg.Group, r.identity) {
			continue
		}
		due = name
	}
	if due == "" {
		return
	}
	r := m.records[due]
	m.send(&pending{purpose: PurposeCollect, sentAt: now, name: due}, &Request{Verb: Delete, Name: due,
		Preconditions: &metav1.Preconditions{UID: ptr.To(r.uid), ResourceVersion: ptr.To(r.resourceVersion)}})
}

// collected applies the answer to a collection.
func (m *Machine) collected(now time.Time, p *pending, r Result) {
	switch {
	case r.Err == nil:
		m.logf(slog.LevelInfo, "deleted the member Lease of a departed member", "memberLease", p.name, "identity", m.records[p.name].identity)
		delete(m.records, p.name)
		m.out.Collected++
	case apierrors.IsNotFound(r.Err):
		delete(m.records, p.name)
	case apierrors.IsConflict(r.Err):
		// Written since it was observed: the watch shows the new version.
	default:
		m.logf(slog.LevelWarn, "could not delete the member Lease of a departed member", "memberLease", p.name, "err", r.Err)
		m.collectAt[p.name] = now.Add(m.cfg.TTL)
	}
}
