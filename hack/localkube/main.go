// Command localkube runs the test harness's real etcd and kube-apiserver on
// loopback for people and scripts (`make kube`). It prints
// KUBECONFIG=<path> on stdout once the apiserver is ready, and stops both
// processes on SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localkube:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cluster, err := kubetest.Start(ctx, kubetest.Options{})
	if err != nil {
		return err
	}
	fmt.Printf("KUBECONFIG=%s\n", cluster.Admin().Kubeconfig)
	fmt.Fprintf(os.Stderr, "localkube: kube-apiserver on %s; press Ctrl-C to stop\n", cluster.Host())
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "localkube: stopping")
	return cluster.Stop()
}
