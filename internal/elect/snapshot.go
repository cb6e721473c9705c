package elect

import (
	"time"

	"github.com/leasehold/leasehold/internal/clockskew"
	"github.com/leasehold/leasehold/internal/fence"
)

// Snapshot is the election state at one moment, as published by the loop.
// It is immutable: readers may keep and share it freely.
type Snapshot struct {
	Identity  string // this instance's holder identity
	Namespace string
	Lease     string

	// Leading is true while this instance holds a term. Use IsLeader(now),
	// which also checks the term's validity, to decide whether to act.
	Leading bool
	// ValidUntil is the end of this instance's validity (local clock,
	// monotonic); zero unless Leading.
	ValidUntil time.Time

	Holder string      // the Lease's holder, "" when none or unknown
	Term   int32       // leaseTransitions of the holder's term; people only, not a token
	Token  fence.Token // the current term's token: own when leading, else the holder's, as seen on its acquire or as published; 0 when unknown
	// LeaderAddress is the holder's advertised address (own when leading),
	// "" when it has none or there is no holder. Like Holder it says nothing
	// of validity: use ValidLeaderAddress.
	LeaderAddress string
	// Generation is the generation last published on the Lease
	// (decide.GenerationAnnotation; own while leading), "" when none.
	// Changes alone do not move Index.
	Generation string
	// ReservedFor is the successor the last holder handed the Lease to,
	// while it goes first (until FreeAt for others; this instance's own
	// identity when handed to it); "" otherwise. Changes alone do not move
	// Index.
	ReservedFor string
	// HandedOver is true while the record names this instance and was
	// written by the previous holder handing the Lease over
	// (decide.HandedOverAnnotation): until this instance's first write on
	// it. Changes alone do not move Index.
	HandedOver bool

	AcquiredAt time.Time // the Lease's acquireTime, as written by the holder
	RenewedAt  time.Time // the Lease's renewTime, as written by the holder
	ObservedAt time.Time // local time this instance last saw the Lease change
	// FreeAt is when this instance judges the Lease free to take: the
	// claim of its holder (one it may not have seen, for a record emptied
	// by hand) ends. Zero when it is free now, missing, or this instance's
	// own. Changes alone do not move Index.
	FreeAt time.Time

	// Observed is true once the Lease has been read, found missing, or
	// acquired at least once.
	Observed bool
	// WatchUp is true while a watch on the Lease is open.
	WatchUp bool
	// Candidate is true while this instance campaigns (or leads): it is
	// neither withdrawn (SetCandidate) nor staying out after a Release.
	// Changes of Candidate alone do not move Index.
	Candidate bool
	// Heartbeat is the local time the loop last ran. It advances at least
	// once per LeaseDuration while the loop is healthy.
	Heartbeat time.Time
	// LastError is the error of the last failed request on the Lease (a
	// missing namespace, a 403, a timeout), "" once a later request
	// succeeded; LastErrorAt is when it failed. Changes alone do not move
	// Index.
	LastError   string
	LastErrorAt time.Time
	// HolderClock is what the holder's renewals, as this instance observed
	// them, say about the holder's clock against this instance's
	// (clockskew.Estimate); nil while this instance holds the Lease, there
	// is no holder, or too few renewals were seen. Changes alone do not
	// move Index.
	HolderClock *clockskew.Estimate

	// Index increases whenever Leading, Holder, Term, Token or
	// LeaderAddress changes, and only then: renewals do not move it. It starts at the process's start
	// time in microseconds (see New), so indices of different processes do
	// not collide.
	Index uint64

	changed chan struct{} // closed when a snapshot with a larger Index is published
}

// IsLeader reports whether this instance may act as leader at now: it holds
// a term and now is before the term's ValidUntil, on the monotonic clock
// (the rule) and on the wall clock too (so that no answer says leader once
// the published validUntil has passed, even while the wall clock runs ahead
// of the monotonic one: a slewed or stepped clock can only end a term's
// report early, never extend it). It is computed at the moment of asking,
// so a snapshot held across a pause answers false once validity has run
// out.
func (s *Snapshot) IsLeader(now time.Time) bool {
	return s.Leading && now.Before(s.ValidUntil) && now.Round(0).Before(s.ValidUntil.Round(0))
}

// ValidFor is how long leadership remains valid after now, 0 when not
// leader: the smaller of what the monotonic clock says (the rule) and what
// the wall clock says (ValidUntil as published, minus now's wall reading),
// so that it never exceeds the published validUntil either.
func (s *Snapshot) ValidFor(now time.Time) time.Duration {
	if !s.IsLeader(now) {
		return 0
	}
	return min(s.ValidUntil.Sub(now), s.ValidUntil.Round(0).Sub(now.Round(0)))
}

// Changed returns a channel that is closed once a snapshot with a larger
// Index has been published. It is how watchers block without polling.
func (s *Snapshot) Changed() <-chan struct{} { return s.changed }

// indexKey is what a change of Index stands for.
type indexKey struct {
	leading bool
	holder  string
	term    int32
	token   fence.Token
	address string
}

func (s *Snapshot) key() indexKey {
	return indexKey{leading: s.Leading, holder: s.Holder, term: s.Term, token: s.Token, address: s.LeaderAddress}
}

// ValidLeaderAddress is the advertised address of the instance that leads
// validly at now, as this instance judges it: its own while IsLeader(now);
// another holder's while now is before FreeAt (its claim has not run out);
// "" when no one leads validly or the holder advertises no address.
func (s *Snapshot) ValidLeaderAddress(now time.Time) string {
	switch {
	case s.Leading:
		if s.IsLeader(now) {
			return s.LeaderAddress
		}
		return ""
	case s.Holder != "" && now.Before(s.FreeAt):
		return s.LeaderAddress
	}
	return ""
}
