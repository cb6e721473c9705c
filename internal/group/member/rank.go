package member

import (
	"cmp"
	"encoding/json"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// RankAnnotation is where a member with data-aware failover
// (LEASEHOLD_APP_RANK_URL) publishes its app's rank on its member Lease:
// JSON {"generation": string, "position": int64, "observedAt": RFC 3339
// (its own wall clock), "period": Go duration}. It is absent while the
// member's rank is unknown (its app did not answer its last probe).
const RankAnnotation = "leasehold.io/rank"

// RankStaleFactor: a published rank is stale, and ranks as unknown, when
// the member Lease that carries it was renewed more than RankStaleFactor
// probe periods after the rank was observed (both times on the member's
// own clock, so no clock offset enters): the member's prober stopped
// delivering.
const RankStaleFactor = 3

// Rank is what an app reports about the data it has: the generation of
// its history (the History ID a primary hands down through replication)
// and its position in it (an Operation ID that grows with every write).
// The zero Rank is unknown.
type Rank struct {
	Known      bool
	Generation string
	Position   int64
}

// publishedRank is RankAnnotation's value.
type publishedRank struct {
	Generation string    `json:"generation"`
	Position   int64     `json:"position"`
	ObservedAt time.Time `json:"observedAt"`
	Period     string    `json:"period"`
}

// encodeRank is RankAnnotation's value for r observed at observedAt by a
// prober of period; "" for an unknown rank.
func encodeRank(r Rank, observedAt time.Time, period time.Duration) string {
	if !r.Known {
		return ""
	}
	b, err := json.Marshal(publishedRank{Generation: r.Generation, Position: r.Position, ObservedAt: observedAt.UTC(), Period: period.String()})
	if err != nil {
		return "" // not expected: every field marshals
	}
	return string(b)
}

// rankOf reads the rank l publishes, defensively: a missing, malformed or
// stale annotation (see RankStaleFactor) is the unknown Rank.
func rankOf(l *coordinationv1.Lease) Rank {
	v := l.Annotations[RankAnnotation]
	if v == "" || l.Spec.RenewTime == nil {
		return Rank{}
	}
	var p publishedRank
	if json.Unmarshal([]byte(v), &p) != nil {
		return Rank{}
	}
	period, err := time.ParseDuration(p.Period)
	if err != nil || period <= 0 || p.ObservedAt.IsZero() {
		return Rank{}
	}
	if l.Spec.RenewTime.Sub(p.ObservedAt) > RankStaleFactor*period {
		return Rank{}
	}
	return Rank{Known: true, Generation: p.Generation, Position: p.Position}
}

// CompareRanks orders a before b (negative) or after (positive) as
// successors, given gen, the generation the last leader published on the
// Lease (its latest holder; "" when none did): a known rank before an
// unknown one; then a rank of generation gen before one of another; then
// the higher position. Positions of different generations are compared
// only when neither matches gen (nothing better is left). 0 when the
// ranks do not decide (both unknown, or equal).
func CompareRanks(a, b Rank, gen string) int {
	if a.Known != b.Known {
		if a.Known {
			return -1
		}
		return 1
	}
	if !a.Known {
		return 0
	}
	if am, bm := gen != "" && a.Generation == gen, gen != "" && b.Generation == gen; am != bm {
		if am {
			return -1
		}
		return 1
	}
	return cmp.Compare(b.Position, a.Position)
}

// Rank deferral on a crash failover: a candidate defers, after the Lease
// becomes free, rankDeferStep for each live member (other than the
// Lease's last holder) that ranks better than it, at most
// rankDeferSteps of them. With the default leaseDuration of 15s that is
// 1s per better member and 3s at most (RankDeferBound): the best-ranked
// live candidate campaigns at once, the next best after one step, and so
// on, so each gets a step's head start over the next, far more than the
// spread of the moment the candidates judge the Lease free (the watch
// delivers the holder's last renewal to all within milliseconds). It
// costs at most RankDeferBound of liveness, never safety: a deferring
// candidate is merely withdrawn, and everyone takes the Lease through
// its own election.
const (
	rankDeferDivisor = 15 // rankDeferStep is leaseDuration / rankDeferDivisor
	rankDeferSteps   = 3
)

// RankDeferStep is one step of the deferral for a group whose TTL (the
// elections' leaseDuration) is ttl.
func RankDeferStep(ttl time.Duration) time.Duration { return ttl / rankDeferDivisor }

// RankDeferBound is the longest a candidate defers after the Lease
// becomes free: rankDeferSteps steps, a fifth of ttl.
func RankDeferBound(ttl time.Duration) time.Duration { return rankDeferSteps * RankDeferStep(ttl) }

// Deferral says how long self, whose rank is own, waits after the Lease
// of s became free before it campaigns: until freeSince (when it became
// free, or s.FreeAt while another's claim runs) plus a step per live
// member that serves the Lease, does not decline it, is not its last
// holder (s.Holder: gone, or it would not be free) and ranks better than
// self (CompareRanks with s.Generation, this instance's own as leader).
// ok is false when self does not defer at all: it leads or holds the
// record, the Lease is reserved for it, or no one ranks better. Pure: the
// same view gives the same answer on every member, each on its own clock.
func Deferral(self string, own Rank, s LeaseState, freeSince time.Time, m *Members, step time.Duration) (until time.Time, ok bool) {
	if s.Leading || s.Holder == self || s.ReservedFor == self || m == nil {
		return time.Time{}, false
	}
	better := 0
	for _, id := range m.IDs() { // the members that serve it (Serving), without building the list
		if !m.ServedBy(id, s.Name) || id == self || id == s.Holder || containsLease(m.Declined[id], s.Name) {
			continue
		}
		if CompareRanks(m.Info[id].Rank, own, s.Generation) < 0 {
			better++
		}
	}
	if better == 0 {
		return time.Time{}, false
	}
	from := freeSince
	if s.FreeAt.After(from) {
		from = s.FreeAt
	}
	return from.Add(time.Duration(min(better, rankDeferSteps)) * step), true
}

func containsLease(leases []string, lease string) bool {
	for _, l := range leases {
		if l == lease {
			return true
		}
	}
	return false
}
