package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/pkg/api"
)

// appFigures are the figures of the app-aware features, which only
// leasehold has: health-gated candidacy and the leader label.
type appFigures struct {
	trials int // 0: the section was skipped
	gate   gateFigures
	// handovers and failovers are the leader-label trials (n = trials each).
	handovers, failovers labelTrials
}

// benchApp measures the app-aware features on leasehold alone, each in a
// namespace of its own with three instances: how soon a healthy replica
// leads after the leader's app fails, and how far the leader label lags
// behind leadership in handovers and failovers.
func benchApp(ctx context.Context, cluster *kubetest.Cluster, base fleet.Config, opts options) (appFigures, error) {
	f := appFigures{trials: opts.appTrials}
	if opts.appTrials == 0 {
		return f, nil
	}
	var err error
	if f.gate, err = benchGate(ctx, cluster, base, opts); err != nil {
		return f, fmt.Errorf("health-gated candidacy: %w", err)
	}
	if f.handovers, f.failovers, err = benchLabel(ctx, cluster, base, opts.appTrials); err != nil {
		return f, fmt.Errorf("leader label: %w", err)
	}
	return f, nil
}

// fixedGroup runs leasehold instances under fixed names (each its POD_NAME),
// each with a configuration of its own, and restarts a stopped instance
// under the same name, as a Pod's container is restarted.
type fixedGroup struct {
	configs   map[string]fleet.Config // by name
	instances map[string]*fleet.Instance
	bound     time.Duration // how long to wait for a leader
}

func newFixedGroup(configs map[string]fleet.Config, bound time.Duration) *fixedGroup {
	return &fixedGroup{configs: configs, instances: map[string]*fleet.Instance{}, bound: bound}
}

// startAll starts every instance that is not running.
func (g *fixedGroup) startAll(ctx context.Context) error {
	for _, name := range slices.Sorted(maps.Keys(g.configs)) {
		if _, ok := g.instances[name]; ok {
			continue
		}
		if err := g.restart(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// restart stops the instance named name, if it runs, and starts it again.
func (g *fixedGroup) restart(ctx context.Context, name string) error {
	if inst, ok := g.instances[name]; ok {
		inst.Stop()
		delete(g.instances, name)
	}
	inst, err := g.configs[name].Start(ctx, name, false)
	if err != nil {
		return err
	}
	g.instances[name] = inst
	return nil
}

func (g *fixedGroup) all() []*fleet.Instance {
	return slices.Collect(maps.Values(g.instances))
}

func (g *fixedGroup) others(inst *fleet.Instance) []*fleet.Instance {
	return slices.DeleteFunc(g.all(), func(x *fleet.Instance) bool { return x == inst })
}

// leader waits up to bound for the current leader.
func (g *fixedGroup) leader(ctx context.Context) (fleet.Leadership, error) {
	ctx, cancel := context.WithTimeout(ctx, g.bound)
	defer cancel()
	return fleet.AwaitLeadership(ctx, g.all())
}

func (g *fixedGroup) stop() {
	for _, inst := range g.instances {
		inst.Stop()
	}
	clear(g.instances)
}

// checkSuccessor: a successor's token must be larger than its predecessor's.
func checkSuccessor(prev, next fleet.Leadership) error {
	if next.Status.FencingToken <= prev.Status.FencingToken {
		return fmt.Errorf("%s's token %d is not above %s's %d", next.Instance.Name, next.Status.FencingToken,
			prev.Instance.Name, prev.Status.FencingToken)
	}
	return nil
}

// awaitStatus polls inst's status every 10ms, for at most bound, until
// cond holds.
func awaitStatus(ctx context.Context, inst *fleet.Instance, bound time.Duration, what string, cond func(api.Status) bool) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var (
		st  api.Status
		err error
	)
	for {
		if st, err = inst.Status(ctx); err == nil && cond(st) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s not within %v (last status %+v, err %v)", inst.Name, what, bound, st, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
