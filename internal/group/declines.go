package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/elect"
)

// DeclinedAnnotation, on a member Lease, lists the Leases of the group that
// member stays out of for now, each with the wall-clock time its stay-out
// ends (RFC 3339), as JSON: {"orders-3": "2026-12-01T10:00:00Z"}. The plan
// gives a declined Lease to another member (Assign), so a Lease released
// with POST /v1/leases/{lease}/release?for=D is taken by someone else
// within a round trip instead of staying free for D. Other members time
// each stay-out from the record's renewTime, written by the same clock
// (localDeclines), so offsets between the nodes' wall clocks do not move
// when it ends.
const DeclinedAnnotation = "leasehold.io/declined"

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
	if e.group.members != nil && stayOut > 0 {
		e.group.declines.set(e.Snapshot().Lease, e.group.clock.Now().Add(stayOut))
		e.group.members.poke()
	}
	return e.Elector.Release(ctx, stayOut)
}

// ErrUnknownSuccessor is HandOver's answer for an identity that is not a
// live member other than this instance, as this instance sees the group.
var ErrUnknownSuccessor = errors.New("not a live member of the group other than this instance")

// ErrNoMembership is HandOver's answer on an instance that is not a member
// (an observer): it has no view of the members to check a successor
// against, and holds nothing to hand over.
var ErrNoMembership = errors.New("an observer has no membership to hand over to")

// HandOver is Release, handed to the live member with identity to (see
// elect.Elector.ReleaseTo): it takes the Lease first. When to is not a
// live member other than this instance it releases nothing and returns an
// error wrapping ErrUnknownSuccessor.
func (e Election) HandOver(ctx context.Context, stayOut time.Duration, to string) (bool, error) {
	self := e.group.cfg.Election.Identity
	if e.group.members == nil {
		return false, ErrNoMembership
	}
	if to == self || !slices.Contains(e.group.members.load().identities(), to) {
		return false, fmt.Errorf("successor %q: %w", to, ErrUnknownSuccessor)
	}
	if stayOut > 0 {
		e.group.declines.set(e.Snapshot().Lease, e.group.clock.Now().Add(stayOut))
		e.group.members.poke()
	}
	return e.Elector.ReleaseTo(ctx, stayOut, heir(e.group.members.load(), to))
}

// declines are this member's stay-outs, by Lease. Written by Release
// (HTTP handlers), read by the membership loop; hence the lock.
type declines struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (d *declines) set(lease string, until time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.until == nil {
		d.until = map[string]time.Time{}
	}
	d.until[lease] = until
}

// current returns the stay-outs that have not ended at now, and forgets
// the others.
func (d *declines) current(now time.Time) map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]time.Time{}
	for lease, until := range d.until {
		if now.Before(until) {
			out[lease] = until
		} else {
			delete(d.until, lease)
		}
	}
	return out
}

// encodeDeclines is the annotation's value for until ("" for none).
func encodeDeclines(until map[string]time.Time) string {
	if len(until) == 0 {
		return ""
	}
	m := make(map[string]string, len(until))
	for lease, t := range until {
		m[lease] = t.UTC().Format(time.RFC3339Nano)
	}
	b, _ := json.Marshal(m) // a map of strings always encodes
	return string(b)
}

// localDeclines are the stay-outs of member Lease l, observed at now, with
// their ends on this instance's clock. The writer stamps each end and the
// record's renewTime with its own wall clock in the same write, so the time
// left at that write (end − renewTime) does not depend on how far the
// writer's clock is from this one's; it is counted from now, which is no
// earlier than the write: a stay-out can only end late here, by the time
// the record took to arrive, which costs balance, never safety. A record
// without a renewTime (not written by a member) keeps the written ends.
func localDeclines(now time.Time, l *coordinationv1.Lease) map[string]time.Time {
	declined := decodeDeclines(l.Annotations[DeclinedAnnotation])
	if l.Spec.RenewTime == nil {
		return declined
	}
	written := l.Spec.RenewTime.Time
	for lease, until := range declined {
		declined[lease] = now.Add(until.Sub(written))
	}
	return declined
}

// decodeDeclines parses the annotation; a malformed one declines nothing.
func decodeDeclines(value string) map[string]time.Time {
	if value == "" {
		return nil
	}
	var m map[string]string
	if json.Unmarshal([]byte(value), &m) != nil {
		return nil
	}
	out := make(map[string]time.Time, len(m))
	for lease, s := range m {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			out[lease] = t
		}
	}
	return out
}
