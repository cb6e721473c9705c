package decide

import (
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// observe records what the Lease looks like at resourceVersion rv (lease
// nil when it does not exist; a lease's own resourceVersion wins over rv),
// as seen at now. p is the request whose answer this is, nil for a watch
// observation.
//
// A watch observation older than what is known is stale and ignored. An
// answer can be older too (a watch event overtook it); it is ignored unless
// it is older than what was known when its request was sent, which only a
// rollback of etcd's revisions explains: then it is taken as the truth. So
// is an answer at the very resourceVersion known at its send that is not
// what was known then (the Lease, known missing; another object, by its
// UID): only a store that went back serves a deleted version again (etcd
// restored from a snapshot, with --bump-revision or without), or reuses a
// resourceVersion (without).
// An answer that the Lease is missing carries no resourceVersion: when a
// newer version than the one known at its request's send has been
// observed since, the request may have been served before that version,
// so the absence is not taken (a read is owed instead). observe reports
// whether it took what it was given as the latest it knows.
func (m *Machine) observe(now time.Time, lease *coordinationv1.Lease, rv string, p *pending) bool {
	if lease != nil {
		rv = lease.ResourceVersion
	}
	if lease == nil && rv == "" && p != nil && m.latestRV != p.rvAtSend {
		m.needRead = true
		return false
	}
	if rv != "" && m.latestRV != "" && !newer(rv, m.latestRV) {
		switch {
		case p != nil && p.rvAtSend != "" && rv != p.rvAtSend && !newer(rv, p.rvAtSend),
			p != nil && lease != nil && rv == p.rvAtSend && lease.UID != p.uid:
			m.logf(slog.LevelError, "the Lease went back to a version older than one already seen (etcd restored from a snapshot?): "+
				"following the Lease again, but no term starts with a token at or below one already seen",
				"resourceVersion", rv, "seen", m.latestRV)
			m.latestRV = rv
		case rv == m.latestRV && lease == nil && m.lease != nil:
			// A deletion reported with the deleted version's own
			// resourceVersion: it is newer news.
		default:
			return false // stale, or already known
		}
	}
	if rv != "" {
		m.tokenFloor = max(m.tokenFloor, tokenOf(rv))
		if m.latestRV == "" || newer(rv, m.latestRV) {
			m.latestRV = rv
		}
	}
	if m.known && sameVersion(m.lease, lease) {
		return true
	}
	prevKnown, prevHolder := m.known, holderOf(m.lease)
	m.known, m.lease, m.seenAt = true, lease, now
	if lease != nil && m.errorPurpose == Placeholder {
		m.clearError() // the Lease exists now: a failed create no longer matters
	}
	holder := holderOf(lease)
	if lease != nil {
		m.lastTerm = transitionsOf(lease)
		if holder != "" {
			m.heldSeen = true
			m.heldDuration = durationOf(lease, m.cfg.LeaseDuration)
		}
	}
	m.claim(now, lease)
	if prevKnown && holder != prevHolder {
		m.out.Counts.HolderChanges++
		m.logf(slog.LevelInfo, "lease holder changed", "from", prevHolder, "to", holder)
	}
	m.followTerm(now)
	return true
}

// claim updates notBefore, the time at which the record just observed at
// now becomes free for this instance (see the package's safety contract).
func (m *Machine) claim(now time.Time, lease *coordinationv1.Lease) {
	wait := max(durationOf(lease, m.cfg.LeaseDuration), m.cfg.LeaseDuration)
	switch holder := holderOf(lease); {
	case lease == nil:
		// Missing: nothing to acquire. A candidate creates an empty record,
		// whose own observation then counts.
	case holder == m.cfg.Identity:
		m.notBefore = time.Time{} // this instance's own write
	case holder != "":
		m.notBefore = latest(m.notBefore, now.Add(wait))
	case releasedFor(lease) != "" && releasedFor(lease) != m.cfg.Identity:
		// Released by its holder, who stepped down first, and handed to
		// another: that successor goes first.
		m.notBefore = now.Add(m.cfg.RenewDeadline)
	case releasedBy(lease) != "":
		m.notBefore = time.Time{} // released by its holder, who stepped down first
	case now.Before(m.shield):
		// Emptied while this instance's term was valid: nobody else can
		// have acquired since its last write, so it is free for this
		// instance (only) at once.
	default:
		// Emptied by hand, or never held: the holder this instance may not
		// have seen could still lead for up to its lease duration.
		m.notBefore = latest(m.notBefore, now.Add(max(wait, m.heldDuration)))
	}
}

// followTerm ends the term the moment the latest record shows that this
// instance lost it, and renews at once on a record of its own that someone
// else edited.
func (m *Machine) followTerm(now time.Time) {
	if m.term == nil {
		return
	}
	switch holder := holderOf(m.lease); {
	case m.lease == nil:
		m.stepDown(now, "the Lease was deleted", keepShield)
	case holder == m.cfg.Identity:
		if m.lease.ResourceVersion != m.lastOwnRV {
			m.term.nextRenew = now // edited by someone else: renew on the new version
		}
	case releasedBy(m.lease) == "" && holder == "":
		m.stepDown(now, "the Lease was emptied by someone else", keepShield)
	default:
		m.stepDown(now, "the Lease is now held by "+quoteOrNone(holder), clearShield)
	}
}

// sameVersion reports whether a and b are the same version of the record
// (both missing counts as the same): the same resourceVersion of the same
// object.
func sameVersion(a, b *coordinationv1.Lease) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.ResourceVersion == b.ResourceVersion && a.UID == b.UID
}

func quoteOrNone(s string) string {
	if s == "" {
		return "nobody (released)"
	}
	return `"` + s + `"`
}
