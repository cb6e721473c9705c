package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kubeversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/apphealth"
	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/kubeclient"
	"github.com/leasehold/leasehold/internal/podlabel"
	"github.com/leasehold/leasehold/internal/proxy"
	"github.com/leasehold/leasehold/internal/serverversion"
)

// httpShutdownTimeout bounds the servers' stop, from the moment blocking
// requests have ended (long-polls and streams end at once:
// EndBlockingRequests): the proxy's linger (at most proxyLingerTimeout of
// it), then the time open requests may take to finish. A connection still
// open at its end is closed, and the stop is still a clean one (exit 0).
const httpShutdownTimeout = 2 * time.Second

// serverVersionTimeout bounds the read of the apiserver's version at start.
const serverVersionTimeout = 5 * time.Second

// proxyQuiet is how long the forwarding proxy of a stopping sidecar must
// have received no request from another proxy before it closes: its
// followers, which learn the new leader from the Lease within a round trip,
// have stopped forwarding to it, so closing its kept-alive connections
// cannot cut a request they are sending (a request written onto a
// connection as the server closes it has an unknown fate: a 502). Until
// then it serves as any non-leader: it forwards to the new leader if it
// knows it, else answers 503. It waits so at most proxyLingerTimeout.
const (
	proxyQuiet         = 100 * time.Millisecond
	proxyLingerTimeout = httpShutdownTimeout / 2
)

// sidecarDeps is what a sidecar takes from its process (serve) or its test:
// everything it does not build from its configuration.
type sidecarDeps struct {
	// rest reaches the apiserver (kubeclient.New: throttled for the
	// group's steady rate, requests counted).
	rest *rest.Config
	// api and ops are the bound listeners of LEASEHOLD_API_ADDR and
	// LEASEHOLD_OPS_ADDR, and proxy LEASEHOLD_PROXY_ADDR's (nil without the
	// forwarding proxy); Run closes them.
	api, ops, proxy net.Listener
	// registry serves /metrics; the sidecar registers its leasehold_*
	// series in it, labelled with its Lease or group and namespace.
	registry *prometheus.Registry
	// clock is the time source of the election, prober, labeler, API and
	// proxy; nil means the real clock.
	clock clock.WithTicker
	// log receives every component's log lines.
	log *slog.Logger
	// serverClock, when not nil, is the one rest's transport feeds
	// (kubeclient.Options.ServerClock): exported and in every status.
	serverClock *kubeclient.ServerClock
}

// Shutdown steps, in order (sidecar.stepped).
const (
	stepReadiness = "readiness fails"
	stepProber    = "prober stopped"
	stepElection  = "election stopped and released"
	stepLabeler   = "labeler stopped"
	stepBlocking  = "blocking requests ended"
	stepServers   = "servers closed"
)

// sidecar is one leasehold sidecar, built from its configuration by
// newSidecar and run once by Run.
type sidecar struct {
	cfg      config.Config
	log      *slog.Logger
	clock    clock.WithTicker
	election *election
	version  *serverversion.Checker
	prober   *apphealth.Prober     // nil without health-gated candidacy
	ranker   *apphealth.RankProber // nil without data-aware failover
	labelers []*podlabel.Labeler   // none without the leader label; one per Lease of a group
	api      *httpapi.Server
	proxy    *proxy.Proxy // nil without the forwarding proxy
	servers  []server

	// stepped, when not nil, is called after each step of the shutdown
	// (step* constants, in order, every one of them, also when its
	// component is off), from Run's goroutine: the shutdown waits until it
	// returns. For tests that look at the world between two steps.
	stepped func(step string)
}

// server is one of the sidecar's HTTP servers, with its listener.
type server struct {
	name     string
	server   *http.Server
	listener net.Listener
}

// newSidecar builds the sidecar cfg describes, wired to d: the election
// (a lease group, of one Lease or several), the app-health prober and the leader
// label when configured, and the HTTP API and OPS servers on d's listeners.
// Nothing runs, and nothing is written to the apiserver, before Run.
func newSidecar(cfg config.Config, d sidecarDeps) (*sidecar, error) {
	// Every leasehold_* series (and leader_election_master_status) carries
	// the election it belongs to (its Lease; in a group, the group, and each
	// election's series their lease too), so that alerts and dashboards
	// group by Lease; the registry's other collectors are the process's own.
	leasehold := prometheus.WrapRegistererWith(metricLabels(cfg), d.registry)
	leases, err := kubeclient.NewLeaseClient(d.rest, cfg.LeaseNamespace)
	if err != nil {
		return nil, err
	}
	elected, err := newElection(cfg, leases, d.clock, leasehold, d.log)
	if err != nil {
		return nil, err
	}
	s := &sidecar{cfg: cfg, log: d.log, clock: d.clock, election: elected}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	readVersion := func(ctx context.Context) (kubeversion.Info, error) { return kubeclient.ServerVersion(ctx, d.rest) }
	if s.version, err = serverversion.NewChecker(readVersion, serverVersionTimeout, d.log, leasehold); err != nil {
		return nil, err
	}
	apiOptions := httpapi.Options{
		LeaseDuration:    cfg.LeaseDuration,
		Registry:         d.registry,
		Registerer:       leasehold,
		Version:          currentVersion().Version,
		Logger:           d.log,
		Clock:            d.clock,
		Advertises:       cfg.AdvertiseAddress != "",
		ApiserverVersion: s.version,

		MaxBlockingRequests: cfg.MaxBlockingRequests,
	}
	elected.apiOptions(&apiOptions)
	if d.serverClock != nil {
		leasehold.MustRegister(d.serverClock)
		apiOptions.ServerClock = d.serverClock.Offset
	}
	if cfg.AppHealth.Enabled() {
		if s.prober, err = newProber(cfg.AppHealth, elected.members, d.clock, leasehold, d.log); err != nil {
			return nil, err
		}
		apiOptions.AppHealth = s.prober
	}
	if cfg.AppRank.Enabled() {
		if s.ranker, err = newRanker(cfg.AppRank, elected.members, d.clock, d.log); err != nil {
			return nil, err
		}
		members := elected.members
		apiOptions.Rank = func() group.RankStatus { return members.Rank(0) }
	}
	if cfg.PodLabel != "" {
		if s.labelers, err = newLabelers(cfg, d.rest, elected, d.clock, leasehold, d.log); err != nil {
			return nil, err
		}
	}
	if s.api, err = httpapi.New(apiOptions); err != nil {
		return nil, err
	}
	// The OPS listener is reachable from any pod: it keeps no idle
	// connection (see httpapi.OpsHandler).
	ops := httpapi.NewHTTPServer(withPprof(s.api.OpsHandler(), cfg.Pprof))
	ops.SetKeepAlivesEnabled(false)
	s.servers = []server{
		{"api", httpapi.NewHTTPServer(s.api.APIHandler()), d.api},
		{"ops", ops, d.ops},
	}
	if cfg.ProxyAddr != "" {
		if s.proxy, err = newProxy(cfg, elected, d.clock, leasehold, d.log); err != nil {
			return nil, err
		}
		s.servers = append(s.servers, server{"proxy", newProxyServer(s.proxy), d.proxy})
	}
	return s, nil
}

// Run runs the sidecar until ctx ends (nil error: a signal) or one of its
// tasks or servers fails (that error), then shuts down in order: readiness
// fails (and nothing else: long-polls and streams keep serving); the
// prober stops, so candidacy no longer changes; the election stops
// reporting leadership, publishes that (every open long-poll and stream
// delivers leader:false) and releases its Leases; the labelers (one per
// Lease of a group), having seen that, take the leader labels off this
// Pod, all at once; then blocking requests end,
// and those that would still block are answered 503 with Retry-After, so
// clients back off instead of polling in a loop; then the servers close,
// within httpShutdownTimeout: each stops accepting, open requests finish,
// and what is still open at the bound is closed (the stop is still clean:
// nil error).
//
// The forwarding proxy, when on, serves throughout, and closes last: when
// the election's step-down ends its term (each Lease's, in a group), the
// upgraded connections and streams it forwarded under that term close
// (followTerms, per Lease); from then on it forwards to the new leader (or
// answers 503), and once the servers stop it keeps doing so until no other
// proxy has forwarded to it for proxyQuiet (its followers forward to the
// new leader), at most proxyLingerTimeout, before it closes its listener.
// Run closes the listeners; call it once.
//
// Beside the election, Run reads the apiserver's version once
// (serverversion.Checker: logged, in every status and in the metrics); the
// election does not wait for it, and a read still under way when the
// shutdown begins is cut short.
func (s *sidecar) Run(ctx context.Context) error {
	type job struct {
		name string
		run  func(context.Context) error
	}
	jobs := []job{{"election", s.election.run}, {"apiserver version", s.version.Run}}
	if s.prober != nil {
		jobs = append(jobs, job{"app health", s.prober.Run})
	}
	if s.ranker != nil {
		jobs = append(jobs, job{"app rank", s.ranker.Run})
	}
	if len(s.labelers) > 0 {
		jobs = append(jobs, job{"pod label", runLabelers(s.labelers)})
	}
	if s.proxy != nil {
		snapshots := proxiedSnapshots(s.election)
		jobs = append(jobs, job{"proxy terms", func(ctx context.Context) error {
			return followEveryTerm(ctx, snapshots, s.clock, s.proxy)
		}})
	}
	// Every reason to stop but ctx: a task or a server failing. Each of
	// them sends at most once, so one slot each never blocks.
	failures := make(chan error, len(jobs)+len(s.servers))
	tasks := map[string]*task{}
	for _, j := range jobs {
		t := startTask(j.name, j.run, failures)
		tasks[j.name] = t
		defer t.stop() // on a panic; a stopped task stops at once
	}
	for _, srv := range s.servers {
		go func() {
			if err := srv.server.Serve(srv.listener); !errors.Is(err, http.ErrServerClosed) {
				failures <- fmt.Errorf("%s server: %w", srv.name, err)
			}
		}()
	}
	s.log.Info("leasehold started", "version", currentVersion().Version, "identity", s.cfg.Identity,
		"namespace", s.cfg.LeaseNamespace, "leases", s.cfg.Leases, "group", s.cfg.Group, "candidate", s.cfg.Candidate,
		"api", s.servers[0].listener.Addr().String(), "ops", s.servers[1].listener.Addr().String(),
		"maxBlockingRequests", s.cfg.MaxBlockingRequests,
		"appHealth", s.cfg.AppHealth.URL, "appRank", s.cfg.AppRank.URL, "podLabel", s.cfg.PodLabel,
		"advertise", s.cfg.AdvertiseAddress, "proxy", s.cfg.ProxyAddr, "handoverToSuccessor", s.cfg.Handover)

	var failure error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down: signal received")
	case failure = <-failures:
	}

	step := func(name string) {
		if s.stepped != nil {
			s.stepped(name)
		}
	}
	s.api.BeginShutdown()
	tasks["apiserver version"].stop()
	step(stepReadiness)
	tasks["app health"].stop()
	tasks["app rank"].stop()
	step(stepProber)
	tasks["election"].stop()
	step(stepElection)
	tasks["pod label"].stop()
	step(stepLabeler)
	s.api.EndBlockingRequests()
	step(stepBlocking)
	failure = errors.Join(failure, s.closeServers())
	tasks["proxy terms"].stop()
	step(stepServers)
	if failure == nil {
		s.log.Info("leasehold stopped")
	}
	return failure
}

// closeServers stops the HTTP servers within httpShutdownTimeout (see Run):
// the proxy lingers first, while every server still serves; then each
// server stops accepting and closes its idle connections, and open
// requests may finish until the bound, when what is still open is closed
// (logged, not an error). It returns only the errors of closing the
// listeners.
func (s *sidecar) closeServers() error {
	ctx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
	defer cancel()
	if s.proxy != nil {
		linger, stop := context.WithTimeout(ctx, proxyLingerTimeout)
		lingerUntilQuiet(linger, s.proxy, s.clock, proxyQuiet)
		stop()
	}
	var failure error
	for _, srv := range s.servers {
		err := srv.server.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			// Shutdown has closed the listener: Close closes the connections.
			s.log.Warn("closing the connections still open at the shutdown bound", "server", srv.name, "bound", httpShutdownTimeout)
			_ = srv.server.Close()
			err = nil
		}
		failure = errors.Join(failure, err)
	}
	if s.proxy != nil {
		s.proxy.CloseIdleConnections()
	}
	return failure
}
