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
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/apphealth"
	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/kubeclient"
	"github.com/leasehold/leasehold/internal/podlabel"
	"github.com/leasehold/leasehold/internal/proxy"
)

// httpShutdownTimeout bounds how long open requests may take to finish once
// the servers stop (long-polls and streams end at once:
// EndBlockingRequests).
const httpShutdownTimeout = 2 * time.Second

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
	// clock is the time source of the election, prober, labeler and API;
	// nil means the real clock.
	clock clock.WithTicker
	// log receives every component's log lines.
	log *slog.Logger
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
	election *election
	prober   *apphealth.Prober // nil without health-gated candidacy
	labeler  *podlabel.Labeler // nil without the leader label
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
// (one elector, or a lease group), the app-health prober and the leader
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
	s := &sidecar{cfg: cfg, log: d.log, election: elected}
	apiOptions := httpapi.Options{
		LeaseDuration: cfg.LeaseDuration,
		Registry:      d.registry,
		Registerer:    leasehold,
		Version:       currentVersion().Version,
		Logger:        d.log,
		Clock:         d.clock,
		Advertises:    cfg.AdvertiseAddress != "",

		MaxBlockingRequests: cfg.MaxBlockingRequests,
	}
	elected.apiOptions(&apiOptions)
	if cfg.AppHealth.Enabled() {
		if s.prober, err = newProber(cfg.AppHealth, elected.candidacy, d.clock, leasehold, d.log); err != nil {
			return nil, err
		}
		apiOptions.AppHealth = s.prober
	}
	if cfg.PodLabel != "" {
		if s.labeler, err = newLabeler(cfg, d.rest, elected.elector, d.clock, leasehold, d.log); err != nil {
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
		if s.proxy, err = newProxy(cfg, elected.elector, d.clock, leasehold, d.log); err != nil {
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
// delivers leader:false) and releases its Leases; the labeler, having seen
// that, takes the leader label off this Pod; then blocking requests end,
// and those that would still block are answered 503 with Retry-After, so
// clients back off instead of polling in a loop; then the servers close.
// The forwarding proxy, when on, serves throughout: once the election has
// stopped it forwards to the new leader (or answers 503), and in-flight
// requests finish as the servers close. Run closes the listeners; call it
// once.
func (s *sidecar) Run(ctx context.Context) error {
	type job struct {
		name string
		run  func(context.Context) error
	}
	jobs := []job{{"election", s.election.run}}
	if s.prober != nil {
		jobs = append(jobs, job{"app health", s.prober.Run})
	}
	if s.labeler != nil {
		jobs = append(jobs, job{"pod label", s.labeler.Run})
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
		"appHealth", s.cfg.AppHealth.URL, "podLabel", s.cfg.PodLabel,
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
	step(stepReadiness)
	tasks["app health"].stop()
	step(stepProber)
	tasks["election"].stop()
	step(stepElection)
	tasks["pod label"].stop()
	step(stepLabeler)
	s.api.EndBlockingRequests()
	step(stepBlocking)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
	defer cancel()
	for _, srv := range s.servers {
		failure = errors.Join(failure, srv.server.Shutdown(shutdownCtx))
	}
	if s.proxy != nil {
		s.proxy.CloseIdleConnections()
	}
	step(stepServers)
	if failure == nil {
		s.log.Info("leasehold stopped")
	}
	return failure
}
