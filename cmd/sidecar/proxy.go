package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/proxy"
)

// newProxy builds the forwarding proxy for the election: for its one Lease,
// or for each Lease of its group (a request names its Lease: see
// internal/proxy). Each request's View is its Lease's elector's latest
// Snapshot judged at the moment of forwarding.
func newProxy(cfg config.Config, e *election, clk clock.PassiveClock, reg prometheus.Registerer, log *slog.Logger) (*proxy.Proxy, error) {
	pc := proxy.Config{
		Upstream:   cfg.ProxyUpstream,
		Clock:      clk,
		Registerer: reg,
		Logger:     log.With("component", "proxy"),
		RetryAfter: time.Second,
	}
	if e.elector != nil {
		pc.Lease = cfg.LeaseNamespace + "/" + cfg.LeaseName
		pc.View = viewFunc(e.elector.Snapshot)
	} else {
		for _, snapshot := range proxiedSnapshots(e) {
			s := snapshot()
			pc.Leases = append(pc.Leases, proxy.Lease{Name: s.Namespace + "/" + s.Lease, View: viewFunc(snapshot)})
		}
	}
	return proxy.New(pc)
}

// proxiedSnapshots give the latest Snapshot of each Lease the proxy
// serves: each of the election's, one Lease or a group's.
func proxiedSnapshots(e *election) []func() *elect.Snapshot {
	var out []func() *elect.Snapshot
	for _, el := range e.members.Elections() {
		out = append(out, el.Snapshot)
	}
	return out
}

// viewFunc is the proxy's View of the Lease whose latest Snapshot snapshot
// gives.
func viewFunc(snapshot func() *elect.Snapshot) func(time.Time) proxy.View {
	return func(now time.Time) proxy.View { return viewOf(snapshot(), now) }
}

// viewOf is what the proxy needs of s at now: leading (with the term's
// token) only while s.IsLeader(now), else the valid leader's advertised
// address, if any.
func viewOf(s *elect.Snapshot, now time.Time) proxy.View {
	if s.IsLeader(now) && s.Token != 0 {
		return proxy.View{Leading: true, Token: s.Token, Term: s.Term}
	}
	return proxy.View{LeaderAddress: s.ValidLeaderAddress(now)}
}

// newProxyServer serves p. Unlike the API's, it sets no ReadTimeout: the
// bodies it streams to the app are the app's business (its clients'
// uploads, WebSockets); it bounds only the headers.
func newProxyServer(p *proxy.Proxy) *http.Server {
	return &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
	}
}

// followEveryTerm runs followTerms for each Lease's snapshot, until ctx
// ends.
func followEveryTerm(ctx context.Context, snapshots []func() *elect.Snapshot, clk clock.WithTicker, p *proxy.Proxy) error {
	var wg sync.WaitGroup
	for _, snapshot := range snapshots {
		wg.Go(func() { _ = followTerms(ctx, snapshot, clk, p) }) // it ends with ctx, nil
	}
	wg.Wait()
	return nil
}

// followTerms closes the proxy's long-lived connections of each term that
// ends (proxy.CloseEndedTerms), until ctx ends: it asks the proxy to check
// whenever snapshot publishes a new state (a step-down, another holder, a
// new term: each moves the Index) and when the current term's validity
// runs out without a renewal (which publishes nothing), on clk. It reads
// the latest snapshot before each check and waits on that one's Changed,
// so no change between the two is missed.
func followTerms(ctx context.Context, snapshot func() *elect.Snapshot, clk clock.WithTicker, p *proxy.Proxy) error {
	for {
		s := snapshot()
		p.CloseEndedTerms()
		var expiry <-chan time.Time
		var timer clock.Timer
		if left := s.ValidFor(clk.Now()); left > 0 {
			timer = clk.NewTimer(left)
			expiry = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-s.Changed():
		case <-expiry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// lingerUntilQuiet waits, while the proxy keeps serving, until no other
// proxy has forwarded a request to it for quiet (its followers have seen
// the new leader and forward there), or until ctx ends, on clk.
func lingerUntilQuiet(ctx context.Context, p *proxy.Proxy, clk clock.WithTicker, quiet time.Duration) {
	for {
		left := quiet - clk.Since(p.LastForwarded())
		if left <= 0 {
			return
		}
		timer := clk.NewTimer(left)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}
