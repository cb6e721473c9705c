package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/pkg/api"
)

// group keeps three instances of one implementation running, each behind
// its own proxy, replacing those a trial stops.
type group struct {
	cfg       fleet.Config
	name      string
	instances []*fleet.Instance
	started   int
	lastToken api.FencingToken // tokens must only grow, across all trials
	restarts  int              // times nobody led and every instance was replaced
	misses    int              // trials in which no successor led within livenessBound
}

// fill replaces instances that have exited (client-go's baseline exits when
// it loses leadership) and starts new ones until there are n.
func (g *group) fill(ctx context.Context, n int) error {
	g.instances = slices.DeleteFunc(g.instances, func(x *fleet.Instance) bool {
		select {
		case <-x.Exited():
			x.Stop()
			return true
		default:
			return false
		}
	})
	for len(g.instances) < n {
		g.started++
		inst, err := g.cfg.Start(ctx, fmt.Sprintf("i%d", g.started), true)
		if err != nil {
			return err
		}
		g.instances = append(g.instances, inst)
	}
	return nil
}

func (g *group) stop() {
	for _, inst := range g.instances {
		inst.Stop()
	}
	g.instances = nil
}

// replace stops inst and starts a fresh instance in its place.
func (g *group) replace(ctx context.Context, inst *fleet.Instance) error {
	inst.Stop()
	g.instances = slices.DeleteFunc(g.instances, func(x *fleet.Instance) bool { return x == inst })
	return g.fill(ctx, len(g.instances)+1)
}

func (g *group) others(leader *fleet.Instance) []*fleet.Instance {
	return slices.DeleteFunc(slices.Clone(g.instances), func(x *fleet.Instance) bool { return x == leader })
}

// leader waits for the current leader and checks its token grew (for
// implementations that report one). client-go's elector never campaigns
// again once it has lost, so a group of its instances can be left with no
// candidate at all: when nobody leads within the liveness bound, the whole
// group is replaced once (counted in restarts).
func (g *group) leader(ctx context.Context) (fleet.Leadership, error) {
	if err := g.fill(ctx, 3); err != nil {
		return fleet.Leadership{}, err
	}
	for attempt := 0; ; attempt++ {
		wctx, cancel := context.WithTimeout(ctx, g.livenessBound())
		l, err := fleet.AwaitLeadership(wctx, g.instances)
		cancel()
		if err == nil {
			return l, g.checkToken(l)
		}
		if ctx.Err() != nil || attempt > 0 {
			return l, err
		}
		g.restarts++
		fmt.Fprintf(os.Stderr, "bench: %s: nobody leads; replacing every instance\n", g.name)
		g.stop()
		if err := g.fill(ctx, 3); err != nil {
			return l, err
		}
	}
}

// livenessBound is how long a trial waits for a leader: three lease
// durations, far beyond leaseDuration + retryPeriod.
func (g *group) livenessBound() time.Duration { return 3 * g.cfg.LeaseDuration }

func (g *group) checkToken(l fleet.Leadership) error {
	t := l.Status.FencingToken
	if t == 0 {
		return nil // the baseline has no token
	}
	if t < g.lastToken {
		return fmt.Errorf("token %d below the previous %d", t, g.lastToken)
	}
	g.lastToken = t
	return nil
}

// randomPhase waits a random part of two retry periods: real faults strike
// at any phase of the renew cycle, not right after a new leader's first
// renewal.
func (g *group) randomPhase(ctx context.Context) error {
	return sleepRandom(ctx, 2*g.cfg.RetryPeriod)
}

// sleepRandom waits a random time in [0, limit), or until ctx ends.
func sleepRandom(ctx context.Context, limit time.Duration) error {
	select {
	case <-time.After(rand.N(limit)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitSuccessor starts long-polls on every instance but leader before
// fault() strikes, and returns the first to lead and the time since fault.
func (g *group) awaitSuccessor(ctx context.Context, leader *fleet.Instance, fault func() error) (fleet.Leadership, time.Duration, error) {
	l, took, err := awaitFirst(ctx, g.others(leader), g.livenessBound(), fault)
	if err != nil {
		return l, took, err
	}
	return l, took, g.checkToken(l)
}

// awaitFirst starts long-polls on candidates before fault() strikes, and
// returns the first to lead and the time since fault, waiting at most
// bound (fleet.ErrNoLeader after that). Its long-polls have ended when it
// returns.
func awaitFirst(ctx context.Context, candidates []*fleet.Instance, bound time.Duration, fault func() error) (fleet.Leadership, time.Duration, error) {
	type result struct {
		l   fleet.Leadership
		err error
	}
	next := make(chan result, 1)
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	go func() {
		l, err := fleet.AwaitLeadership(wctx, candidates)
		next <- result{l, err}
	}()
	struck := time.Now()
	if err := fault(); err != nil {
		cancel()
		<-next
		return fleet.Leadership{}, 0, err
	}
	r := <-next
	if r.err != nil {
		return r.l, 0, r.err
	}
	return r.l, r.l.At.Sub(struck), nil
}

// trials runs n trials: send the leader sig and time until another
// instance answers 200 on /v1/leader. The stopped instance is replaced.
func (g *group) trials(ctx context.Context, name string, n int, sig syscall.Signal) ([]time.Duration, error) {
	var latencies []time.Duration
	for i := range n {
		leader, err := g.leader(ctx)
		if err != nil {
			return nil, err
		}
		if err := g.randomPhase(ctx); err != nil {
			return nil, err
		}
		next, took, err := g.awaitSuccessor(ctx, leader.Instance, func() error { return leader.Instance.Signal(sig) })
		if errors.Is(err, fleet.ErrNoLeader) && ctx.Err() == nil {
			g.misses++
			fmt.Fprintf(os.Stderr, "bench: %s: %s %2d: no successor within %v\n", g.name, name, i+1, g.livenessBound())
			if err := g.replace(ctx, leader.Instance); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s %d: %w", name, i, err)
		}
		latencies = append(latencies, took)
		fmt.Fprintf(os.Stderr, "bench: %s: %s %2d: %v (%s → %s)\n", g.name, name, i+1, took.Round(time.Microsecond), leader.Instance.Name, next.Instance.Name)
		<-leader.Instance.Exited()
		if err := g.replace(ctx, leader.Instance); err != nil {
			return nil, err
		}
	}
	return latencies, nil
}
