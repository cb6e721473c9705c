package group

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/elect"
)

// loop is the group's one goroutine: it publishes the group state and puts
// each elector in or out of the election as the plan says. It owns the
// fields below.
type loop struct {
	*Group
	fit       bool   // a member (health-gated candidacy lets it be)
	requested []bool // candidacy last asked of each elector
	// left[i]: elector i was last asked to leave (Elector.Leave: this
	// instance is not a member), so it refuses Leases handed to it; an
	// elector merely withdrawn is outside this member's share and accepts
	// them.
	left     []bool
	inflight []bool // a SetCandidate call on that elector is under way
	results  chan int
	calls    sync.WaitGroup
	leading  []bool    // as last published, for the move counts
	handedAt time.Time // when a Lease was last seen handed to this instance (HandedTo)
}

// run loops until ctx ends or an elector fails.
func (l *loop) run(ctx context.Context, failed <-chan error) error {
	l.leading = make([]bool, len(l.electors))
	for {
		now := l.clock.Now()
		snap := l.collect(now)
		l.countMoves(snap) // before publishing: whoever sees the snapshot sees its counts
		l.snapshots.Publish(snap)
		wake := l.plan(ctx, now, snap)
		timer := l.clock.NewTimer(max(wake.Sub(now), 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case err := <-failed:
			timer.Stop()
			return err
		case <-l.notify:
		case i := <-l.results:
			l.inflight[i] = false
		case req := <-l.fitness:
			if req.fit != l.fit {
				l.log.Info("group membership changed by health-gated candidacy", "member", req.fit, "reason", req.reason)
			}
			l.fit = req.fit
			if l.members != nil {
				l.members.setMember(req.fit)
			}
			close(req.reply)
		case <-timer.C():
		}
		timer.Stop()
	}
}

// plan asks each elector for the candidacy the plan wants, one call at a
// time per elector, and returns when to plan again at the latest.
func (l *loop) plan(ctx context.Context, now time.Time, snap Snapshot) time.Time {
	wake := now.Add(l.cfg.Election.LeaseDuration)
	if !l.cfg.Candidate {
		return wake
	}
	want := make([]bool, len(l.electors))
	switch {
	case !l.fit:
	case !l.cfg.Balance:
		for i := range want {
			want[i] = true
		}
	default:
		states := make([]LeaseState, len(snap.Leases))
		for i, s := range snap.Leases {
			states[i] = leaseStateOf(s)
		}
		if HandedTo(l.cfg.Election.Identity, states) {
			l.handedAt = now
		}
		var ok bool
		var next time.Time
		if want, next, ok = Balanced(l.cfg.Election.Identity, now, l.members.load(), states, l.cfg.settleTime(), l.handedAt); !ok {
			return wake // too early to judge: change nothing
		}
		if next.Before(wake) {
			wake = next
		}
	}
	leave := !l.fit
	for i, w := range want {
		// A Lease handed to this member while withdrawn from it
		// (decide.Config.AcceptHandovers) and not wanted is withdrawn again.
		handedUnwanted := !w && snap.Leases[i].Leading
		if (w == l.requested[i] && leave == l.left[i] && !handedUnwanted) || l.inflight[i] {
			continue
		}
		l.requested[i], l.left[i], l.inflight[i] = w, leave, true
		reason := "this Lease is in this member's share"
		if !w {
			reason = "this Lease is not in this member's share"
			if !l.fit {
				reason = "not a member"
			}
		}
		e := l.electors[i]
		var to elect.Heir
		if leave && l.cfg.Handover {
			to = l.successorFor(i) // leaving the group: hand over, as on shutdown
		}
		l.calls.Go(func() {
			defer func() { l.results <- i }()
			var err error
			if leave {
				_, err = e.Leave(ctx, reason, to)
			} else {
				_, err = e.SetCandidate(ctx, w, reason)
			}
			if err != nil && ctx.Err() == nil {
				l.log.Warn("candidacy change failed", "lease", snap.Leases[i].Lease, "candidate", w, "err", err)
			}
		})
	}
	return wake
}

// countMoves counts the Leases this instance started or stopped holding.
func (l *loop) countMoves(snap Snapshot) {
	for i, s := range snap.Leases {
		switch {
		case s.Leading && !l.leading[i]:
			l.metrics.moves.WithLabelValues("in").Inc()
		case !s.Leading && l.leading[i]:
			l.metrics.moves.WithLabelValues("out").Inc()
		}
		l.leading[i] = s.Leading
	}
}
