package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/kubeclient"
	"github.com/leasehold/leasehold/internal/logging"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitConfig = 2
)

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

// serve runs the sidecar until a signal (nil error) or a failure: it
// takes from the process what newSidecar needs (the registry with the Go
// and process collectors, the apiserver's configuration from KUBECONFIG or
// the cluster, the two listeners) and runs the sidecar until SIGTERM or
// SIGINT.
func serve(cfg config.Config, log *slog.Logger) error {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	serverClock := kubeclient.NewServerClock(nil)
	restConfig, err := kubeclient.New(kubeclient.Options{
		Kubeconfig:  os.Getenv("KUBECONFIG"),
		UserAgent:   "leasehold/" + currentVersion().Version,
		Requests:    kubeclient.NewRequestMetrics(prometheus.WrapRegistererWith(metricLabels(cfg), registry)),
		ServerClock: serverClock,
		Steady:      steadyRequestRate(cfg),
	})
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
	var proxyListener net.Listener
	if cfg.ProxyAddr != "" {
		if proxyListener, err = net.Listen("tcp", cfg.ProxyAddr); err != nil {
			apiListener.Close()
			opsListener.Close()
			return fmt.Errorf("LEASEHOLD_PROXY_ADDR: %w", err)
		}
	}
	sc, err := newSidecar(cfg, sidecarDeps{
		rest: restConfig, api: apiListener, ops: opsListener, proxy: proxyListener, registry: registry, log: log,
		serverClock: serverClock,
	})
	if err != nil {
		apiListener.Close()
		opsListener.Close()
		if proxyListener != nil {
			proxyListener.Close()
		}
		return err
	}
	signals, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	return sc.Run(signals)
}
