package member

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Annotations a member writes on its member Lease for the choice of a
// successor: its priority (an integer) and its process's start time (RFC
// 3339, its own wall clock).
const (
	PriorityAnnotation  = "leasehold.io/priority"
	StartedAtAnnotation = "leasehold.io/started-at"
)

// Info is what a member publishes on its member Lease for the choice of a
// successor (Successor).
type Info struct {
	// Priority is the member's LEASEHOLD_PRIORITY (PriorityAnnotation); 0
	// when absent or not an integer.
	Priority int64
	// StartedAt is when the member's process started, by its own wall
	// clock (StartedAtAnnotation); zero when absent or malformed.
	StartedAt time.Time
	// Rank is the member's app's rank (RankAnnotation), unknown when
	// absent, malformed or stale; it ranks first (CompareRanks).
	Rank Rank
}

// infoOf reads a member Lease's Info defensively: a missing or malformed
// annotation reads as its zero value.
func infoOf(l *coordinationv1.Lease) Info {
	var info Info
	if p, err := strconv.ParseInt(l.Annotations[PriorityAnnotation], 10, 64); err == nil {
		info.Priority = p
	}
	if v := l.Annotations[StartedAtAnnotation]; v != "" { // "" would not parse either: spare the error
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			info.StartedAt = t
		}
	}
	info.Rank = rankOf(l)
	return info
}

// Heir is the member a Lease is handed to, with the witness of a handover
// in one write: the resourceVersion of its member Lease as observed (see
// decide.HandedOverAnnotation). The zero Heir hands it to anyone.
type Heir struct {
	Identity string
	Witness  string
}

// heirOf is to, with its member Lease's version in members as witness.
func heirOf(members *Members, to string) Heir {
	if to == "" || members == nil {
		return Heir{Identity: to}
	}
	return Heir{Identity: to, Witness: members.Versions[to]}
}

// Successor is the member self hands the Lease named lease to when it
// leaves (shutdown, or a health step-down, with handover to a successor):
// of the live members other than self that serve that Lease and do not
// decline it (Members.Declined: they stay out of it, and would leave it
// reserved and unheld), the one with the highest priority, then the newest
// start (so in a rolling update the newest pods, which the rollout keeps,
// win over old ones it terminates next), then the smallest identity; ""
// when there is none. Members that are shutting down have deleted their
// member Leases and are not among the live ones.
//
// Start times come from each member's own clock: members started within a
// clock offset of each other may be ordered either way. That costs at
// most one more move, never safety: the successor takes the Lease through
// its own election.
func Successor(self, lease, gen string, m *Members) string {
	if m == nil {
		return ""
	}
	var best string
	for _, id := range m.IDs() { // the members that serve it (Serving), without building the list
		if !m.ServedBy(id, lease) || id == self || slices.Contains(m.Declined[id], lease) {
			continue
		}
		if best == "" || better(id, m.Info[id], best, m.Info[best], gen) {
			best = id
		}
	}
	return best
}

// better reports whether member a ranks before member b as a successor.
func better(a string, ai Info, b string, bi Info, gen string) bool {
	if c := CompareRanks(ai.Rank, bi.Rank, gen); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(ai.Priority, bi.Priority); c != 0 {
		return c > 0
	}
	if c := ai.StartedAt.Compare(bi.StartedAt); c != 0 {
		return c > 0
	}
	return a < b
}

// Best is the best candidate for lease among the live members that serve
// it and do not decline it, this instance (self, of rank own, while it is
// a member) included: the order of Successor. "" when there is none.
func Best(self string, own Rank, member bool, lease, gen string, m *Members) string {
	best := Successor(self, lease, gen, m)
	if !member {
		return best
	}
	if best == "" {
		return self
	}
	info := m.Info[self]
	info.Rank = own
	if better(self, info, best, m.Info[best], gen) {
		return self
	}
	return best
}

// heirs is, for a balanced group's member self that leaves, whom it hands
// each Lease to: the member the fair share (Assign, per class cs of Leases
// the same members serve) gives it to among the others, so each Lease
// moves once and the group stays fair. "" for a Lease no one is given, and
// for every Lease while it is too early to judge (the member Leases not
// listed, a Lease not observed).
func heirs(self string, now time.Time, members *Members, cs []class, leases []LeaseState) []string {
	heirs := make([]string, len(leases))
	if members == nil || !members.Listed {
		return heirs
	}
	holders, ok := holdersOf(self, now, leases)
	if !ok {
		return heirs
	}
	for _, c := range cs {
		for j, to := range Assign(viewOf(self, members, leases, holders, c, true)) {
			heirs[c.leases[j]] = to
		}
	}
	return heirs
}
