package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/apphealth"
	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/internal/kubeclient"
	"github.com/leasehold/leasehold/internal/podlabel"
)

// newProber builds health-gated candidacy: the elector, started withdrawn,
// is put in the election when the app turns healthy and taken out (ending
// and releasing a term) when it turns unhealthy.
func newProber(cfg config.AppHealth, elector interface {
	SetCandidate(context.Context, bool, string) (bool, error)
}, clk clock.WithTicker, registry prometheus.Registerer, log *slog.Logger) (*apphealth.Prober, error) {
	pc := cfg.Config()
	pc.Clock, pc.Logger, pc.Metrics = clk, log, apphealth.NewMetrics(registry)
	pc.OnChange = func(ctx context.Context, s apphealth.Status) {
		reason := "app healthy"
		if !s.Healthy {
			reason = fmt.Sprintf("app unhealthy: %d failed probes, last: %s", s.ConsecutiveFailures, s.LastError)
		}
		_, err := elector.SetCandidate(ctx, s.Healthy, reason)
		switch {
		case err == nil, errors.Is(err, elect.ErrStopped), ctx.Err() != nil:
		default:
			// The term has ended all the same; the Lease expires.
			log.Warn("release after the app turned unhealthy failed", "err", err)
		}
	}
	return apphealth.New(pc)
}

// newRanker builds data-aware failover's probe: every rank it reads goes
// to the membership of the one Lease (published on the member Lease, its
// generation on the Lease while leading).
func newRanker(cfg config.AppRank, members *group.Group, clk clock.WithTicker, log *slog.Logger) (*apphealth.RankProber, error) {
	rc := cfg.Config()
	rc.Clock, rc.Logger = clk, log
	rc.OnRank = func(ctx context.Context, r apphealth.Rank) {
		err := members.SetRank(ctx, group.Rank{Known: r.Known, Generation: r.Generation, Position: r.Position}, r.ObservedAt)
		if err != nil && !errors.Is(err, elect.ErrStopped) && ctx.Err() == nil {
			log.Warn("could not hand the app's rank to the election", "err", err)
		}
	}
	return apphealth.NewRank(rc)
}

// newLabelers builds the leader label: "true" on this Pod while it leads,
// "false" otherwise, and stale "true" labels of other Pods of the same
// election cleared by the leader once per lease duration. For the one
// Lease that is one labeler; in a lease group one per Lease, each keeping
// its Lease's key (podlabel.GroupLeaderKey) and following its Lease's
// elector, its series labelled with the Lease as the group's elections'
// are.
func newLabelers(cfg config.Config, restConfig *rest.Config, elected *election, clk clock.WithTicker, registry prometheus.Registerer, log *slog.Logger) ([]*podlabel.Labeler, error) {
	pods, err := kubeclient.NewPodClient(restConfig, cfg.Pod.Namespace)
	if err != nil {
		return nil, err
	}
	var labelers []*podlabel.Labeler
	for _, el := range elected.members.Elections() {
		lease := el.Snapshot().Lease
		lc := cfg.PodLabelConfig(lease)
		reg, llog := registry, log
		if cfg.Grouped() {
			reg, llog = prometheus.WrapRegistererWith(prometheus.Labels{"lease": lease}, registry), log.With("lease", lease)
		}
		lc.Pods, lc.Source, lc.Clock, lc.Logger, lc.Metrics = pods, el.Elector, clk, llog, podlabel.NewMetrics(reg)
		l, err := podlabel.New(lc)
		if err != nil {
			return nil, err
		}
		labelers = append(labelers, l)
	}
	return labelers, nil
}

// runLabelers runs every labeler, each in its own goroutine, until ctx
// ends: they then write their last false (if their Lease's label may be
// true) at the same time, and it returns when all have.
func runLabelers(labelers []*podlabel.Labeler) func(context.Context) error {
	return func(ctx context.Context) error {
		errs := make([]error, len(labelers))
		var wg sync.WaitGroup
		for i, l := range labelers {
			wg.Go(func() { errs[i] = l.Run(ctx) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
}
