package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/proxy"
)

// newProxy builds the forwarding proxy for the one Lease elector leads or
// follows: each request's View is the elector's latest Snapshot judged at
// the moment of forwarding.
func newProxy(cfg config.Config, elector *elect.Elector, clk clock.PassiveClock, reg prometheus.Registerer, log *slog.Logger) (*proxy.Proxy, error) {
	return proxy.New(proxy.Config{
		Upstream:   cfg.ProxyUpstream,
		View:       func(now time.Time) proxy.View { return viewOf(elector.Snapshot(), now) },
		Clock:      clk,
		Registerer: reg,
		Logger:     log.With("component", "proxy"),
		RetryAfter: time.Second,
	})
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
