// Command bench measures leasehold's election against a real kube-apiserver
// (`make bench`): graceful handover and crash failover latency over many
// trials, and the API requests the leader makes per renewal and a watching
// candidate makes while the leader is healthy; and the localhost HTTP API's
// throughput, watcher wake-up latency and memory. It prints tables of
// medians and spreads; all figures come from one run on one apiserver.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/fleet"
	"github.com/leasehold/leasehold/internal/kubetest"
)

func main() {
	var opts options
	flag.IntVar(&opts.handovers, "handovers", 20, "graceful handover trials (SIGTERM to the leader)")
	flag.IntVar(&opts.failovers, "failovers", 5, "crash failover trials (SIGKILL to the leader)")
	flag.DurationVar(&opts.leaseDuration, "lease-duration", 5*time.Second, "LEASEHOLD_LEASE_DURATION")
	flag.DurationVar(&opts.renewDeadline, "renew-deadline", 3*time.Second, "LEASEHOLD_RENEW_DEADLINE")
	flag.DurationVar(&opts.retryPeriod, "retry-period", time.Second, "LEASEHOLD_RETRY_PERIOD")
	flag.IntVar(&opts.renewals, "renewals", 10, "renewal periods to count requests over")
	flag.IntVar(&opts.statusConns, "status-conns", 64, "keep-alive connections loading GET /v1/status")
	flag.DurationVar(&opts.statusLoad, "status-load", 5*time.Second, "how long to load GET /v1/status")
	flag.IntVar(&opts.watchers, "watchers", 1000, "open watchers (half long-poll, half SSE)")
	flag.IntVar(&opts.changes, "changes", 10, "Lease changes the watchers are woken by")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	handovers, failovers, renewals            int
	leaseDuration, renewDeadline, retryPeriod time.Duration
	statusConns, watchers, changes            int
	statusLoad                                time.Duration
}

func run(ctx context.Context, opts options) error {
	cluster, err := kubetest.Start(ctx, kubetest.Options{})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	dir, err := os.MkdirTemp("", "leasehold-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := fleet.Build(ctx, dir)
	if err != nil {
		return err
	}
	ns, err := cluster.CreateNamespace(ctx, "bench")
	if err != nil {
		return err
	}
	group := &group{cfg: fleet.Config{
		Binary: bin, Cluster: cluster, Namespace: ns, Lease: "bench", Dir: dir,
		LeaseDuration: opts.leaseDuration, RenewDeadline: opts.renewDeadline, RetryPeriod: opts.retryPeriod,
	}}
	defer group.stop()
	if err := group.fill(ctx, 3); err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "bench: 3 sidecars, leaseDuration %v, renewDeadline %v, retryPeriod %v\n", opts.leaseDuration, opts.renewDeadline, opts.retryPeriod)
	requests, err := countRequests(ctx, group, opts.retryPeriod, opts.renewals)
	if err != nil {
		return err
	}
	handovers, err := group.trials(ctx, "handover", opts.handovers, syscall.SIGTERM)
	if err != nil {
		return err
	}
	failovers, err := group.trials(ctx, "failover", opts.failovers, syscall.SIGKILL)
	if err != nil {
		return err
	}
	group.stop() // the HTTP figures are measured on a sidecar of their own
	httpFigs, err := benchHTTP(ctx, cluster, group.cfg, opts.statusConns, opts.watchers, opts.changes, opts.statusLoad)
	if err != nil {
		return err
	}
	printTable(os.Stdout, opts, handovers, failovers, requests)
	printHTTPTable(os.Stdout, httpFigs)
	return nil
}
