package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/leasehold/leasehold/internal/apphealth"
	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/kubeclient"
	"github.com/leasehold/leasehold/internal/logging"
	"github.com/leasehold/leasehold/internal/podlabel"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitConfig = 2
)

// httpShutdownTimeout bounds how long open requests may take to finish once
// the servers stop (long-polls and streams end at once:
// EndBlockingRequests).
const httpShutdownTimeout = 2 * time.Second

// run wires configuration → Kubernetes client → elector → HTTP servers →
// signals, and returns the exit status.
func run(stderr io.Writer) int {
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintln(stderr, "leasehold:", err)
		if _, ok := errors.AsType[*config.Error](err); ok {
			return exitConfig
		}
		return exitFailed
	}
	log := logging.New(stderr, cfg.LogFormat, cfg.LogLevel)
	if err := serve(cfg, log); err != nil {
		log.Error("leasehold stopped", "err", err)
		return exitFailed
	}
	return exitOK
}

// serve runs the sidecar until a signal (nil error) or a failure.
func serve(cfg config.Config, log *slog.Logger) error {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every leasehold_* series (and leader_election_master_status) carries
	// the election it belongs to (its Lease; in a group, the group, and each
	// election's series their lease too), so that alerts and dashboards
	// group by Lease; the Go and process collectors above are the
	// process's own.
	leasehold := prometheus.WrapRegistererWith(metricLabels(cfg), registry)

	restConfig, err := kubeclient.New(kubeclient.Options{
		Kubeconfig: os.Getenv("KUBECONFIG"),
		UserAgent:  "leasehold/" + currentVersion().Version,
		Requests:   kubeclient.NewRequestMetrics(leasehold),
		Steady:     steadyRequestRate(cfg),
	})
	if err != nil {
		return err
	}
	leases, err := kubeclient.NewLeaseClient(restConfig, cfg.LeaseNamespace)
	if err != nil {
		return err
	}
	elected, err := newElection(cfg, leases, leasehold, log)
	if err != nil {
		return err
	}
	apiOptions := httpapi.Options{
		LeaseDuration: cfg.LeaseDuration,
		Registry:      registry,
		Registerer:    leasehold,
		Version:       currentVersion().Version,
		Logger:        log,
	}
	elected.apiOptions(&apiOptions)
	var prober *apphealth.Prober
	if cfg.AppHealth.Enabled() {
		if prober, err = newProber(cfg.AppHealth, elected.candidacy, leasehold, log); err != nil {
			return err
		}
		apiOptions.AppHealth = prober
	}
	var labeler *podlabel.Labeler
	if cfg.PodLabel != "" {
		if labeler, err = newLabeler(cfg, restConfig, elected.elector, leasehold, log); err != nil {
			return err
		}
	}
	api, err := httpapi.New(apiOptions)
	if err != nil {
		return err
	}
	apiListener, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("LEASEHOLD_API_ADDR: %w", err)
	}
	opsListener, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		apiListener.Close()
		return fmt.Errorf("LEASEHOLD_OPS_ADDR: %w", err)
	}
	apiServer := httpapi.NewHTTPServer(api.APIHandler())
	opsServer := httpapi.NewHTTPServer(withPprof(api.OpsHandler(), cfg.Pprof))

	// One channel collects every reason to stop: a server or a background
	// task failing. Signals arrive through signals.
	failures := make(chan error, 5)
	signals, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	election := startTask("election", elected.run, failures)
	defer election.stop()
	var probing, labeling *task
	if prober != nil {
		probing = startTask("app health", prober.Run, failures)
		defer probing.stop()
	}
	if labeler != nil {
		labeling = startTask("pod label", labeler.Run, failures)
		defer labeling.stop()
	}
	for name, s := range map[string]struct {
		server   *http.Server
		listener net.Listener
	}{"api": {apiServer, apiListener}, "ops": {opsServer, opsListener}} {
		go func() {
			if err := s.server.Serve(s.listener); !errors.Is(err, http.ErrServerClosed) {
				failures <- fmt.Errorf("%s server: %w", name, err)
			}
		}()
	}
	log.Info("leasehold started", "version", currentVersion().Version, "identity", cfg.Identity,
		"namespace", cfg.LeaseNamespace, "leases", cfg.Leases, "group", cfg.Group, "candidate", cfg.Candidate, "api", apiListener.Addr().String(), "ops", opsListener.Addr().String(),
		"appHealth", cfg.AppHealth.URL, "podLabel", cfg.PodLabel)

	var failure error
	select {
	case <-signals.Done():
		log.Info("shutting down: signal received")
	case failure = <-failures:
	}

	// Shutdown order: readiness fails (and nothing else: long-polls and
	// streams keep serving); the prober stops, so candidacy no longer
	// changes; the elector stops reporting leadership, publishes that (every
	// open long-poll and stream delivers leader:false) and releases the
	// Lease; the labeler, having seen that, takes the leader label off this
	// Pod; then blocking requests end, and those that would still block are
	// answered 503 with Retry-After, so clients back off instead of polling
	// in a loop; then the servers close.
	api.BeginShutdown()
	probing.stop()
	election.stop()
	labeling.stop()
	api.EndBlockingRequests()
	ctx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
	defer cancel()
	failure = errors.Join(failure, apiServer.Shutdown(ctx), opsServer.Shutdown(ctx))
	if failure == nil {
		log.Info("leasehold stopped")
	}
	return failure
}
