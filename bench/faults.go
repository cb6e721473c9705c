package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
)

// faultKind is a fault that deposes a leader without stopping it.
type faultKind struct {
	name string
	// strike deposes leader; heal ends the fault.
	strike, heal func(leader *fleet.Instance) error
}

var (
	partition = faultKind{
		name:   "partition",
		strike: func(l *fleet.Instance) error { l.Proxy.Cut(); return nil },
		heal:   func(l *fleet.Instance) error { l.Proxy.Heal(); return nil },
	}
	pause = faultKind{
		name:   "pause",
		strike: func(l *fleet.Instance) error { return l.Signal(syscall.SIGSTOP) },
		heal:   func(l *fleet.Instance) error { return l.Signal(syscall.SIGCONT) },
	}
)

// faultResults count what n trials of one fault showed.
type faultResults struct {
	trials     int
	overlaps   int             // trials in which two instances claimed leadership at once, with certainty
	recoveries []time.Duration // fault → a successor leads
	firstAfter int             // trials in which the deposed leader's first answer after the fault said leader:true
	misses     int             // trials in which no successor led within the liveness bound
}

// faultTrials runs n trials: depose the leader with the fault until
// another instance leads and at least leaseDuration has passed, end the
// fault, ask the old leader at once whether it leads, and check every
// status sample taken meanwhile for overlap. The old leader is replaced
// after each trial (client-go's elector never campaigns again).
func (g *group) faultTrials(ctx context.Context, kind faultKind, n int) (faultResults, error) {
	res := faultResults{trials: n}
	for i := range n {
		leader, err := g.leader(ctx)
		if err != nil {
			return res, err
		}
		if err := g.randomPhase(ctx); err != nil {
			return res, err
		}
		s := startSampler(ctx, g.instances)
		next, took, err := g.awaitSuccessor(ctx, leader.Instance, func() error { return kind.strike(leader.Instance) })
		if errors.Is(err, fleet.ErrNoLeader) && ctx.Err() == nil {
			res.misses++
			_ = kind.heal(leader.Instance)
			if overlaps(s.stop()) {
				res.overlaps++
			}
			fmt.Fprintf(os.Stderr, "bench: %s: %s %2d: no successor within %v\n", g.name, kind.name, i+1, g.livenessBound())
			if err := g.replace(ctx, leader.Instance); err != nil {
				return res, err
			}
			continue
		}
		if err != nil {
			s.stop()
			return res, fmt.Errorf("%s %d: %w", kind.name, i, err)
		}
		res.recoveries = append(res.recoveries, took)
		if wait := g.cfg.LeaseDuration + 500*time.Millisecond - took; wait > 0 {
			time.Sleep(wait) // the fault lasts longer than leaseDuration: a parameter of the trial, not a synchronisation
		}
		if err := kind.heal(leader.Instance); err != nil {
			s.stop()
			return res, err
		}
		first := s.sampleNow(ctx, leader.Instance) // the deposed leader's first answer after the fault
		time.Sleep(200 * time.Millisecond)         // keep sampling a little after the fault: an observation window
		samples := s.stop()
		if first.leader {
			res.firstAfter++
		}
		overlap := overlaps(samples)
		if overlap {
			res.overlaps++
		}
		fmt.Fprintf(os.Stderr, "bench: %s: %s %2d: successor %s after %v; old leader's first answer leader=%v; overlap=%v\n",
			g.name, kind.name, i+1, next.Instance.Name, took.Round(time.Millisecond), first.leader, overlap)
		if err := g.replace(ctx, leader.Instance); err != nil {
			return res, err
		}
	}
	return res, nil
}
