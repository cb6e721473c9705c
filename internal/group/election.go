package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/group/member"
)

// Election is one Lease's election as the HTTP layer serves it: the
// elector, with Release also recording the stay-out as a decline the
// other members see.
type Election struct {
	*elect.Elector
	group *Group
}

// Release releases the Lease (elect.Elector.Release) and keeps this member
// out of it for stayOut; the other members see the decline on this
// member's Lease and one of them takes the Lease.
func (e Election) Release(ctx context.Context, stayOut time.Duration) (bool, error) {
	if err := e.decline(ctx, stayOut); err != nil {
		return false, err
	}
	return e.Elector.Release(ctx, stayOut)
}

// ErrUnknownSuccessor is HandOver's answer for an identity that is not a
// live member other than this instance that serves the Lease, as this
// instance sees the group.
var ErrUnknownSuccessor = errors.New("not a live member of the group other than this instance that serves the Lease")

// ErrNoMembership is HandOver's answer on an instance that is not a member
// (an observer): it has no view of the members to check a successor
// against, and holds nothing to hand over.
var ErrNoMembership = errors.New("an observer has no membership to hand over to")

// HandOver is Release, handed to the live member with identity to (see
// elect.Elector.ReleaseTo): it takes the Lease first. When to is not a
// live member other than this instance that serves the Lease, it releases
// nothing and returns an error wrapping ErrUnknownSuccessor.
func (e Election) HandOver(ctx context.Context, stayOut time.Duration, to string) (bool, error) {
	if e.group.machine == nil {
		return false, ErrNoMembership
	}
	members, lease := e.group.members.Load(), e.Snapshot().Lease
	if to == e.group.cfg.Election.Identity || !slices.Contains(members.IDs(), to) || !members.ServedBy(to, lease) {
		return false, fmt.Errorf("successor %q: %w", to, ErrUnknownSuccessor)
	}
	if err := e.decline(ctx, stayOut); err != nil {
		return false, err
	}
	return e.Elector.ReleaseTo(ctx, stayOut, elect.Heir{Identity: to, Witness: members.Versions[to]})
}

// decline records a stay-out of stayOut from the Lease, which the member
// Lease then carries (member.Decline); nothing for an observer or without
// a stay-out.
func (e Election) decline(ctx context.Context, stayOut time.Duration) error {
	if e.group.machine == nil || stayOut <= 0 {
		return nil
	}
	return e.group.input(ctx, member.Decline{Lease: e.Snapshot().Lease, Until: e.group.clock.Now().Add(stayOut)})
}
