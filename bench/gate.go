package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/pkg/api"
)

// gateFigures are what the health-gated candidacy trials showed.
type gateFigures struct {
	interval, timeout time.Duration // of the app-health probes
	threshold         int
	takeovers         []time.Duration // the leader's app fails → another instance leads
	misses            int             // trials in which no other instance led within the bound
	stillLeader       int             // trials in which the old leader still said leader:true once its successor led
}

// healthApp stands in for an app container's health endpoint: it answers
// 200 while healthy and 503 while failing (an app that runs but reports
// itself broken; the probe gets its answer at once, so the probe timeout
// never comes into play).
type healthApp struct {
	failing atomic.Bool
	server  *httptest.Server
}

func newHealthApp() *healthApp {
	a := &healthApp{}
	a.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if a.failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	return a
}

func (a *healthApp) url() string { return a.server.URL + "/healthz" }

// benchGate runs opts.appTrials trials on three instances, each probing an
// app of its own: wait for a leader, wait a random phase of the probe
// cycle, make the leader's app fail, and time until another instance's
// GET /v1/leader long-poll answers 200; check its token is larger; then
// make the old leader's app healthy again and wait until it is a candidate
// again.
func benchGate(ctx context.Context, cluster *kubetest.Cluster, base fleet.Config, opts options) (gateFigures, error) {
	f := gateFigures{interval: opts.appInterval, timeout: opts.appTimeout, threshold: opts.appThreshold}
	ns, err := cluster.CreateNamespace(ctx, "bench-app")
	if err != nil {
		return f, err
	}
	apps := map[string]*healthApp{}
	configs := map[string]fleet.Config{}
	for i := range 3 {
		name := fmt.Sprintf("app-%d", i+1)
		app := newHealthApp()
		defer app.server.Close()
		cfg := base
		cfg.Namespace, cfg.Lease = ns, "bench-app"
		cfg.Env = append(slices.Clone(base.Env),
			"LEASEHOLD_APP_HEALTH_URL="+app.url(),
			"LEASEHOLD_APP_HEALTH_INTERVAL="+opts.appInterval.String(),
			"LEASEHOLD_APP_HEALTH_TIMEOUT="+opts.appTimeout.String(),
			"LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD="+strconv.Itoa(opts.appThreshold),
		)
		apps[name], configs[name] = app, cfg
	}
	// Detection takes up to threshold × interval; after that a successor
	// leads at once (release) or, at worst, once the Lease expires.
	bound := time.Duration(opts.appThreshold)*opts.appInterval + 3*base.LeaseDuration
	g := newFixedGroup(configs, bound)
	defer g.stop() // before the apps close: deferred later, runs first
	if err := g.startAll(ctx); err != nil {
		return f, err
	}
	for _, inst := range g.all() {
		if err := awaitCandidate(ctx, inst, bound); err != nil {
			return f, err
		}
	}
	for i := range opts.appTrials {
		leader, err := g.leader(ctx)
		if err != nil {
			return f, err
		}
		if err := sleepRandom(ctx, 2*opts.appInterval); err != nil {
			return f, err
		}
		app := apps[leader.Instance.Name]
		next, took, err := awaitFirst(ctx, g.others(leader.Instance), bound, func() error { app.failing.Store(true); return nil })
		switch {
		case errors.Is(err, fleet.ErrNoLeader) && ctx.Err() == nil:
			f.misses++
			fmt.Fprintf(os.Stderr, "bench: app health: trial %2d: no successor within %v\n", i+1, bound)
		case err != nil:
			return f, fmt.Errorf("trial %d: %w", i+1, err)
		default:
			if err := checkSuccessor(leader, next); err != nil {
				return f, fmt.Errorf("trial %d: %w", i+1, err)
			}
			old, err := leader.Instance.Status(ctx)
			if err != nil {
				return f, fmt.Errorf("trial %d: %s: %w", i+1, leader.Instance.Name, err)
			}
			if old.Leader {
				f.stillLeader++
			}
			f.takeovers = append(f.takeovers, took)
			fmt.Fprintf(os.Stderr, "bench: app health: trial %2d: %v (%s → %s; old leader: leader=%v candidate=%v)\n",
				i+1, took.Round(time.Microsecond), leader.Instance.Name, next.Instance.Name, old.Leader, old.Candidate)
		}
		app.failing.Store(false)
		if err := awaitCandidate(ctx, leader.Instance, bound); err != nil {
			return f, err
		}
	}
	return f, nil
}

// awaitCandidate waits until inst has seen its app healthy and campaigns.
func awaitCandidate(ctx context.Context, inst *fleet.Instance, bound time.Duration) error {
	return awaitStatus(ctx, inst, bound, "a candidate with a healthy app", func(st api.Status) bool {
		return st.Candidate && st.AppHealth != nil && st.AppHealth.Healthy
	})
}
