package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/fleet"
)

// group keeps a number of sidecars running, replacing those a trial stops.
type group struct {
	cfg       fleet.Config
	instances []*fleet.Instance
	started   int
}

func (g *group) fill(ctx context.Context, n int) error {
	for len(g.instances) < n {
		g.started++
		inst, err := g.cfg.Start(ctx, fmt.Sprintf("sidecar-%d", g.started), false)
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
}

// trials runs n trials: find the leader, send it sig, and time until
// another instance answers 200 on /v1/leader (long-poll, no polling). The
// stopped instance is replaced before the next trial. Tokens must grow.
func (g *group) trials(ctx context.Context, name string, n int, sig syscall.Signal) ([]time.Duration, error) {
	var latencies []time.Duration
	var lastToken fence.Token
	for i := range n {
		leader, err := fleet.AwaitLeadership(ctx, g.instances)
		if err != nil {
			return nil, err
		}
		if leader.Status.FencingToken <= lastToken {
			return nil, fmt.Errorf("%s %d: token %d not above the previous %d", name, i, leader.Status.FencingToken, lastToken)
		}
		lastToken = leader.Status.FencingToken
		others := slices.DeleteFunc(slices.Clone(g.instances), func(x *fleet.Instance) bool { return x == leader.Instance })

		type result struct {
			l   fleet.Leadership
			err error
		}
		next := make(chan result, 1)
		go func() {
			l, err := fleet.AwaitLeadership(ctx, others)
			next <- result{l, err}
		}()
		// Real faults strike at any phase of the renew cycle: wait a random
		// part of two retry periods, so that trials do not all start right
		// after the new leader's first renewal.
		select {
		case <-time.After(rand.N(2 * g.cfg.RetryPeriod)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sent := time.Now()
		if err := leader.Instance.Signal(sig); err != nil {
			return nil, err
		}
		r := <-next
		if r.err != nil {
			return nil, fmt.Errorf("%s %d: %w", name, i, r.err)
		}
		latencies = append(latencies, r.l.At.Sub(sent))
		fmt.Fprintf(os.Stderr, "bench: %s %2d: %v (token %d → %d)\n", name, i+1, r.l.At.Sub(sent).Round(time.Microsecond), lastToken, r.l.Status.FencingToken)

		<-leader.Instance.Exited()
		leader.Instance.Stop()
		g.instances = others
		if err := g.fill(ctx, len(others)+1); err != nil {
			return nil, err
		}
	}
	return latencies, nil
}
